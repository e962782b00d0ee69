"""A measured trace of a small-M entry (its GL_TRACE build) and what it says about the operand
ring (choreography/ring_stats.py): does the consumer wait for data, or the producer for an
empty stage? For the long-K rows, where our 64 x 64 stream trails cuBLAS's on the same
decomposition (docs/perf-notes.md items 101 and 103). The traced and the plain build are
timed in turns first (the tracer's cost); the output is checked against fp32; the decoded
records are written for `gemm_ladder.choreography.ring_stats` (and the timeline tools) to read
again without a GPU.
Usage: PYTHONPATH=src python benchmarks/probes/longk/trace_smallm.py [--key smallm:n64]
       [--splits S] [--dtype bfloat16] [--switch NAME=V] [--flush read] [--out DIR] [MxNxK ...]"""
import argparse
import json
import os
import statistics
from pathlib import Path

import torch

from gemm_ladder.choreography import ring_stats, saved, trace
from gemm_ladder.cuda import device as cuda_device
from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.measure import bench, probe

ap = argparse.ArgumentParser()
ap.add_argument("--key", default="smallm:n64", help="an entry, or one with fields changed: n64+share_b=2+...")
ap.add_argument("--splits", type=int, default=1,
                help="K split that many ways (default 1: whole tiles; 0: the entry's deal). The producer "
                     "records a split piece's k-tiles from the piece's first, the consumer from 0, so "
                     "ring_stats matches loads to k-tiles on whole tiles only")
ap.add_argument("--dtype", default="bfloat16")
ap.add_argument("--reps", type=int, default=20)
probe.add_flush_arg(ap)
ap.add_argument("--out", default=os.environ.get("OUT", "out"))
ap.add_argument("--switch", action="append", default=[], metavar="NAME=V",
                help="a build switch for both builds (e.g. GL_ABLATE_NO_MMA=1: the loads alone; the error then "
                     "is the switch's, by design)")
ap.add_argument("shapes", nargs="*", default=["256x2048x4096", "64x4096x4096"])
args = ap.parse_args()
switches = probe.parse_switches(args.switch)
fam = smallm.parse_build(args.key)
dtype = getattr(torch, args.dtype)
b = bench.Bench()
b.flush_l2 = probe.flushes(b)[args.flush]
sms = cuda_device.num_sms(torch.cuda.current_device())
summary = []
for shape in args.shapes:
    M, N, K = map(int, shape.split("x"))
    splits = args.splits or None
    d = fam.plan_deal(M, N, K, sms, splits=splits)
    blocks = d.grid[0]
    cap = 8 * d.units * max(1, d.rounds) + 64  # per slot: a k-tile is one record of two slots, plus the epilogue's
    a, bb = b.inputs(M, N, K, dtype)
    ref = a.float() @ bb.float().T
    buf = torch.zeros(blocks * trace.SLOTS_PER_CTA * (trace.HEADER_WORDS + 2 * cap), dtype=torch.int64, device="cuda")
    traced = runner.plan_smallm(fam, a, bb, splits=splits, trace_buffer=buf, trace_events=cap,
                                extra_defines=switches)
    plain = runner.plan_smallm(fam, a, bb, splits=splits, extra_defines=switches)
    for p in (traced, plain):
        p.out.fill_(float("nan"))
        p()
    torch.cuda.synchronize()
    errs = [float((p.out.float() - ref).abs().max() / ref.abs().max()) for p in (traced, plain)]
    t_traced, t_plain = b.time_interleaved([traced, plain], args.reps)
    buf.zero_()
    b.flush_l2()
    traced()
    torch.cuda.synchronize()
    records = trace.decode(buf.cpu().tolist(), blocks, cap)
    stats = ring_stats.ring_stats(records)
    row = {"key": args.key, "switches": switches, "flush": args.flush, "shape": [M, N, K], "dtype": args.dtype,
           "deal": {"units": d.units, "ctas": blocks, "cluster": list(d.cluster)}, "rel_err": errs,
           "us_plain": 1e3 * statistics.median(t_plain),
           "us_traced": 1e3 * statistics.median(t_traced), "ring": stats}
    summary.append(row)
    path = saved.write_records(Path(args.out) / f"trace_{args.key.replace(':', '_')}_{shape}_records.json.gz",
                               args.key, (M, N, K), records, ctas=blocks, events_per_slot=cap,
                               ms_plain=row["us_plain"] / 1e3, ms_traced=row["us_traced"] / 1e3)
    print(f"{args.key} {shape} {args.dtype}: {blocks} CTAs, runs of {d.units} k-tiles; plain {row['us_plain']:.2f} us, "
          f"traced {row['us_traced']:.2f} us; rel err {max(errs):.1e}; records {path}", flush=True)
    for line in ring_stats.lines(stats):
        print("   " + line, flush=True)
with open(Path(args.out) / f"trace_{args.key.replace(':', '_')}_ring.json", "w") as f:
    json.dump(summary, f, indent=1)
