"""Probe: the small-M picks on all 132 SMs. probe_tail.py found the 112 whole 64 x 128 tiles at
N = 14336 streaming unevenly (29.5-36 us per CTA for the same bytes, a ~3 us tail), and the 128
CTAs at N = 8192 even. Candidates per shape: the pick as dealt; smallm:n128's in-kernel fixup
deal (stream-K: pieces summed by the tile's owner) on `--waves` CTAs. Each output poisoned, checked against fp32 and repeated bit for bit; timed
interleaved with cuBLAS after the zeroing flush and a read flush.

    PYTHONPATH=src python benchmarks/results/experiments/tail/probe_balance.py [--json F]
"""
import argparse, json
import torch
from gemm_ladder.measure import probe
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import launch, select
from gemm_ladder.runtime.smallm import FAMILIES, with_fields

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="16x14336x4096,1x14336x4096,16x8192x8192,1x8192x8192,64x14336x4096")
ap.add_argument("--waves", default="132,128,124")
ap.add_argument("--fams", default="smallm:n128")
ap.add_argument("--dtypes", default="float16,bfloat16")
ap.add_argument("--reps", type=int, default=60)
ap.add_argument("--passes", type=int, default=2)
ap.add_argument("--json", default=None)
args = ap.parse_args()
bench = Bench(0)
rows = []
for pas in range(args.passes):
    for dt in args.dtypes.split(","):
        dtype = getattr(torch, dt)
        for shape in args.shapes.split(","):
            M, N, K = map(int, shape.split("x"))
            a, b = bench.inputs(M, N, K, dtype)
            pick = select.pick(M, N, K, dt)
            cands = {f"pick={pick}": (pick, {})}
            for fam in args.fams.split(","):
                fx = with_fields(FAMILIES[fam], "fixup", fixup=True)
                for w in map(int, args.waves.split(",")):
                    cands[f"{fam}:fixup@{w}"] = (fx, dict(wave=w))
            make = lambda c, a, b, out: (launch.plan(c[0], a, b, out) if not c[1] else c[0].plan(a, b, out, **c[1]))
            checked = probe.checked_plans(cands, a, b, make, f"{shape} {dt}", repeats=3)
            rows += probe.time_against_cublas(bench, checked, a, b, args.reps, f"pass {pas} {shape} {dt}",
                                              dict(M=M, N=N, K=K, dtype=dt, pass_=pas))
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows), open(args.json, "w"), indent=1)
