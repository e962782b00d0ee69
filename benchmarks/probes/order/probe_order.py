"""Probe: (1) the order of a 128 x 128 k-tile's eight wgmmas (-DGL_EXP_MMA_HALF_OUTER=1: each
64-row half's four k-slices back to back on one accumulator, instead of the two halves
alternating per k-slice) for the steps built on that k-tile; (2) every candidate timed after
the zeroing flush alone and after an idle gap plus the flush (`gap`: the card idles
`--gap-ms` before each call, so no call runs under the power cap's sustained clock).
Each candidate: outputs poisoned, checked against fp32, repeated bit for bit; timed
interleaved with cuBLAS, `--passes` times over the shapes.

    PYTHONPATH=src python benchmarks/probes/order/probe_order.py [--json F]
        [--steps 7:d4,8,8:c1,10] [--plain 9,9:c1] [--flushes zero,gap] [--gap-ms 20]
"""
import argparse, json, time
import torch
from gemm_ladder.measure import probe
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import launch

ap = argparse.ArgumentParser()
ap.add_argument("--steps", default="7:d4,8,8:c1,10", help="steps timed with and without the switch")
ap.add_argument("--plain", default="9,9:c1", help="steps timed as they are")
probe.add_sweep_args(ap, shapes="4096x4096x4096,2048x2048x2048", reps=50)
ap.add_argument("--flushes", default="zero,gap")
ap.add_argument("--gap-ms", type=float, default=20.0)
ap.add_argument("--switch", default="GL_EXP_MMA_HALF_OUTER", help="NAME or NAME=VALUE (default value 1)")
args = ap.parse_args()
bench = Bench(0)


def gap_flush():
    torch.cuda.synchronize()
    time.sleep(args.gap_ms / 1e3)
    bench.flush_buf.zero_()


all_flushes = {**probe.flushes(bench), "gap": gap_flush}
flush_fns = {f: all_flushes[f] for f in args.flushes.split(",")}
make = lambda c, a, b, out: launch.plan(c[0], a, b, out, extra_defines=c[1])
switch, _, value = args.switch.partition("=")
cands = {}
for k in filter(None, args.steps.split(",")):
    cands[k] = (k, {})
    cands[f"{k}+sw"] = (k, {switch: int(value or 1)})
for k in filter(None, args.plain.split(",")):
    cands[k] = (k, {})
rows = probe.sweep(bench, args.shapes, args.dtypes, args.passes, lambda M, N, K, dt: cands, make, args.reps,
                   flush_fns=flush_fns)
if args.json:
    json.dump(dict(commit=git_commit(), switch=args.switch, gap_ms=args.gap_ms, rows=rows), open(args.json, "w"), indent=1)
