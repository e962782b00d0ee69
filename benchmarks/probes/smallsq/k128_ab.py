"""128-wide k-tiles against 64-wide (perf-notes item 122): each small-M pick beside its twin
`smallm.k128_twin` (the same tile and ring bytes, half the stages, each stage two 64-wide k-tiles
under one full barrier and one release) and cuBLAS, interleaved in one process, each call after
an L2 flush, medians; clock and power sampled during the timed loop. Outputs poisoned first and
checked against fp32; the twin's bits compared with the pick's (equal where both run whole tiles
in one warpgroup: the same MMAs in the same order).
With --check, each pair runs once and is checked, untimed (the run for compute-sanitizer).
Usage: PYTHONPATH=src python benchmarks/probes/smallsq/k128_ab.py [--dtypes float16,bfloat16] [--reps 60]
       [--passes 2] [--check] [--json F] [N or MxNxK ...]"""
import argparse
import json
import statistics

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.library.select import pick
from gemm_ladder.measure import bench
from gemm_ladder.measure.gpuinfo import Sampler

# the small squares (and the odd 1000^3), the long-K rows, decode and prefill rows of the suite
SHAPES = ["256", "320", "384", "512", "640", "768", "896", "1000", "1024", "256x1024x4096", "128x512x16384",
          "128x1024x8192", "256x512x8192", "64x2048x8192", "16x2048x16384", "1x4096x4096", "16x4096x4096",
          "64x4096x4096", "128x4096x4096"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--passes", type=int, default=2)
    ap.add_argument("--check", action="store_true", help="run and check each pair once, untimed")
    ap.add_argument("--json")
    ap.add_argument("shapes", nargs="*", default=SHAPES)
    args = ap.parse_args()
    b = bench.Bench()
    rows = []
    for pas in range(1 if args.check else args.passes):
        for dt in args.dtypes.split(","):
            dtype = getattr(torch, dt)
            for shape in args.shapes:
                M, N, K = (int(shape),) * 3 if "x" not in shape else map(int, shape.split("x"))
                key = pick(M, N, K, dt)
                if key not in smallm.FAMILIES:
                    print(f"{M}x{N}x{K} {dt}: the pick {key} is not a small-M entry", flush=True)
                    continue
                fam = smallm.FAMILIES[key]
                twin = smallm.k128_twin(fam)
                if twin.shape_problems(M, N, K):
                    print(f"{M}x{N}x{K} {dt}: {twin.key} does not take it: {twin.shape_problems(M, N, K)}", flush=True)
                    continue
                a, bb = b.inputs(M, N, K, dtype)
                ref = a.float() @ bb.float().T
                plans = [runner.plan_smallm(f, a, bb) for f in (fam, twin)]
                for p in plans:
                    p.out.fill_(float("nan"))
                    p()
                torch.cuda.synchronize()
                errs = [float((p.out.float() - ref).abs().max() / ref.abs().max()) for p in plans]
                same = bool(torch.equal(plans[0].out, plans[1].out))
                if args.check:
                    print(f"{M}x{N}x{K} {dt}: {key} err {errs[0]:.1e}, {twin.key} err {errs[1]:.1e}, identical {same}",
                          flush=True)
                    continue
                c = torch.empty(M, N, dtype=dtype, device="cuda")
                calls = plans + [lambda: torch.matmul(a, bb.T, out=c)]
                b.time_interleaved(calls, 3)
                with Sampler(b.nvml) as smp:
                    t = b.time_interleaved(calls, args.reps)
                us = [1e3 * statistics.median(x) for x in t]
                sms = torch.cuda.get_device_properties(0).multi_processor_count
                row = {"pass": pas, "shape": [M, N, K], "dtype": dt, "pick": key, "twin": twin.key, "pick_us": us[0],
                       "twin_us": us[1], "cublas_us": us[2], "pick_over_twin": us[0] / us[1],
                       "pick_x_cublas": us[2] / us[0], "twin_x_cublas": us[2] / us[1], "identical": same,
                       "rel_err": errs, "pick_deal": str(fam.deal(M, N, K, sms)),
                       "twin_deal": str(twin.deal(M, N, K, sms)), "gpu": smp.summary()}
                rows.append(row)
                print(f"pass {pas} {M}x{N}x{K} {dt}: {key} {us[0]:7.2f} us  k128 {us[1]:7.2f} "
                      f"({us[0] / us[1]:.3f}x)  cuBLAS {us[2]:7.2f} (pick x{us[2] / us[0]:.3f}, k128 "
                      f"x{us[2] / us[1]:.3f})  identical {same}  err {max(errs):.1e}  {smp.summary()}", flush=True)
    for dt in args.dtypes.split(","):
        r = [x["pick_over_twin"] for x in rows if x["dtype"] == dt]
        if r:
            print(f"{dt}: pick / twin geomean {statistics.geometric_mean(r):.3f} over {len(r)} rows "
                  f"(> 1: the twin faster)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"probe": "smallsq k128_ab", "commit": bench.git_commit(), "reps": args.reps, "rows": rows}, f,
                      indent=1)


if __name__ == "__main__":
    main()
