"""Four wgmma groups in flight against one at the small squares and the long-K rows (perf-notes
item 118): each pick (`smallm:n64s`, `smallm:n64`, `smallm:n128`, `smallm:c2n64`) beside its `…l4`
twin (the same tile, ring and deal, `mma_lag` 4), a lag-2 build, and cuBLAS (`smallm.with_fields`),
interleaved in one process, each call after an L2 flush, medians; clock and power sampled during
the timed loop. Outputs poisoned first, checked against fp32, and the builds compared bit for bit
(the MMAs accumulate in the same order: only the waits move).
Usage: PYTHONPATH=src python benchmarks/probes/smallsq/lag_ab.py [--dtype float16] [--reps 60]
       [--json F] [N or MxNxK ...]"""
import argparse
import json
import statistics

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.library.select import pick
from gemm_ladder.measure import bench
from gemm_ladder.measure.gpuinfo import Sampler

TWINS = ("smallm:n64s", "smallm:n64", "smallm:n128", "smallm:c2n64")  # the picks given lag-4 and lag-2 builds
# the small squares, then long-K rows whose picks have a twin (n64, c2n64, n128: 16-64 k-tiles per CTA)
SHAPES = ["256", "320", "384", "512", "640", "768", "896", "256x1024x4096", "128x1024x16384", "64x2048x8192",
          "128x512x16384", "256x512x8192", "128x1024x8192", "128x2048x16384"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--json")
    ap.add_argument("shapes", nargs="*", default=SHAPES)
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    b = bench.Bench()
    rows = []
    for shape in args.shapes:
        M, N, K = (int(shape),) * 3 if "x" not in shape else map(int, shape.split("x"))
        key = pick(M, N, K, args.dtype)
        if key not in TWINS:
            print(f"{M}x{N}x{K}: the pick {key} has no twin here", flush=True)
            continue
        a, bb = b.inputs(M, N, K, dtype)
        ref = a.float() @ bb.float().T
        base = smallm.FAMILIES[key]
        fams = [base, smallm.with_fields(base, "lag4", mma_lag=4), smallm.with_fields(base, "lag2", mma_lag=2)]
        plans = [runner.plan_smallm(f, a, bb) for f in fams]
        for p in plans:
            p.out.fill_(float("nan"))
            p()
        torch.cuda.synchronize()
        errs = [float((p.out.float() - ref).abs().max() / ref.abs().max()) for p in plans]
        same = all(bool(torch.equal(plans[0].out, p.out)) for p in plans[1:])
        c = torch.empty(M, N, dtype=dtype, device="cuda")
        calls = plans + [lambda: torch.matmul(a, bb.T, out=c)]
        b.time_interleaved(calls, 3)
        with Sampler(b.nvml) as smp:
            t = b.time_interleaved(calls, args.reps)
        us = [1e3 * statistics.median(x) for x in t]
        row = {"shape": [M, N, K], "dtype": args.dtype, "pick": key, "twin": fams[1].key, "pick_us": us[0],
               "twin_us": us[1], "lag2_us": us[2], "cublas_us": us[3], "pick_over_twin": us[0] / us[1],
               "pick_over_lag2": us[0] / us[2], "identical": same, "rel_err": errs, "gpu": smp.summary()}
        rows.append(row)
        print(f"{M}x{N}x{K} {args.dtype}: {key} {us[0]:6.2f} us  lag 4 {us[1]:6.2f} ({us[0] / us[1]:.3f}x)  lag 2 "
              f"{us[2]:6.2f} ({us[0] / us[2]:.3f}x)  cuBLAS {us[3]:6.2f} (pick x{us[3] / us[0]:.3f}, lag 4 "
              f"x{us[3] / us[1]:.3f})  identical {same}  err {max(errs):.1e}  {smp.summary()}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"probe": "smallsq lag_ab", "commit": bench.git_commit(), "reps": args.reps, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
