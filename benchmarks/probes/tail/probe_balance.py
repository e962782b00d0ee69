"""Probe: the small-M picks on all 132 SMs. probe_tail.py found the 112 whole 64 x 128 tiles at
N = 14336 streaming unevenly (29.5-36 us per CTA for the same bytes, a ~3 us tail), and the 128
CTAs at N = 8192 even. Candidates per shape: the pick as dealt; smallm:n128's in-kernel fixup
deal (stream-K: pieces summed by the tile's owner) on `--waves` CTAs. Each output poisoned, checked against fp32 and repeated bit for bit; timed
interleaved with cuBLAS after the zeroing flush and a read flush.

    PYTHONPATH=src python benchmarks/probes/tail/probe_balance.py [--json F]
"""
import argparse, json
from gemm_ladder.measure import probe
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import launch, select
from gemm_ladder.runtime.smallm import FAMILIES, with_fields

ap = argparse.ArgumentParser()
probe.add_sweep_args(ap, shapes="16x14336x4096,1x14336x4096,16x8192x8192,1x8192x8192,64x14336x4096")
ap.add_argument("--waves", default="132,128,124")
ap.add_argument("--fams", default="smallm:n128")
args = ap.parse_args()
bench = Bench(0)


def candidates(M, N, K, dt):
    pick = select.pick(M, N, K, dt)
    fixups = {f"{fam}:fixup@{w}": (with_fields(FAMILIES[fam], "fixup", fixup=True), dict(wave=w))
              for fam in args.fams.split(",") for w in map(int, args.waves.split(","))}
    return {f"pick={pick}": (pick, {}), **fixups}


make = lambda c, a, b, out: (launch.plan(c[0], a, b, out) if not c[1] else c[0].plan(a, b, out, **c[1]))
rows = probe.sweep(bench, args.shapes, args.dtypes, args.passes, candidates, make, args.reps)
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows), open(args.json, "w"), indent=1)
