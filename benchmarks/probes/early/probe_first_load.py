"""Probe: when the first stages land, from traces at one shape (default 2048^3): for each
(step, switches) the traced run after bench.py's zeroing flush, and per k-tile the median over
CTAs of the producer's issue and the first consumer's wait end (the stage landed, or the consumer
got to it). Switches: GL_ABLATE_NO_PREFETCH=1 (no descriptor prefetch at entry).

    PYTHONPATH=src python benchmarks/probes/early/probe_first_load.py [--size 2048] [--json F]
        [--flush zero|read] [--steps 9,9:c1,8]
"""
import argparse, json, statistics as S
from gemm_ladder.choreography import trace
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import steps

ap = argparse.ArgumentParser()
ap.add_argument("--size", type=int, default=2048)
ap.add_argument("--flush", choices=("zero", "read"), default="zero",
                help="the flush before the traced run: bench.py's zeroing one, or a read (L2 left clean)")
ap.add_argument("--steps", default="9,9:c1,8")
ap.add_argument("--switch", default="", help="a define to compare against the plain build (default: no prefetch)")
ap.add_argument("--json", default=None)
args = ap.parse_args()
if args.flush == "read":
    Bench.flush_l2 = lambda self: self.flush_buf.sum()  # trace.measure flushes through its Bench
n = args.size
out = []
SWITCHES = [{}, {"GL_ABLATE_NO_PREFETCH": 1}] if not args.switch else [{}, {args.switch: 1}]
for key, ex in [(k, e) for k in args.steps.split(",") for e in SWITCHES]:
    res = trace.measure(steps.get_step(key), n, n, n, extra_defines=ex or None)
    issue, land, start = {}, {}, []
    for r in res["records"]:
        ev = r["events"]
        if ev:
            start.append(ev[0][0])
        if r["role"] == "producer":
            for e in ev:
                if e[1] == 3:
                    issue.setdefault(e[5], []).append(e[0])
        if r["role"] == "consumer" and r["slot"] == 1:
            seen = set()
            for e in ev:
                if e[1] == 2 and e[5] not in seen:
                    seen.add(e[5])
                    land.setdefault(e[5], []).append(e[0])
    med = lambda d, k: round(S.median(d[k]) / 1e3, 3) if k in d else None
    row = dict(step=key, switches=ex, flush=args.flush, ms_plain=res["ms_plain"], ms_traced=res["ms_traced"], correct=res["correct"],
               first_event_us=round(min(start) / 1e3, 3),
               issue_us=[med(issue, k) for k in range(8)], land_us=[med(land, k) for k in range(8)],
               last_land_us=med(land, max(land)))
    out.append(row)
    print(row, flush=True)
if args.json:
    json.dump(dict(commit=git_commit(), size=n, rows=out), open(args.json, "w"), indent=1)
