"""Probe: the shapes whose pick moves when `smallm:n64` sums its K pieces in clusters (DSMEM).
For each shape, the selection's pick as built (n64, its pieces summed on chip) against the
entries that held those shapes before (`smallm:n32`, `smallm`, and n64 summing through the
workspace planes and the second pass: `smallm:n64:ws`), every one that takes the shape, with
its model deal; interleaved with cuBLAS after bench.py's zeroing flush and after a read flush
(L2 left clean). Each output is poisoned and checked against fp32 first, and repeated bit
for bit.

    PYTHONPATH=src python benchmarks/probes/flush/probe_n64_dsmem.py [--dtypes float16,bfloat16] [--json F]
        [--shapes ...] [--keys smallm:n32,smallm,smallm:n64:ws,smallm:n128:cr]
"""
import argparse, json
import torch
from gemm_ladder.measure import probe
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import launch, select, smallm

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="1x4096x4096,16x4096x4096,64x4096x4096,1x4096x11008,16x4096x11008,64x4096x11008,"
                "1x4096x14336,16x4096x14336,64x4096x14336")
ap.add_argument("--keys", default="smallm:n32,smallm,smallm:n64:ws")
ap.add_argument("--reps", type=int, default=40)
ap.add_argument("--dtypes", default="float16,bfloat16")
ap.add_argument("--json", default=None)
args = ap.parse_args()
bench = Bench(0)
sms = launch.num_sms(0)
F = smallm.FAMILIES
ENTRIES = {**F, "smallm:n64:ws": smallm.with_fields(F["smallm:n64"], "ws", cluster_reduce=False),
           # the 128-wide tile summing its pieces in clusters too (a candidate, not an entry)
           "smallm:n128:cr": smallm.with_fields(F["smallm:n128"], "cr", cluster_reduce=True)}
rows = []
for dt in args.dtypes.split(","):
    dtype = getattr(torch, dt)
    for shape in args.shapes.split(","):
        M, N, K = map(int, shape.split("x"))
        a, b = bench.inputs(M, N, K, dtype)
        pick = select.pick(M, N, K, dt, sms)
        cands = {f"pick={pick}": pick}
        cands.update({k: ENTRIES[k] for k in args.keys.split(",") if ENTRIES[k].accepts(M, N, K)})
        checked = probe.checked_plans(cands, a, b, launch.plan, f"{shape} {dt}")
        rows += probe.time_against_cublas(bench, checked, a, b, args.reps, f"{shape} {dt}",
                                          dict(M=M, N=N, K=K, dtype=dt))
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows), open(args.json, "w"), indent=1)
