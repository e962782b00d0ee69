"""Fitting the model's timings to a measured timeline, simulating what it measured, and
checking that the calibrated model predicts the measured makespan."""
from __future__ import annotations

import bisect
import dataclasses
import statistics
from typing import Any

from ..timeline import WGMMA_ISSUED, Span, Timeline, kpis, lane_role, union_length
from .params import SimParams, params_for_step
from .run import SimResult, simulate

# How far the calibrated model's makespan may be from the measured one (issue 8).
MAKESPAN_TOLERANCE = 0.15
# The timings calibrate() fits; every other field of SimParams is the step's configuration.
FITTED_TIMINGS = ("mma_ns", "consumer_gap_ns", "mma_issue_ns", "mma_wait_ns", "load_latency_ns",
                  "first_load_latency_ns", "setup_ns", "epilogue_ns", "store_latency_ns")


def _median_duration(measured: Timeline, kind: str) -> float | None:
    durations = [s.dur for s in measured.spans if s.kind == kind and s.dur > 0]
    return statistics.median(durations) if durations else None


def _quantile(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def issue_times(measured: Timeline) -> dict[str, list[tuple[float, Any, int]]]:
    """Per consumer lane, its wgmma issues ``(t, tile, k)`` in time order: the ``wgmma
    issued`` marks when the timeline has them, else the starts of its mma spans."""
    marks = [s for s in measured.spans if s.kind == "issue" and s.label.startswith(WGMMA_ISSUED)]
    src = marks or [s for s in measured.spans if s.kind == "mma"]
    out: dict[str, list] = {}
    for s in src:
        if s.k is not None:
            out.setdefault(s.lane, []).append((s.start, s.tile, s.k))
    for v in out.values():
        v.sort(key=lambda x: x[0])
    return out


def _waits_by_lane(measured: Timeline) -> dict[str, list[Span]]:
    """Each lane's waits for data (tma2mma, or a lockstep team's full barrier), in time order."""
    waits: dict[str, list[Span]] = {}
    for s in measured.spans:
        if s.kind == "wait" and s.barrier in ("tma2mma", "full"):
            waits.setdefault(s.lane, []).append(s)
    for v in waits.values():
        v.sort(key=lambda s: s.start)
    return waits


def consumer_gap(measured: Timeline) -> float | None:
    """A consumer's wgmma issue-to-issue time when it did not wait for data: per lane, the
    intervals between consecutive k-tiles of one tile, less the part of the lane's
    tma2mma waits in between beyond the shortest such wait (one that passed at once);
    median over all of them. Where the tensor core is the bottleneck this is its period
    instead, which the model then reproduces the same way."""
    waits = _waits_by_lane(measured)
    gaps = []
    for lane, issues in issue_times(measured).items():
        ws = waits.get(lane, [])
        starts = [s.start for s in ws]
        base = min((s.dur for s in ws), default=0.0)
        for (t0, tile0, k0), (t1, tile1, k1) in zip(issues, issues[1:]):
            if tile1 != tile0 or k1 != k0 + 1:
                continue
            i, blocked = bisect.bisect_left(starts, t0), 0.0
            while i < len(ws) and ws[i].start < t1:
                blocked += max(0.0, min(ws[i].end, t1) - ws[i].start - base)
                i += 1
            gaps.append(t1 - t0 - blocked)
    return statistics.median(gaps) if gaps else None


def mma_issue(measured: Timeline) -> float | None:
    """How long a consumer takes from its tma2mma wait returning to its wgmma group being
    issued: median over the issues that follow a wait of the same lane."""
    waits = _waits_by_lane(measured)
    out = []
    for lane, issues in issue_times(measured).items():
        ends = sorted(s.end for s in waits.get(lane, []))
        for t, _, _ in issues:
            i = bisect.bisect_right(ends, t)
            if i:
                out.append(t - ends[i - 1])
    return statistics.median(out) if out else None


def mma_wait(measured: Timeline) -> float | None:
    """How long a consumer takes from issuing a group to releasing the previous one's stage
    (wgmma.wait_group(1) and the release; where the tensor core was still busy with that
    group, the wait for it too): median over its mma2tma arrivals (a lockstep team's: its
    refill loads), each from the latest wgmma issue of the same lane before it."""
    issues = {lane: [t for t, _, _ in v] for lane, v in issue_times(measured).items()}
    out = []
    for s in measured.spans:
        release = s.barrier == "mma2tma" or (lane_role(s.lane) == "team" and s.barrier in ("full", "tma2mma"))
        if s.kind == "issue" and release and s.lane in issues:
            i = bisect.bisect_right(issues[s.lane], s.start)
            if i:
                out.append(s.start - issues[s.lane][i - 1])
    return statistics.median(out) if out else None


def first_loads(measured: Timeline) -> tuple[float | None, float | None]:
    """The cold start, per CTA: how long its first load took (issue -> seen landed: exact, its
    consumer waits for it), and how long after the CTA's first event that load was issued
    (less the model's own two issues before it); medians over CTAs."""
    first: dict[int, Span] = {}
    start: dict[int, float] = {}
    for s in measured.spans:
        start[s.cta] = min(start.get(s.cta, s.start), s.start)
        if s.kind == "load" and (s.cta not in first or s.start < first[s.cta].start):
            first[s.cta] = s
    if not first:
        return None, None
    lat = statistics.median(s.dur for s in first.values())
    setup = statistics.median(s.start - start[c] for c, s in first.items())
    return lat, setup


def release_handoff(measured: Timeline) -> float | None:
    """How long a producer blocked on a stage's empty barrier resumes after the last release
    it heard (the hand-off's arrival stamp to its wait returning), median in ns. Only waits
    that began before that arrival count: the others were not waiting for it."""
    waits = {(s.lane, s.end): s for s in measured.spans if s.kind == "wait" and s.barrier == "mma2tma"}
    lags = [h.t_release - h.t_arrive for h in measured.handoffs
            if h.barrier == "mma2tma" and lane_role(h.dst_lane) == "producer"
            and (w := waits.get((h.dst_lane, h.t_release))) is not None and w.start < h.t_arrive]
    return statistics.median(lags) if lags else None


def calibrate(params: SimParams, measured: Timeline) -> SimParams:
    """Fit the model's timing parameters to a measured :class:`Timeline`.

    * ``mma_ns``: per CTA, the union of its ``mma`` spans divided by their
      number (tensor-core time per k-tile, robust to overlapping issue->wait
      spans), median over CTAs, rescaled to a 128x128x64 k-tile.
    * ``consumer_gap_ns``, ``mma_issue_ns``, ``mma_wait_ns``: :func:`consumer_gap`,
      :func:`mma_issue`, :func:`mma_wait`.
    * ``load_latency_ns``: median ``load`` span duration, less the bandwidth
      transfer time of one piece when ``l2_bytes_per_ns`` is set.
    * ``epilogue_ns`` / ``store_latency_ns``: median ``epilogue`` / ``store``
      span durations, rescaled the same way the model scales them.
    * ``first_load_latency_ns``, ``setup_ns``: the cold start, :func:`first_loads`.

    Parameters without matching spans are left as they are.
    """
    upd: dict[str, float] = {}
    per_cta = []
    for c in sorted({s.cta for s in measured.spans}):
        mm = [s for s in measured.spans if s.cta == c and s.kind == "mma"]
        if mm:
            per_cta.append(union_length((s.start, s.end) for s in mm) / len(mm))
    scale = (params.tile_m * params.tile_n * params.tile_k) / (128 * 128 * 64)
    if per_cta:
        upd["mma_ns"] = statistics.median(per_cta) / scale
    gap, issue, wait = consumer_gap(measured), mma_issue(measured), mma_wait(measured)
    if gap is not None:
        upd["consumer_gap_ns"] = gap
    room = upd.get("consumer_gap_ns", params.consumer_gap_ns)
    if issue is not None:
        upd["mma_issue_ns"] = issue = min(issue, room)
    if wait is not None:
        upd["mma_wait_ns"] = min(wait, room - upd.get("mma_issue_ns", params.mma_issue_ns))
    lat = _median_duration(measured, "load")
    if lat is not None:
        upd["load_latency_ns"] = max(0.0, lat - params.transfer_ns(params.a_bytes))
    cold, setup = first_loads(measured)
    if cold is not None:
        upd["first_load_latency_ns"] = max(0.0, cold - params.transfer_ns(params.a_bytes))
        upd["setup_ns"] = max(0.0, setup - 2 * params.issue_ns)
    epi = _median_duration(measured, "epilogue")
    if epi is not None:
        area = (params.tile_m * params.tile_n) / (128 * 128)
        upd["epilogue_ns"] = epi * params.chunks / area
    store = _median_duration(measured, "store")
    if store is not None:
        upd["store_latency_ns"] = max(0.0, store - params.transfer_ns(params.store_chunk_bytes))
    return dataclasses.replace(params, **upd)


def simulate_like(measured: Timeline, fit: bool = True, title: str | None = None, **overrides: Any) -> SimResult:
    """Simulate the configuration a measured timeline describes (its step and the
    ``depth``/``k_tiles``/``tiles_per_cta`` in its meta; k_tiles and tiles_per_cta
    are inferred from the wgmma spans' ``k``/``tile`` when the meta lacks them),
    optionally calibrated to it, so the two can be shown side by side."""
    m = measured.meta or {}
    kw = {k: m.get(k) for k in ("depth", "k_tiles", "tiles_per_cta")}
    # not in the meta: infer from the spans (k and tile indices of the wgmma spans)
    mm = [s for s in measured.spans if s.kind == "mma"]
    if kw["k_tiles"] is None and any(s.k is not None for s in mm):
        kw["k_tiles"] = 1 + max(s.k for s in mm if s.k is not None)
    if kw["tiles_per_cta"] is None and any(s.tile is not None for s in mm):
        per_cta: dict[int, set] = {}
        for s in mm:
            if s.tile is not None:
                per_cta.setdefault(s.cta, set()).add(s.tile)
        kw["tiles_per_cta"] = max(len(t) for t in per_cta.values())   # tile ids may be global
    kw.update(overrides)
    p = params_for_step(m.get("key") or measured.step, **kw)
    if fit:
        p = calibrate(p, measured)
    what = "fitted to this trace" if fit else "the model's defaults"
    return simulate(p, title=title or f"{p.title}, depth {p.depth} (simulated, {what})")


def busiest_makespan(tl: Timeline) -> float:
    """The longest CTA lifetime in a timeline (first to last span of one CTA): what one
    simulated CTA (or cluster) is compared with, free of the launch skew between CTAs."""
    return max((d["makespan_ns"] for d in kpis(tl)["per_cta"]), default=0.0)


def check_calibration(measured: Timeline, tolerance: float = MAKESPAN_TOLERANCE) -> dict:
    """Calibrate the model to a measured timeline, simulate the measured configuration, and
    compare makespans (the busiest CTA's, measured vs simulated). Returns the step, both
    makespans, the relative error, whether it is within ``tolerance``, both busy fractions
    and the fitted parameters."""
    return calibration_and_run(measured, tolerance)[0]


def calibration_and_run(measured: Timeline, tolerance: float = MAKESPAN_TOLERANCE,
                        title: str | None = None) -> tuple[dict, SimResult]:
    """:func:`check_calibration`'s result and the fitted simulation it compared (for the page)."""
    res = simulate_like(measured, fit=True, title=title)
    m, s = busiest_makespan(measured), busiest_makespan(res.timeline)
    err = s / m - 1.0 if m > 0 else float("nan")
    fitted = {k: getattr(res.params, k) for k in FITTED_TIMINGS}
    return dict(step=res.params.key, depth=res.params.depth, k_tiles=res.params.k_tiles,
                tiles_per_cta=res.params.tiles_per_cta, measured_makespan_ns=m, simulated_makespan_ns=s,
                error=err, tolerance=tolerance, within=abs(err) <= tolerance,
                busy_measured=kpis(measured)["tensor_core_busy"], busy_simulated=res.kpis["tensor_core_busy"],
                verdict=res.verdict, fitted=fitted), res
