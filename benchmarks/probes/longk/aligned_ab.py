"""Probe (perf-notes item 112): the small-M deal rule with runs that cut a tile's k-tiles into
equal pieces only, against the rule before it (runs of equal length over g CTAs, which may
cross a tile boundary), at every suite shape whose deal or pick it moves; each beside cuBLAS
and an 8-way split of the old entry. Every output poisoned and checked against fp32, then
all timed interleaved (L2 flushed, medians), SM clock and power sampled during the loop.
The rule it measured (commit 19a6477, smallm_deal.SmallMDeal.deal keeping only runs with
kt % units == 0 or units % kt == 0) lost and was reverted: "now" is the library's pick as it
stands, so rerun it with that change applied.

    PYTHONPATH=src python benchmarks/probes/longk/aligned_ab.py [--json out.json]
"""
import argparse
import json
import statistics

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner, select
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.measure.gpuinfo import Sampler

# shape: (the entry and its runs of k-tiles under the rule before, from smallm_deal at 13321d6)
BEFORE = {(16, 1024, 16384): ("smallm:n64", 48), (16, 2048, 8192): ("smallm:n64", 48),
          (128, 512, 16384): ("smallm:c2n64", 20), (128, 2048, 8192): ("smallm:c2n64", 32),
          (256, 512, 16384): ("smallm:c2n64", 32), (256, 1024, 8192): ("smallm:c2n64", 32)}
ap = argparse.ArgumentParser()
ap.add_argument("--dtypes", default="float16,bfloat16")
ap.add_argument("--reps", type=int, default=50)
ap.add_argument("--json", default=None)
args = ap.parse_args()
bench = Bench(0)
sms = torch.cuda.get_device_properties(0).multi_processor_count
rows = []
for dt in args.dtypes.split(","):
    dtype = getattr(torch, dt)
    for (M, N, K), (old_key, old_units) in BEFORE.items():
        a, b = bench.inputs(M, N, K, dtype)
        new_key = select.pick(M, N, K, dt, sms)
        cases = {f"before {old_key} runs of {old_units}":
                 lambda o: runner.plan_smallm(smallm.FAMILIES[old_key], a, b, o, units=old_units),
                 f"now {new_key}": lambda o: runner.plan(new_key, a, b, o),
                 f"{old_key} split 8": lambda o: runner.plan_smallm(smallm.FAMILIES[old_key], a, b, o, splits=8)}
        names, fns, deals = [], [], []
        for name, mk in cases.items():
            out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
            p = mk(out)
            p()
            torch.cuda.synchronize()
            ok, err, rel, msg = check_product(out, a, b)
            if not ok:
                print(f"{M}x{N}x{K} {dt} {name}: WRONG {msg}", flush=True)
                continue
            d = getattr(p, "deal", None)
            names.append(name)
            fns.append(p)
            deals.append(None if d is None else {"ctas": d.ctas, "units": d.units, "planes": d.planes_bound})
        names.append("cuBLAS")
        fns.append(lambda: a @ b.T)
        deals.append(None)
        bench.time_interleaved(fns, 3)
        with Sampler(bench.nvml) as smp:
            t = bench.time_interleaved(fns, args.reps)
        us = [1e3 * statistics.median(x) for x in t]
        row = {"M": M, "N": N, "K": K, "dtype": dt, "gpu": smp.summary(),
               "cases": [{"name": n, "us": u, "ratio_to_cublas": us[-1] / u, "deal": d}
                         for n, u, d in zip(names, us, deals)]}
        rows.append(row)
        print(f"{M}x{N}x{K} {dt}: " + "  ".join(f"{n} {u:.2f} ({us[-1] / u:.3f})" for n, u in zip(names, us))
              + f" | {row['gpu'].get('sm_clock_mhz')} MHz", flush=True)
if args.json:
    with open(args.json, "w") as f:
        json.dump({"probe": "aligned_ab", "commit": git_commit(), "reps": args.reps, "rows": rows}, f, indent=1)
