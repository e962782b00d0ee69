"""The small squares with K split and the pieces summed in a cluster (DSMEM) instead of whole tiles
on a third to a half of the SMs (perf-notes item 119). At 512³ the pick (`smallm:n64s`) runs 64
whole 64 x 64 tiles of 8 k-tiles, its consumer ~185 ns a k-tile; `smallm:n64` split two ways
runs 128 CTAs of 4 k-tiles, its pairs summed through distributed shared memory (the split deals
measured before went through the workspace and a second pass: 0.52-0.84 x cuBLAS, experiments/
smallsq/…_narrow_tiles_daf5880.txt). Each build beside the pick and cuBLAS, interleaved in one
process, each call after an L2 flush, medians; clock and power sampled during the timed loop.
Outputs poisoned first and checked against fp32.
Usage: PYTHONPATH=src python benchmarks/probes/smallsq/cluster_split_ab.py [--dtype float16] [--reps 60]
       [--json F] [--builds n64/s2,n64/s4,...] [N or MxNxK ...]"""
import argparse
import json
import statistics

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.library.select import pick
from gemm_ladder.measure import bench
from gemm_ladder.measure.accuracy import check_output
from gemm_ladder.measure.gpuinfo import Sampler

BUILDS = "n64/s2,n64/s4,c2n64d/s2,c2n64d/s4"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--json")
    ap.add_argument("--builds", default=BUILDS, help="entry/sSPLITS, each tried where its deal sums in a cluster")
    ap.add_argument("shapes", nargs="*", default=["256", "384", "512"])
    args = ap.parse_args()
    dtype = getattr(torch, args.dtype)
    b = bench.Bench()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for shape in args.shapes:
        M, N, K = (int(shape),) * 3 if "x" not in shape else map(int, shape.split("x"))
        key = pick(M, N, K, args.dtype)
        a, bb = b.inputs(M, N, K, dtype)
        ref = a.float() @ bb.float().T
        names, plans = [key], [runner.plan_smallm(smallm.FAMILIES[key], a, bb)]
        for token in args.builds.split(","):
            entry, _, s = token.partition("/")
            fam = smallm.FAMILIES["smallm" if entry == "smallm" else f"smallm:{entry}"]
            splits = int(s[1:])
            try:
                deal = fam.plan_deal(M, N, K, sms, splits=splits)
            except Exception as e:  # a deal the entry cannot make here
                print(f"{M}x{N}x{K}: {token} skipped ({e})", flush=True)
                continue
            if not deal.dsmem or deal.ctas > sms:
                print(f"{M}x{N}x{K}: {token} skipped ({deal.ctas} CTAs, summed in a cluster: {deal.dsmem})",
                      flush=True)
                continue
            names.append(f"{token} ({deal.ctas} CTAs)")
            plans.append(runner.plan_smallm(fam, a, bb, splits=splits))
        for p in plans:
            p.out.fill_(float("nan"))
            p()
        torch.cuda.synchronize()
        errs = [float((p.out.float() - ref).abs().max() / ref.abs().max()) for p in plans]
        ok = [check_output(p.out, ref, args.dtype)[0] for p in plans]
        c = torch.empty(M, N, dtype=dtype, device="cuda")
        calls = plans + [lambda: torch.matmul(a, bb.T, out=c)]
        b.time_interleaved(calls, 3)
        with Sampler(b.nvml) as smp:
            t = b.time_interleaved(calls, args.reps)
        us = [1e3 * statistics.median(x) for x in t]
        row = {"shape": [M, N, K], "dtype": args.dtype, "builds": names, "us": us[:-1], "cublas_us": us[-1],
               "correct": ok, "rel_err": errs, "gpu": smp.summary()}
        rows.append(row)
        cells = "  ".join(f"{n} {u:6.2f} (x{us[-1] / u:.3f}{'' if k else ' WRONG'})" for n, u, k in zip(names, us, ok))
        print(f"{M}x{N}x{K} {args.dtype}: {cells}  cuBLAS {us[-1]:6.2f} us  {smp.summary()}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"probe": "smallsq cluster_split_ab", "commit": bench.git_commit(), "reps": args.reps,
                       "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
