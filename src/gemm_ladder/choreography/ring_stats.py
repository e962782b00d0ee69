"""What a measured trace says about an operand ring, k-tile by k-tile: does the consumer wait
for data (the loads set the pace), or does the producer wait for an empty stage (the consumers
set it)?

From a decoded trace (trace.decode: one record per recording slot), per CTA: the producer's
stages in the order it filled them (its wait on the empty barrier, then the loads' issue), and
the first consumer's k-tiles in the order it took them (its wait on the full barrier, the MMAs'
issue, their retirement), each matched to the load it read (match_loads). Each figure is a median over every CTA's steady state: its first
`skip` k-tiles (the ring's first fill) and its last one left out.

- ``period_ns``: between one k-tile's MMA issue and the next's;
- ``consumer_wait_ns``: a consumer's wait on the full barrier (data not there yet);
- ``producer_wait_ns``: the producer's wait on the empty barrier (every stage in use);
- ``issue_to_ready_ns``: from a stage's loads' issue to the end of its consumer's wait: the
  loads' latency where the consumer waited (``waited_share``: the share of k-tiles whose wait
  was longer than WAITED_NS), an upper bound where it did not;
- ``mma_ns``: a k-tile's MMAs, issue to retirement.
"""
from __future__ import annotations

import statistics

from .trace import BARRIERS, EVENTS

_FULL = {i for i, n in BARRIERS.items() if n in ("full", "tma2mma")}
_EMPTY = {i for i, n in BARRIERS.items() if n in ("mma2tma",)}
# A wait longer than this was for data: a barrier found ready costs its try_wait and the two
# stamps, 35-60 ns in the median over the ladder's traces on the H200 (their fastest waits).
WAITED_NS = 100.0


def producer_stages(events) -> list[dict]:
    """The producer's stages in order: {wait (ns on the empty barrier), issue (ns), key (stage,
    phase, k)}."""
    out, begin, wait = [], None, 0.0
    for t, kind, bar, stage, phase, k, *_ in events:
        if kind == EVENTS["EV_WAIT_BEGIN"] and bar in _EMPTY:
            begin = t
        elif kind == EVENTS["EV_WAIT_END"] and bar in _EMPTY and begin is not None:
            wait, begin = t - begin, None
        elif kind == EVENTS["EV_LOAD_ISSUE"]:
            out.append({"wait": wait, "issue": t, "key": (stage, phase, k)})
            wait = 0.0
    return out


def consumer_ktiles(events) -> list[dict]:
    """The consumer's k-tiles in order: {wait, ready (end of the wait), issue, done (retired or
    None), key (stage, phase, k)}: a retirement names its k-tile by that key."""
    out, begin, open_ = [], None, {}
    for t, kind, bar, stage, phase, k, *_ in events:
        if kind == EVENTS["EV_WAIT_BEGIN"] and bar in _FULL:
            begin = t
        elif kind == EVENTS["EV_WAIT_END"] and bar in _FULL and begin is not None:
            out.append({"wait": t - begin, "ready": t, "issue": None, "done": None, "key": (stage, phase, k)})
            open_[(stage, phase, k)] = out[-1]
            begin = None
        elif kind == EVENTS["EV_MMA_ISSUE"] and out and out[-1]["issue"] is None:
            out[-1]["issue"] = t
        elif kind == EVENTS["EV_MMA_DONE"] and (stage, phase, k) in open_:
            open_.pop((stage, phase, k))["done"] = t
    return out


def match_loads(stages: list[dict], ktiles: list[dict]) -> list[dict | None]:
    """For each consumer k-tile, the producer's stage it read: the latest load issue of the same
    stage and k, in the same lap, before the consumer found the stage full (a consumer that takes
    only some stages, ping-pong's, reads them so too). The two ends' phases start opposite
    (gl_pipeline.cuh), so a lap's producer phase is its consumer phase flipped."""
    by_key: dict[tuple, list[dict]] = {}
    for s in stages:
        stage, phase, k = s["key"]
        by_key.setdefault((stage, phase ^ 1, k), []).append(s)
    out = []
    for c in ktiles:
        cands = [s for s in by_key.get(c["key"], ()) if s["issue"] <= c["ready"]]
        out.append(max(cands, key=lambda s: s["issue"]) if cands else None)
    return out


def _median(xs: list[float]) -> float | None:
    return statistics.median(xs) if xs else None


def ring_stats(records: list[dict], skip: int | None = None) -> dict:
    """The medians above over every CTA that has a producer and a consumer record. ``skip``:
    k-tiles left out at the start (default: the deepest stage index the producer used, plus
    one: the first fill)."""
    blocks: dict[int, dict[str, list]] = {}
    for r in records:
        b = blocks.setdefault(r["block"], {})
        if r["role"] == "producer":
            b["producer"] = r["events"]
        elif r["role"] == "consumer" and "consumer" not in b:  # the first consumer's slot
            b["consumer"] = r["events"]
    acc = {k: [] for k in ("period_ns", "consumer_wait_ns", "producer_wait_ns", "issue_to_ready_ns", "mma_ns")}
    waited = total = 0
    depth = 0
    for b in blocks.values():
        if "producer" not in b or "consumer" not in b:
            continue
        stages, ktiles = producer_stages(b["producer"]), consumer_ktiles(b["consumer"])
        loads = match_loads(stages, ktiles)
        depth = max([depth] + [s["key"][0] + 1 for s in stages])
        first = depth if skip is None else skip
        for i in range(first, len(ktiles) - 1):
            c, s = ktiles[i], loads[i]
            acc["consumer_wait_ns"].append(c["wait"])
            if s is not None:
                acc["producer_wait_ns"].append(s["wait"])
                acc["issue_to_ready_ns"].append(c["ready"] - s["issue"])
            if c["issue"] is not None and ktiles[i + 1]["issue"] is not None:
                acc["period_ns"].append(ktiles[i + 1]["issue"] - c["issue"])
            if c["issue"] is not None and c["done"] is not None:
                acc["mma_ns"].append(c["done"] - c["issue"])
            waited += c["wait"] > WAITED_NS
            total += 1
    out = {k: _median(v) for k, v in acc.items()}
    out.update(ktiles=total, ctas=sum(1 for b in blocks.values() if "producer" in b and "consumer" in b),
               waited_share=waited / total if total else None, depth_seen=depth)
    return out


def lines(stats: dict) -> list[str]:
    """The figures as a few sentences."""
    if not stats["ktiles"]:
        return ["no steady-state k-tiles in the trace (too few per CTA)"]
    f = lambda x: "n/a" if x is None else f"{x:.0f} ns"  # noqa: E731
    return [f"{stats['ktiles']} steady-state k-tiles over {stats['ctas']} CTAs (ring depth seen: {stats['depth_seen']})",
            f"k-tile period {f(stats['period_ns'])}; MMAs issue to retirement {f(stats['mma_ns'])}",
            f"consumer waits for data {f(stats['consumer_wait_ns'])} per k-tile (waited on "
            f"{100 * stats['waited_share']:.0f} % of them); producer waits for an empty stage {f(stats['producer_wait_ns'])}",
            f"loads' issue to the consumer finding the stage full: {f(stats['issue_to_ready_ns'])}"]
