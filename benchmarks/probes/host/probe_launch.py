"""Probe: the host cost of one kernel launch through cuda-bindings, by form (issue 9's host
time). For the prepared configuration of `matmul(a, b_kn)` at 128³ fp16, times back-to-back
launches (no synchronization in between, wall clock / launches, median of rounds) of:
the configuration's ReusableLaunch; a bare cuLaunchKernelEx with its prepared config; and
cuLaunchKernel (no attributes) with the stream as an int and as a prebuilt CUstream.

    PYTHONPATH=src python benchmarks/probes/host/probe_launch.py [--json out.json]
"""
import argparse, json, statistics, time
import torch
import gemm_ladder as gl
from gemm_ladder.runtime import driver, fastconfig, fastpath

ap = argparse.ArgumentParser()
ap.add_argument("--calls", type=int, default=2000)
ap.add_argument("--rounds", type=int, default=7)
ap.add_argument("--json", default=None)
args = ap.parse_args()
cu = driver._cu()
dt = torch.float16
a = torch.randn(128, 128, device="cuda").to(dt)
b_kn = torch.randn(128, 128, device="cuda").to(dt)
gl.matmul(a, b_kn)
cfg = fastpath.config_for("mm", a, b_kn, None)
L = cfg.launch
stream = fastconfig._raw_stream(torch.cuda.current_device())
L(stream, ())  # the args hold the last call's maps and pointers: a valid launch
f, argp, conf = L.kernel.function, L._arg_ptr, L._config
gx, gy, gz = L.grid
bx, by, bz = conf.blockDimX, conf.blockDimY, conf.blockDimZ
smem = conf.sharedMemBytes
cs = cu.CUstream(stream)
launch_ex, launch = cu.cuLaunchKernelEx, cu.cuLaunchKernel
forms = {
    "ReusableLaunch (as the fast path)": lambda: L(stream, ()),
    "cuLaunchKernelEx(config)": lambda: launch_ex(conf, f, argp, 0),
    "cuLaunchKernel(stream int)": lambda: launch(f, gx, gy, gz, bx, by, bz, smem, stream, argp, 0),
    "cuLaunchKernel(CUstream)": lambda: launch(f, gx, gy, gz, bx, by, bz, smem, cs, argp, 0),
    "matmul(a, b_kn) full call": lambda: gl.matmul(a, b_kn),
    "torch.matmul(a, b_kn)": lambda: torch.matmul(a, b_kn),
}
for fn in forms.values():  # each must launch without error
    r = fn()
    if isinstance(r, tuple) and r and r[0] != cu.CUresult.CUDA_SUCCESS:
        raise SystemExit(f"launch failed: {r}")
torch.cuda.synchronize()
res = {k: [] for k in forms}
for _ in range(args.rounds):
    for name, fn in forms.items():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(args.calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        res[name].append((t1 - t0) / args.calls * 1e6)
print(f"host us per launch, {args.calls} back-to-back, median of {args.rounds} rounds; kernel {cfg.step.key}")
for name, v in res.items():
    print(f"  {name:40s} {statistics.median(v):6.2f}  (min {min(v):.2f})")
if args.json:
    json.dump({k: dict(median=statistics.median(v), rounds=v) for k, v in res.items()}, open(args.json, "w"), indent=1)
