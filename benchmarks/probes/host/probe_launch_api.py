"""Probe: host µs per launch of the library's 128³ matmul(a, b_kn) kernel through the
cuda-bindings driver API — cuLaunchKernelEx (what ReusableLaunch calls, with and without its
Python wrapper) against cuLaunchKernel (no launch attributes) — beside the whole
gemm_ladder.matmul call and torch.matmul. 2000 back-to-back calls, median of 7 rounds.

    PYTHONPATH=src python benchmarks/probes/host/probe_launch_api.py
"""
import statistics
import time

import torch

import gemm_ladder
from gemm_ladder.runtime import driver, fastpath

CALLS, ROUNDS = 2000, 7
a = torch.randn(128, 128, device="cuda").half()
b_kn = torch.randn(128, 128, device="cuda").half()
gemm_ladder.matmul(a, b_kn)
cfg = fastpath.config_for("mm", a, b_kn)
rl = cfg.launch
cu = driver._cu()
stream = torch.cuda.current_stream().cuda_stream
cs = cu.CUstream(stream)
fn, argp, conf = rl.kernel.function, rl._arg_ptr, rl._config
g = (conf.gridDimX, conf.gridDimY, conf.gridDimZ)
blk = (conf.blockDimX, conf.blockDimY, conf.blockDimZ)
smem = conf.sharedMemBytes
maps = cfg._maps._d.get((a.data_ptr(), b_kn.data_ptr(), 0))
print("step", cfg.step.key, "grid", g, "block", blk, "smem", smem, "attrs", conf.numAttrs)


def ex():
    cu.cuLaunchKernelEx(conf, fn, argp, 0)


def plain():
    cu.cuLaunchKernel(fn, g[0], g[1], g[2], blk[0], blk[1], blk[2], smem, cs, argp, 0)


def reusable():
    rl(stream)


def full():
    gemm_ladder.matmul(a, b_kn)


def tor():
    torch.matmul(a, b_kn)


forms = {"cuLaunchKernelEx (bindings, direct)": ex, "cuLaunchKernel (bindings, direct)": plain,
         "ReusableLaunch call (as the library)": reusable, "gemm_ladder.matmul(a, b_kn)": full,
         "torch.matmul(a, b_kn)": tor}
for f in forms.values():
    f()
torch.cuda.synchronize()
res = {k: [] for k in forms}
for r in range(ROUNDS):
    for name, f in (list(forms.items()) if r % 2 == 0 else list(reversed(forms.items()))):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(CALLS):
            f()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        res[name].append((t1 - t0) / CALLS * 1e6)
for name, v in res.items():
    print(f"  {name:42s} {statistics.median(v):6.2f} us  (rounds {min(v):.2f}-{max(v):.2f})")
