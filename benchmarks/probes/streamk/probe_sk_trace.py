"""Probe: where a stream-K wave's time goes. Runs the GL_TRACE build of 9:sk (and 9:c1) on
one shape and prints, per CTA, when its whole tiles end, when its split piece's MMAs start and
end, when the epilogue (owner) or slot store (later piece) ends, and when its last TMA store
completes; ns from the earliest event of the launch.

    PYTHONPATH=src python benchmarks/probes/streamk/probe_sk_trace.py [M N K]
"""
import statistics
import sys

from gemm_ladder.choreography import trace
from gemm_ladder.runtime import steps

M, N, K = (int(x) for x in sys.argv[1:4]) if len(sys.argv) > 3 else (512, 11008, 4096)
for key in ("9:sk", "9:c1"):
    st = steps.get_step(key)
    res = trace.measure(st, M, N, K, reps=5)
    recs = res["records"]
    t_zero = min(r["t0"] for r in recs)
    G = res["blocks"]
    sk, sk_ctas = st.stream_k_deal(M, N, K, G) if st.stream_k else (0, 1)
    dp_end = st.tiles(M, N) - sk
    print(f"{key} {M}x{N}x{K}: {res['ms_plain'] * 1e3:.1f} us plain, {res['ms_traced'] * 1e3:.1f} us traced, "
          f"correct={res['correct']}, {G} CTAs, split {sk} tiles over {sk_ctas} CTAs, "
          f"overflow {res['overflow'][:3]}")
    ev = trace.EVENTS
    rows = []
    for r in recs:
        off = r["t0"] - t_zero
        if r["slot"] == 1:  # consumer 0
            mma = [(t + off, tile, k) for (t, kind, b, s, p, k, tile) in r["events"] if kind == ev["EV_MMA_ISSUE"]]
            done = [(t + off, tile) for (t, kind, b, s, p, k, tile) in r["events"] if kind == ev["EV_MMA_DONE"]]
            epi = [(t + off, tile) for (t, kind, b, s, p, k, tile) in r["events"] if kind == ev["EV_EPI_END"]]
            epi0 = [(t + off, tile) for (t, kind, b, s, p, k, tile) in r["events"] if kind == ev["EV_EPI_BEGIN"]]
            dp_done = max([t for t, tile in done if tile < dp_end], default=0)
            sk_start = min([t for t, tile, k in mma if tile >= dp_end], default=0)
            sk_done = max([t for t, tile in done if tile >= dp_end], default=0)
            sk_epi = max([t for t, tile in epi if tile >= dp_end], default=0)
            sk_epi0 = min([t for t, tile in epi0 if tile >= dp_end], default=0)
            fx = {kind: t + off for (t, kind, b, s, p, k, tile) in r["events"]
                  if trace.BARRIERS.get(b) == "fixup" and tile >= dp_end}
            end = r["t1"] - t_zero
            rows.append((r["block"], dp_done, sk_start, sk_done, fx.get(ev["EV_ARRIVE"], 0),
                         fx.get(ev["EV_WAIT_BEGIN"], 0), fx.get(ev["EV_WAIT_END"], 0), sk_epi0, sk_epi, end))
    rows.sort()
    print(" cta  dp_mma_done sk_mma_start  sk_mma_done    published  fixup_start    fixup_end    epi_begin"
          "      epi_end consumer_end   (us)")
    for row in rows[:6] + rows[sk_ctas - 3:sk_ctas + 3] if sk else rows[:6]:
        print(" %3d " % row[0] + "  ".join(f"{x / 1e3:11.2f}" for x in row[1:]))
    ends = [row[-1] for row in rows]
    print(f" consumer end: min {min(ends) / 1e3:.2f} median {statistics.median(ends) / 1e3:.2f} max {max(ends) / 1e3:.2f} us")
    if sk:
        span = [row[3] - row[2] for row in rows if row[2]]
        fix = [row[-1] - row[3] for row in rows if row[2]]
        print(f" split piece MMAs: median {statistics.median(span) / 1e3:.2f} us; piece end -> consumer end: "
              f"median {statistics.median(fix) / 1e3:.2f}, max {max(fix) / 1e3:.2f} us")
