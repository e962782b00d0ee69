"""Probe (perf-notes item 113): the small-M second pass with its planes read in batches of
eight (`reduce_batch`) against the serial pass, on the same deal, at every long-K suite shape
whose pick sums pieces through the workspace (15 of the 36 under the rule of 8748eb1, 4 to 14
planes); beside cuBLAS. Every output poisoned and checked against fp32, the two passes'
outputs compared bit for bit, then all timed interleaved (L2 flushed, medians), SM clock and
power sampled during the loop.

    PYTHONPATH=src python benchmarks/probes/longk/reduce_batch_ab.py [--json out.json]
"""
import argparse
import json
import statistics

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner, select
from gemm_ladder.measure import suites
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.measure.gpuinfo import Sampler

ap = argparse.ArgumentParser()
ap.add_argument("--dtypes", default="float16,bfloat16")
ap.add_argument("--reps", type=int, default=50)
ap.add_argument("--json", default=None)
args = ap.parse_args()
bench = Bench(0)
sms = torch.cuda.get_device_properties(0).multi_processor_count
shapes = [(s.M, s.N, s.K) for s in suites.longk()]
rows = []
for dt in args.dtypes.split(","):
    dtype = getattr(torch, dt)
    for M, N, K in shapes:
        key = select.pick(M, N, K, dt, sms)
        fam = smallm.FAMILIES.get(key)
        if fam is None or not fam.deal(M, N, K, sms).planes:
            continue  # not the family, or no piece summed through the workspace
        a, b = bench.inputs(M, N, K, dtype)
        batched = smallm.with_fields(fam, "rb", reduce_batch=smallm.REDUCE_BATCH)
        names, fns, outs = [], [], []
        for name, f in ((f"serial {key}", fam), (f"batched {key}", batched)):
            out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
            p = runner.plan_smallm(f, a, b, out)
            p()
            torch.cuda.synchronize()
            ok, err, rel, msg = check_product(out, a, b)
            if not ok:
                print(f"{M}x{N}x{K} {dt} {name}: WRONG {msg}", flush=True)
                continue
            names.append(name)
            fns.append(p)
            outs.append(out)
        same_bits = len(outs) == 2 and torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16))
        if not same_bits:
            print(f"{M}x{N}x{K} {dt}: the two passes' outputs differ", flush=True)
        names.append("cuBLAS")
        fns.append(lambda: a @ b.T)
        bench.time_interleaved(fns, 3)
        with Sampler(bench.nvml) as smp:
            t = bench.time_interleaved(fns, args.reps)
        us = [1e3 * statistics.median(x) for x in t]
        d = fam.deal(M, N, K, sms)
        row = {"M": M, "N": N, "K": K, "dtype": dt, "pick": key, "planes": d.planes, "ctas": d.ctas,
               "same_bits": same_bits, "gpu": smp.summary(),
               "cases": [{"name": n, "us": u, "ratio_to_cublas": us[-1] / u} for n, u in zip(names, us)]}
        rows.append(row)
        print(f"{M}x{N}x{K} {dt} {d.planes} planes: " + "  ".join(f"{n} {u:.2f} ({us[-1] / u:.3f})"
                                                              for n, u in zip(names, us))
              + f" | {row['gpu'].get('sm_clock_mhz')} MHz", flush=True)
if args.json:
    with open(args.json, "w") as f:
        json.dump({"probe": "reduce_batch_ab", "commit": git_commit(), "reps": args.reps, "rows": rows}, f, indent=1)
