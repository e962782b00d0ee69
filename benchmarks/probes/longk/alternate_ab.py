"""The alternating-k-tile entry (smallm:n64alt) where the selection takes it, against the entry it
stands in for (the pick with no alternating candidate) and cuBLAS: one process, interleaved, L2
flushed, medians, clock and power sampled during the timed loop, every output checked on a
poisoned buffer first. Default shapes: the suite's whose pick it changes.
Usage: PYTHONPATH=src python benchmarks/probes/longk/alternate_ab.py [--shapes MxNxK,...] [--dtypes bfloat16,float16]
       [--reps 40] [--json F]"""
import argparse
import json
import statistics

import torch

from gemm_ladder.families import keys as keys_mod
from gemm_ladder.library import runner, select
from gemm_ladder.measure import bench
from gemm_ladder.measure.gpuinfo import Sampler

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="256x2048x4096,128x4096x4096,128x4096x11008,1x8192x8192,16x8192x8192,64x8192x8192,"
                "1x8192x28672,16x8192x28672,64x8192x28672,256x256x256,320x320x320,384x384x384,512x512x512,"
                "640x640x640,64x4096x4096,256x2048x8192")
ap.add_argument("--dtypes", default="bfloat16,float16")
ap.add_argument("--reps", type=int, default=40)
ap.add_argument("--json")
args = ap.parse_args()
bn = bench.Bench()
plain = [k for k in select.CANDIDATES if not getattr(keys_mod.get_step(k), "k_alternate", False)]
rows = []
for dtype in args.dtypes.split(","):
    dt = getattr(torch, dtype)
    for shape in args.shapes.split(","):
        M, N, K = map(int, shape.split("x"))
        a, b = bn.inputs(M, N, K, dt)
        ref = a.float() @ b.float().T
        keys = [select.pick(M, N, K, dtype), select.choose(M, N, K, dtype, candidates=plain).pick.key]
        if "smallm:n64alt" not in keys and keys_mod.get_step("smallm:n64alt").accepts(M, N, K):
            keys.insert(0, "smallm:n64alt")
        keys = list(dict.fromkeys(keys))
        fns, err = [], {}
        for key in keys:
            p = runner.plan(key, a, b)
            p.out.fill_(float("nan"))
            p()
            torch.cuda.synchronize()
            err[key] = float((p.out.float() - ref).abs().max() / ref.abs().max())
            fns.append(p)
        fns.append(lambda: a @ b.T)
        bn.time_interleaved(fns, 3)
        with Sampler(bn.nvml) as smp:
            t = bn.time_interleaved(fns, args.reps)
        us = [1e3 * statistics.median(x) for x in t]
        gpu = smp.summary()
        row = {"M": M, "N": N, "K": K, "dtype": dtype, "pick": keys[0] if select.pick(M, N, K, dtype) == keys[0]
               else select.pick(M, N, K, dtype), "us": dict(zip(keys, us[:-1])), "cublas_us": us[-1], "rel_err": err,
               "gpu": gpu}
        rows.append(row)
        print(f"{shape} {dtype}: " + "  ".join(f"{k} {u:7.2f} us ({us[-1] / u:.3f})" for k, u in zip(keys, us))
              + f"  cublas {us[-1]:7.2f} | err {max(err.values()):.1e} | {gpu.get('sm_clock_mhz')} MHz "
              f"{gpu.get('power_w')} W", flush=True)
if args.json:
    with open(args.json, "w") as f:
        json.dump({"reps": args.reps, "rows": rows}, f, indent=1)
