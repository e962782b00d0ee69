"""One process, two trees: this tree's GEMM kernels (the library's pick per shape, or --keys)
beside the same builds compiled from another tree's kernels (--old-kernels DIR, e.g. an older
checkout's src/gemm_ladder/kernels, launched with this tree's arguments), and cuBLAS;
interleaved, L2 flushed, medians, clock and power sampled during the timed loop. For an A/B of a
kernel change that ratios taken in separate processes cannot resolve.
Usage: PYTHONPATH=src python benchmarks/probes/gemm_ab.py --old-kernels DIR [--json F] [--reps N]
       [--keys gemm:128x256,smallm] [--shapes 4096x4096x4096,128x4096x4096] [--dtype bfloat16]"""
import argparse
import json
import statistics
from pathlib import Path

import torch

from gemm_ladder.library import runner
from gemm_ladder.library.select import pick
from gemm_ladder.measure import bench, probe
from gemm_ladder.measure.gpuinfo import Sampler

ap = argparse.ArgumentParser()
ap.add_argument("--old-kernels", required=True)
ap.add_argument("--json")
ap.add_argument("--reps", type=int, default=40)
ap.add_argument("--keys", help="these keys at every shape instead of the library's pick")
ap.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192,2048x2048x2048,512x11008x4096,3000x5000x4000,"
                "1024x1024x1024,256x1024x4096,128x4096x4096,64x4096x4096,16x4096x4096,128x512x16384")
ap.add_argument("--dtype", default="float16")
args = ap.parse_args()
old_dir = Path(args.old_kernels)
dtype = getattr(torch, args.dtype)


def old_plan(key, a, b):
    """plan() with every kernel built from the other tree (its own prepared-kernel cache)."""
    saved = dict(runner._PREPARED)
    runner._PREPARED.clear()
    try:
        with probe.kernels_from(old_dir):
            return runner.plan(key, a, b)
    finally:
        runner._PREPARED.clear()
        runner._PREPARED.update(saved)


rows = []
bn = bench.Bench()
for shape in args.shapes.split(","):
    M, N, K = map(int, shape.split("x"))
    a, b = bn.inputs(M, N, K, dtype)
    ref = a.float() @ b.float().T
    keys = args.keys.split(",") if args.keys else [pick(M, N, K, args.dtype)]
    fns, names, err, same = [], [], {}, {}
    for key in keys:
        outs = []
        for side, p in (("new", runner.plan(key, a, b)), ("old", old_plan(key, a, b))):
            p.out.fill_(float("nan"))
            p()
            torch.cuda.synchronize()
            err[f"{key} {side}"] = float((p.out.float() - ref).abs().max() / ref.abs().max())
            outs.append(p.out.clone())
            fns.append(p)
            names.append(f"{key} {side}")
        same[key] = bool(torch.equal(*outs))  # the two trees' outputs bit for bit
    fns.append(lambda: a @ b.T)
    names.append("cublas")
    bn.time_interleaved(fns, 3)
    with Sampler(bn.nvml) as smp:
        t = bn.time_interleaved(fns, args.reps)
    gpu = smp.summary()
    us = {n: 1e3 * statistics.median(x) for n, x in zip(names, t)}
    for n in names[:-1]:
        rows.append({"M": M, "N": N, "K": K, "dtype": args.dtype, "build": n, "us": us[n], "cublas_us": us["cublas"],
                     "ratio_to_cublas": us["cublas"] / us[n], "rel_err": err[n],
                     "identical_to_other_tree": same[n.rsplit(" ", 1)[0]], "gpu": gpu})
    print(f"{M}x{N}x{K} {args.dtype}: " + "  ".join(f"{n} {us[n]:8.2f} us ({us['cublas'] / us[n]:.3f})" for n in names[:-1])
          + f"  cublas {us['cublas']:8.2f} | err {max(err.values()):.1e} | trees identical {all(same.values())} | "
          f"{gpu.get('sm_clock_mhz')} MHz "
          f"{gpu.get('power_w')} W", flush=True)
if args.json:
    with open(args.json, "w") as f:
        json.dump({"old_kernels": str(old_dir), "reps": args.reps, "rows": rows}, f, indent=1)
