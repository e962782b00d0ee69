"""Probe: whole tiles on fewer CTAs at M <= 16. An earlier probe (experiments/midm/2026-11-29_h200_h/
mca_probe.log) read 16 x 8192^2 at 44.9 us with whole 64 x 128 tiles on 64 CTAs against the pick's
45.9 on 128 CTAs of 64 x 64, although the deal model holds that fewer than 0.65 x 132 streaming
SMs cannot draw the full HBM bandwidth. Candidates per shape: the pick as dealt, and each family
entry with K unsplit (whole tiles, one per CTA) where its tiles fit one wave. Each output
poisoned, checked against fp32 and repeated bit for bit; timed interleaved with cuBLAS after the
zeroing flush and a read flush.

    PYTHONPATH=src python benchmarks/probes/tail/probe_fewer.py [--json F]
"""
import argparse, json
from gemm_ladder.measure import probe
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import launch, select
from gemm_ladder.runtime.smallm import FAMILIES

ap = argparse.ArgumentParser()
probe.add_sweep_args(ap, shapes="16x8192x8192,1x8192x8192,16x8192x28672,1x8192x28672,16x14336x4096,"
                                "1x14336x4096,16x4096x14336,16x4096x4096,16x11008x4096,16x28672x8192,64x8192x8192")
ap.add_argument("--fams", default="smallm:n64,smallm:n128,smallm")
args = ap.parse_args()
bench = Bench(0)


def candidates(M, N, K, dt):
    pick = select.pick(M, N, K, dt)
    return {f"pick={pick}": (pick, None), **{f"{fam}:whole": (FAMILIES[fam], 1) for fam in args.fams.split(",")}}


make = lambda c, a, b, out: (launch.plan(c[0], a, b, out) if c[1] is None else c[0].plan(a, b, out, splits=c[1]))
rows = probe.sweep(bench, args.shapes, args.dtypes, args.passes, candidates, make, args.reps)
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows), open(args.json, "w"), indent=1)
