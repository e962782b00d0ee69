"""Probe: the small-M family with more wgmma groups in flight (GL_MMA_LAG) and, at M <= 16, a
compact A stage (GL_A_STAGE_ROWS = 16: 10 KB stages instead of 16, so 16-20 fit), against the
selection's pick, at the suite's M <= 16 shapes. Each output poisoned and checked against fp32
first, then repeated on poisoned outputs (bit for bit); timed interleaved with cuBLAS after
bench.py's zeroing flush (the suite's) and after a read flush.

    PYTHONPATH=src python benchmarks/probes/lag/probe_lag_smallm.py [--json F]
"""
import argparse, json
import torch
from gemm_ladder.measure import probe
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import launch, select, smallm

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="16x8192x8192,1x8192x8192,16x4096x14336,1x4096x14336,16x14336x4096,"
                                    "16x8192x28672,16x28672x8192,16x4096x4096,16x4096x11008")
ap.add_argument("--bf16-shapes", default="16x8192x8192,1x8192x8192,16x4096x14336")
ap.add_argument("--reps", type=int, default=30)
ap.add_argument("--repeats", type=int, default=10, help="poisoned repeats per candidate (bit-identical)")
ap.add_argument("--json", default=None)
ap.add_argument("--variants", default=None, help="family/name/field=value/...,... (default: the first run's)")
ap.add_argument("--all-variants", action="store_true", help="every variant that accepts the shape, not only the pick's")
args = ap.parse_args()
bench = Bench(0)
sms = launch.num_sms(0)
F = smallm.FAMILIES
W = smallm.with_fields
DEFAULT = ("smallm:n64/l2/mma_lag=2,smallm:n64/l3/mma_lag=3,"
           "smallm:n64/a16d16/a_stage_rows=16/max_m=16/depth=16,smallm:n64/a16d20/a_stage_rows=16/max_m=16/depth=20,"
           "smallm:n64/a16d20l2/a_stage_rows=16/max_m=16/depth=20/mma_lag=2,smallm:n32/l2/mma_lag=2,"
           "smallm:n128/l2/mma_lag=2,smallm:n128/a16d10/a_stage_rows=16/max_m=16/depth=10")
VARIANTS = [W(F[spec.split("/")[0]], spec.split("/")[1], **{k: int(v) for k, v in (f.split("=") for f in spec.split("/")[2:])})
            for spec in (args.variants or DEFAULT).split(",")]
rows = []
jobs = [("float16", s) for s in args.shapes.split(",")] + [("bfloat16", s) for s in args.bf16_shapes.split(",") if s]
for dt, shape in jobs:
    dtype = getattr(torch, dt)
    M, N, K = map(int, shape.split("x"))
    a, b = bench.inputs(M, N, K, dtype)
    pick = select.pick(M, N, K, dt, sms)
    cands = {f"pick={pick}": pick}
    for f in VARIANTS:  # the pick's own tile with the new knobs, and n64's everywhere
        if f.accepts(M, N, K) and (args.all_variants or f.key.startswith(pick + ":") or f.key.startswith("smallm:n64:")):
            cands[f.key] = f
    checked = probe.checked_plans(cands, a, b, launch.plan, f"{shape} {dt}", repeats=args.repeats)
    rows += probe.time_against_cublas(bench, checked, a, b, args.reps, f"{shape} {dt}", dict(M=M, N=N, K=K, dtype=dt))
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows), open(args.json, "w"), indent=1)
