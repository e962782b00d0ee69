"""Time against K at a fixed M x N: a small-M entry's whole tiles (one CTA per tile, no split)
beside cuBLAS, interleaved, L2 flushed, medians; a line fitted to each (µs = a + b * k_tiles)
separates a per-k-tile pace (b) from a fixed cost (a: launch, fill, epilogue). For the long-K
rows, where our 64 x 64 stream trails cuBLAS's on the same decomposition (docs/perf-notes.md
items 101 and 103).
Usage: PYTHONPATH=src python benchmarks/probes/longk/ksweep.py [--key smallm:n64] [--dtype bfloat16]
       [--mn 256x2048] [--ks 512,1024,2048,4096,8192] [--reps 30] [--json F]"""
import argparse
import json
import statistics

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.measure import bench
from gemm_ladder.measure.gpuinfo import Sampler

ap = argparse.ArgumentParser()
ap.add_argument("--key", default="smallm:n64")
ap.add_argument("--dtype", default="bfloat16")
ap.add_argument("--mn", default="256x2048,128x4096")
ap.add_argument("--ks", default="512,1024,2048,4096,8192")
ap.add_argument("--reps", type=int, default=30)
ap.add_argument("--json")
args = ap.parse_args()
fam = smallm.FAMILIES[args.key]
dtype = getattr(torch, args.dtype)
bn = bench.Bench()
rows = []


def fit(xs, ys):
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


for mn in args.mn.split(","):
    M, N = map(int, mn.split("x"))
    series = {"ours": [], "cublas": []}
    kts = []
    for K in map(int, args.ks.split(",")):
        a, b = bn.inputs(M, N, K, dtype)
        ref = a.float() @ b.float().T
        p = runner.plan_smallm(fam, a, b, splits=1)
        p.out.fill_(float("nan"))
        p()
        torch.cuda.synchronize()
        err = float((p.out.float() - ref).abs().max() / ref.abs().max())
        fns = [p, lambda: a @ b.T]
        bn.time_interleaved(fns, 3)
        with Sampler(bn.nvml) as smp:
            t = bn.time_interleaved(fns, args.reps)
        us = [1e3 * statistics.median(x) for x in t]
        kts.append(K // 64)
        series["ours"].append(us[0])
        series["cublas"].append(us[1])
        gpu = smp.summary()
        rows.append({"M": M, "N": N, "K": K, "key": args.key, "us": us[0], "cublas_us": us[1], "rel_err": err,
                     "gpu": gpu})
        print(f"{M}x{N}x{K} {args.dtype}: {args.key} whole {us[0]:7.2f} us  cublas {us[1]:7.2f} us  "
              f"ratio {us[1] / us[0]:.3f}  err {err:.1e}  {gpu.get('sm_clock_mhz')} MHz", flush=True)
    for name, ys in series.items():
        a0, b0 = fit(kts, ys)
        print(f"  {M}x{N} {name}: {a0:.2f} us + {1e3 * b0:.1f} ns per k-tile", flush=True)
if args.json:
    with open(args.json, "w") as f:
        json.dump({"key": args.key, "dtype": args.dtype, "rows": rows}, f, indent=1)
