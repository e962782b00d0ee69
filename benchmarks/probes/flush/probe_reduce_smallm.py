"""Probe: how a split tile's pieces are summed at M <= 16, under both L2 flushes. For each shape
the selection's pick (its deal; planes summed by the second kernel when split) against the
same entry with the pieces summed in a cluster through DSMEM (`cluster_reduce`) and summed in
the kernel by stream-K's fixup (`fixup`), each with its model deal, interleaved with cuBLAS
after bench.py's zeroing flush and after a read flush (L2 left clean). Each output is
poisoned and checked against fp32 first, and repeated bit for bit.

    PYTHONPATH=src python benchmarks/probes/flush/probe_reduce_smallm.py [--json F]
"""
import argparse, json
import torch
from gemm_ladder.measure import probe
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import launch, select, smallm

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="16x4096x14336,1x4096x14336,16x4096x4096,1x4096x4096,16x4096x11008,16x8192x8192")
ap.add_argument("--reps", type=int, default=40)
ap.add_argument("--dtype", default="float16")
ap.add_argument("--json", default=None)
args = ap.parse_args()
dtype = getattr(torch, args.dtype)
bench = Bench(0)
sms = launch.num_sms(0)
rows = []
for shape in args.shapes.split(","):
    M, N, K = map(int, shape.split("x"))
    a, b = bench.inputs(M, N, K, dtype)
    pick = select.pick(M, N, K, args.dtype, sms)
    fam = smallm.FAMILIES.get(str(pick))
    cands = {f"pick={pick}": pick}
    if fam is not None:
        cands[f"{fam.key}:cr"] = smallm.with_fields(fam, "cr", cluster_reduce=True)
        cands[f"{fam.key}:fixup"] = smallm.with_fields(fam, "fixup", fixup=True)
    checked = probe.checked_plans(cands, a, b, launch.plan, shape)
    rows += probe.time_against_cublas(bench, checked, a, b, args.reps, shape, dict(M=M, N=N, K=K, dtype=args.dtype))
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows), open(args.json, "w"), indent=1)
