"""Where step 8's tile boundary goes with and without the overlapped epilogue (8:o1): traces of
both builds; per consumer, medians over CTAs of the steady k-tile period (MMA_ISSUE to
MMA_ISSUE, k-tiles 2..K-2), the period of a whole tile (k-tile 1's issue to the next tile's),
the boundary's excess over a steady k-tile (tile period - k_tiles x steady period), and the
staging span (EPI_BEGIN to EPI_END). 8:o1 and GL_ABLATE_NO_EPI_FENCE exist in tree 67ed2cf
(plus the fence switch, see 2026-11-30_h200_67ed2cf/trace_overlap.txt); the overlap was reverted
after this probe (docs/perf-notes.md, item 67).

    PYTHONPATH=src python benchmarks/probes/overlap8/trace_overlap.py [--keys 8,8:o1] [--sizes 4096,2048]
        [--defines GL_ABLATE_NO_EPI_FENCE=1]
"""
import argparse
import statistics as stt

from gemm_ladder.choreography import trace
from gemm_ladder.runtime import steps

EV_MMA_ISSUE, EV_EPI_BEGIN, EV_EPI_END = 4, 6, 7
ap = argparse.ArgumentParser()
ap.add_argument("--keys", default="8,8:o1")
ap.add_argument("--sizes", default="4096,2048")
ap.add_argument("--defines", default="", help="ablation switches of both builds, e.g. GL_ABLATE_NO_EPI_FENCE=1")
args = ap.parse_args()
defines = {k: int(v) for k, v in (d.split("=") for d in args.defines.split(",") if d)}
for size in map(int, args.sizes.split(",")):
    for key in args.keys.split(","):
        st = steps.get_step(key)
        kt = -(-size // st.bk)
        m = trace.measure(st, size, size, size, extra_defines=defines)
        steady, tile_period, epi = [], [], []
        for r in m["records"]:
            if r["role"] != "consumer":
                continue
            issue = {}  # (tile, k) -> t
            begin = None
            for t, ev, _bar, _s, _p, k, tile in r["events"]:
                if ev == EV_MMA_ISSUE:
                    issue[(tile, k)] = t
                elif ev == EV_EPI_BEGIN:
                    begin = t
                elif ev == EV_EPI_END and begin is not None:
                    epi.append(t - begin)
                    begin = None
            tiles = sorted({tl for tl, _ in issue}, key=lambda tl: issue[(tl, 1)] if (tl, 1) in issue else 0)
            for tl in tiles:
                steady += [issue[(tl, k + 1)] - issue[(tl, k)] for k in range(2, kt - 2)
                           if (tl, k) in issue and (tl, k + 1) in issue]
            for a, b in zip(tiles, tiles[1:]):
                if (a, 1) in issue and (b, 1) in issue:
                    tile_period.append(issue[(b, 1)] - issue[(a, 1)])
        s, p = stt.median(steady), stt.median(tile_period)
        print(f"{size}^3 step {key} {args.defines}: untraced {m['ms_plain'] * 1e3:.1f} us, traced {m['ms_traced'] * 1e3:.1f} us, "
              f"correct {m['correct']}; steady k-tile {s:.0f} ns, tile period {p:.0f} ns, boundary excess "
              f"{p - kt * s:.0f} ns, staging span {stt.median(epi):.0f} ns ({len(tile_period)} boundaries)")
