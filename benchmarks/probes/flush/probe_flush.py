"""Probe: does the L2 flush's own dirty data cost the timed call? bench.py flushes L2 by
zeroing a 256 MB buffer, which leaves L2 full of dirty lines; the next call's reads then
evict them, so their write-back to HBM shares the call's bandwidth. Here the selection's
pick and cuBLAS are timed interleaved (medians) after three flushes: `zero` (bench.py's),
`read` (a sum over the buffer: L2 left holding clean lines) and `zero+read`. Memory-bound
shapes (small M) should move; compute-bound ones not.

    PYTHONPATH=src python benchmarks/probes/flush/probe_flush.py [--json F]
"""
import argparse, json, statistics
import torch
import gemm_ladder
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.measure.bandwidth import measure_copy
from gemm_ladder.runtime import launch, select

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="1x4096x4096,16x4096x4096,64x4096x4096,16x8192x8192,16x4096x14336,"
                "16x14336x4096,1x28672x8192,16x8192x28672,512x512x512,1024x1024x1024,4096x4096x4096")
ap.add_argument("--reps", type=int, default=40)
ap.add_argument("--dtype", default="float16")
ap.add_argument("--json", default=None)
args = ap.parse_args()
dtype = getattr(torch, args.dtype)
bench = Bench(0)
buf = bench.flush_buf
FLUSHES = {"zero": lambda: buf.zero_(), "read": lambda: buf.sum(), "zero+read": lambda: (buf.zero_(), buf.sum())}
sms = launch.num_sms(0)
rows = []
copy = {}
for name, fl in FLUSHES.items():
    bench.flush_l2 = fl
    c = measure_copy(bench, hbm_bytes=1 << 28)
    copy[name] = c.get("hbm_copy_gbs")
print("HBM copy GB/s (256 MiB buffers):", {k: round(v or 0) for k, v in copy.items()}, flush=True)
for shape in args.shapes.split(","):
    M, N, K = map(int, shape.split("x"))
    a, b = bench.inputs(M, N, K, dtype)
    pick = select.pick(M, N, K, args.dtype, sms)
    out = torch.empty((M, N), dtype=dtype, device="cuda")
    ours = launch.plan(pick, a, b, out)
    ours(); torch.cuda.synchronize()
    ref = torch.matmul(a.float(), b.float().T)
    err = ((out.float() - ref).abs().max() / ref.abs().max()).item()
    byts = (M * K + N * K + M * N) * 2
    line = [f"{shape} {pick} relerr {err:.1e}"]
    for name, fl in FLUSHES.items():
        bench.flush_l2 = fl
        t = bench.time_interleaved([ours, lambda: torch.matmul(a, b.T)], args.reps)
        us, cub = (statistics.median(x) * 1e3 for x in t)
        line.append(f"{name}: ours {us:.1f}us ({byts / us / 1e3:.0f} GB/s) cublas {cub:.1f}us "
                    f"({byts / cub / 1e3:.0f} GB/s) ratio {cub / us:.3f}")
        rows.append(dict(M=M, N=N, K=K, dtype=args.dtype, kernel=pick, flush=name, us=us, cublas_us=cub,
                         ratio_to_cublas=cub / us, gbs=byts / us / 1e3, cublas_gbs=byts / cub / 1e3,
                         hbm_copy_gbs=copy[name], ok=err < 2e-2))
    print("\n  ".join(line), flush=True)
if args.json:
    json.dump(dict(commit=git_commit(), copy_gbs=copy, rows=rows), open(args.json, "w"), indent=1)
