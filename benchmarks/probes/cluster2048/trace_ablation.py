"""Traces of step 9 at one tile per CTA (2048^3) as built, with -DGL_ABLATE_NO_MULTICAST=1 (the
cluster kept, B loaded whole by each CTA: no multicast, the same coupled release), and 9:c1,
`--runs` times each; the records are written as `gemm-ladder trace` writes them, then read by
latency_by_ktile.py (item 65's question: is the once-per-kernel stall the multicast's?).

    PYTHONPATH=src python benchmarks/probes/cluster2048/trace_ablation.py --out DIR [--runs 2]
"""
import argparse
from pathlib import Path
from gemm_ladder.choreography import saved, trace
from gemm_ladder.runtime.steps import get_step

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--size", type=int, default=2048)
ap.add_argument("--runs", type=int, default=2)
args = ap.parse_args()
S = args.size
for run in range(1, args.runs + 1):
    for name, key, defines in (("9", "9", None), ("9_nomc", "9", {"GL_ABLATE_NO_MULTICAST": 1}), ("9_c1", "9:c1", None)):
        m = trace.measure(get_step(key), S, S, S, extra_defines=defines)
        path = Path(args.out) / f"run{run}_{name}_records.json.gz"
        saved.write_records(path, key + (" (no multicast)" if defines else ""), (S, S, S), m["records"],
                            num_sms=m["num_sms"], ctas=m["blocks"], events_per_slot=m["events_per_slot"],
                            correct=m["correct"], ms_plain=m["ms_plain"], ms_traced=m["ms_traced"])
        print(f"run {run} {name}: correct {m['correct']}, {m['ms_plain'] * 1e3:.2f} us untraced -> {path}", flush=True)
