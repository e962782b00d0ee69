"""Probe: when the first stages land, from traces at one shape (default 2048^3): for each
(step, switches) the traced run after bench.py's zeroing flush, and per k-tile the median over
CTAs of the producer's issue and the first consumer's wait end (the stage landed, or the consumer
got to it). Switches: GL_ABLATE_NO_PREFETCH=1 (no descriptor prefetch at entry).

    PYTHONPATH=src python benchmarks/results/experiments/early/probe_first_load.py [--size 2048] [--json F]
"""
import argparse, json, statistics as S
from gemm_ladder.choreography import trace
from gemm_ladder.measure.bench import git_commit
from gemm_ladder.runtime import steps

ap = argparse.ArgumentParser()
ap.add_argument("--size", type=int, default=2048)
ap.add_argument("--json", default=None)
args = ap.parse_args()
n = args.size
out = []
for key, ex in (("9", {}), ("9", {"GL_ABLATE_NO_PREFETCH": 1}), ("9:c1", {}), ("9:c1", {"GL_ABLATE_NO_PREFETCH": 1}),
                ("8", {}), ("8", {"GL_ABLATE_NO_PREFETCH": 1})):
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
    row = dict(step=key, switches=ex, ms_plain=res["ms_plain"], ms_traced=res["ms_traced"], correct=res["correct"],
               first_event_us=round(min(start) / 1e3, 3),
               issue_us=[med(issue, k) for k in range(8)], land_us=[med(land, k) for k in range(8)],
               last_land_us=med(land, max(land)))
    out.append(row)
    print(row, flush=True)
if args.json:
    json.dump(dict(commit=git_commit(), size=n, rows=out), open(args.json, "w"), indent=1)
