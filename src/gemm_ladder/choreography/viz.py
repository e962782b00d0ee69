"""Views of :class:`~gemm_ladder.choreography.timeline.Timeline` objects.

* :func:`write_page` - one self-contained interactive HTML page (inline JS and
  CSS from ``viz_assets/``, data embedded as JSON; no network, no server, no
  external library): one lane per role and CTA, spans coloured by kind,
  barrier hand-offs drawn as arrows, an event stepper (``#prev-event``,
  ``#next-event``, ``#event-slider``, ``#event-index``, ``#event-desc``), a
  shared zoomable time window, two panels (``#select-a``/``#select-b``) to set
  e.g. lockstep beside warp-specialized or simulated beside measured, KPI
  cards (``#kpi-cards``), the ring slots and mbarrier states at the cursor,
  and a summary table of every timeline (``#summary-table``).
* :func:`write_chrome_trace` - Chrome trace-event JSON (Perfetto and
  chrome://tracing load it): one process per (timeline, CTA), one thread per
  lane; overlapping spans of a lane are split onto sub-tracks ("consumer0 #2")
  so that no two events on one track overlap.

Imports only :mod:`gemm_ladder.choreography.timeline` and the standard library.
"""

from __future__ import annotations

import html
import json
import os
from pathlib import Path
from typing import Iterable, Sequence

from .timeline import KINDS, Timeline, kpis, lane_cta, lane_role, stage_intervals, timeline_events

__all__ = ["page_data", "render_page", "write_page", "chrome_trace", "write_chrome_trace",
           "split_tracks", "default_pair"]

_ASSETS = Path(__file__).with_name("viz_assets")
_STATES = ["loading", "full", "reading", "writing"]
_WHAT = {"begin": 0, "end": 1, "pass": 2}


def _as_list(timelines: Timeline | Iterable[Timeline]) -> list[Timeline]:
    if isinstance(timelines, Timeline):
        return [timelines]
    return list(timelines)


def _r(x: float) -> float:
    """Round a time to 0.1 ns for compact JSON."""
    return round(float(x), 1)


def default_pair(tls: Sequence[Timeline]) -> tuple[int, int]:
    """Which two timelines the page shows first (indices; -1 = none).

    A simulated and a measured timeline of the same step if there is such a
    pair; else the last lockstep timeline beside the first warp-specialized
    one; else the first two."""
    for i, a in enumerate(tls):
        if a.source != "sim":
            continue
        for j, b in enumerate(tls):
            if b.source == "measured" and b.step == a.step:
                return i, j
    lock = [i for i, t in enumerate(tls) if t.meta.get("style") == "lockstep" and not t.meta.get("what_if")]
    ws = [i for i, t in enumerate(tls) if t.meta.get("style") == "warp-specialized" and not t.meta.get("what_if")]
    what = [i for i, t in enumerate(tls) if t.meta.get("what_if")]
    if what:
        other = [i for i in range(len(tls)) if i != what[0]]
        return what[0], (other[0] if other else -1)
    if lock and ws:
        return lock[-1], ws[0]
    if len(tls) >= 2:
        return 0, 1
    return (0, -1) if tls else (-1, -1)


def _tl_payload(tl: Timeline) -> dict:
    lanes = tl.all_lanes()
    lane_ix = {ln: i for i, ln in enumerate(lanes)}
    bars = sorted({s.barrier for s in tl.spans if s.barrier} | {h.barrier for h in tl.handoffs})
    bar_ix = {b: i for i, b in enumerate(bars)}
    spans = [[lane_ix[s.lane], KINDS.index(s.kind) if s.kind in KINDS else KINDS.index("idle"),
              _r(s.start), _r(s.end), s.stage, s.phase,
              bar_ix[s.barrier] if s.barrier else None, s.tile, s.k, s.cta, s.label]
             for s in tl.spans]
    handoffs = [[bar_ix[h.barrier], h.stage, h.phase, lane_ix.get(h.src_lane, -1),
                 lane_ix.get(h.dst_lane, -1), _r(h.t_arrive), _r(h.t_release), h.cta]
                for h in tl.handoffs]
    events = [[_r(e["t"]), e["span"], _WHAT[e["what"]]] for e in timeline_events(tl)]
    rings = ["smem", "staging"]
    stages = [[rings.index(d["ring"]), d["cta"], d["stage"], _STATES.index(d["state"]),
               _r(d["t0"]), _r(d["t1"]), d["k"], d["tile"]] for d in stage_intervals(tl)]
    meta = {k: v for k, v in tl.meta.items() if k not in ("barrier_log",)}
    blog = tl.meta.get("barrier_log") or []
    return dict(
        title=tl.title, source=tl.source, step=tl.step, lanes=lanes, bars=bars,
        spans=spans, handoffs=handoffs, events=events, stages=stages,
        kpis=kpis(tl), meta=meta,
        blog=[[_r(r[0])] + list(r[1:]) for r in blog],
    )


def page_data(timelines: Iterable[Timeline], pair: tuple[int, int] | None = None,
              title: str = "") -> dict:
    """The JSON the page embeds (exposed for tests)."""
    tls = _as_list(timelines)
    a, b = pair if pair is not None else default_pair(tls)
    return dict(title=title, kinds=list(KINDS), rings=["smem", "staging"], states=_STATES,
                defaults=[a, b], timelines=[_tl_payload(t) for t in tls])


def _asset(name: str) -> str:
    return (_ASSETS / name).read_text(encoding="utf-8")


def render_page(timelines: Iterable[Timeline], title: str = "GEMM ladder - choreography",
                pair: tuple[int, int] | None = None, subtitle: str = "") -> str:
    """The page as a string (see :func:`write_page`)."""
    data = page_data(timelines, pair=pair, title=title)
    blob = json.dumps(data, separators=(",", ":"), allow_nan=False)
    blob = blob.replace("</", "<\\/").replace("<!--", "<\\!--")
    tpl = _asset("page.html")
    panels = "".join(_asset("panel.html").replace("__P__", p) for p in ("a", "b"))
    return (tpl.replace("__PANELS__", panels)
               .replace("/*__CSS__*/", _asset("page.css"))
               .replace("/*__JS__*/", _asset("page.js"))
               .replace("__TITLE__", html.escape(title))
               .replace("__SUBTITLE__", html.escape(subtitle))
               .replace("__DATA__", blob))


def write_page(timelines: Iterable[Timeline], path: str | os.PathLike,
               title: str = "GEMM ladder - choreography", pair: tuple[int, int] | None = None,
               subtitle: str = "") -> Path:
    """Write one self-contained interactive HTML page of ``timelines`` to ``path``.

    ``pair`` picks the two timelines shown first (indices; see
    :func:`default_pair` for the default).  Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_page(timelines, title=title, pair=pair, subtitle=subtitle),
                    encoding="utf-8")
    return path


# ---------------------------------------------------------------------------
# Chrome / Perfetto trace
# ---------------------------------------------------------------------------

def split_tracks(intervals: Sequence[tuple[float, float]]) -> list[int]:
    """Assign each interval (start, end) a sub-track so that no two intervals on one
    sub-track overlap (greedy interval partitioning; uses the fewest sub-tracks).
    Touching intervals (one ends where the next starts) may share a track."""
    order = sorted(range(len(intervals)), key=lambda i: (intervals[i][0], intervals[i][1]))
    ends: list[float] = []
    out = [0] * len(intervals)
    for i in order:
        s, e = intervals[i]
        for t, last in enumerate(ends):
            if last <= s:
                ends[t] = max(e, s)
                out[i] = t
                break
        else:
            ends.append(max(e, s))
            out[i] = len(ends) - 1
    return out


def chrome_trace(timelines: Timeline | Iterable[Timeline], flows: bool = True) -> dict:
    """Chrome trace-event JSON (``{"traceEvents": [...]}``) for one or more timelines.

    pid = one per (timeline, CTA); tid = one per lane sub-track.  Times are in
    microseconds (the format's unit).  Hand-offs become flow events when
    ``flows``."""
    tls = _as_list(timelines)
    ev: list[dict] = []
    for ti, tl in enumerate(tls):
        lanes = tl.all_lanes()
        tids: dict[tuple[str, int], tuple[int, int]] = {}
        by_lane: dict[str, list] = {}
        for s in tl.spans:
            by_lane.setdefault(s.lane, []).append(s)
        pids = set()
        next_tid: dict[int, int] = {}
        for lane in lanes:
            spans = by_lane.get(lane, [])
            cta = spans[0].cta if spans else lane_cta(lane)
            pid = ti * 100 + cta + 1
            if pid not in pids:
                pids.add(pid)
                ev.append(dict(ph="M", name="process_name", pid=pid, tid=0,
                               args=dict(name=f"{tl.title} [{tl.source}] {lane.split('/')[0]}")))
                ev.append(dict(ph="M", name="process_sort_index", pid=pid, tid=0,
                               args=dict(sort_index=pid)))
            sub = split_tracks([(s.start, s.end) for s in spans]) if spans else [0]
            for n in range(max(sub) + 1 if spans else 1):
                tid = next_tid.get(pid, 1)
                next_tid[pid] = tid + 1
                tids[(lane, n)] = (pid, tid)
                name = lane_role(lane) + (f" #{n + 1}" if n else "")
                ev.append(dict(ph="M", name="thread_name", pid=pid, tid=tid, args=dict(name=name)))
                ev.append(dict(ph="M", name="thread_sort_index", pid=pid, tid=tid,
                               args=dict(sort_index=tid)))
            for s, n in zip(spans, sub):
                pid, tid = tids[(lane, n)]
                args = {k: v for k, v in dict(stage=s.stage, phase=s.phase, barrier=s.barrier,
                                              tile=s.tile, k=s.k).items() if v is not None}
                ev.append(dict(ph="X", name=s.label or s.kind, cat=s.kind, pid=pid, tid=tid,
                               ts=s.start / 1000.0, dur=max(0.0, s.end - s.start) / 1000.0,
                               args=args))
        if flows:
            for i, h in enumerate(tl.handoffs):
                src, dst = tids.get((h.src_lane, 0)), tids.get((h.dst_lane, 0))
                if not src or not dst:
                    continue
                fid = ti * 1_000_000 + i + 1
                name = f"{h.barrier}[{h.stage}]"
                ev.append(dict(ph="s", id=fid, name=name, cat="handoff", pid=src[0], tid=src[1],
                               ts=h.t_arrive / 1000.0))
                ev.append(dict(ph="f", bp="e", id=fid, name=name, cat="handoff", pid=dst[0],
                               tid=dst[1], ts=h.t_release / 1000.0))
    return {"traceEvents": ev, "displayTimeUnit": "ns",
            "otherData": {"generator": "gemm_ladder.viz", "timelines": [t.title for t in tls]}}


def write_chrome_trace(timelines: Timeline | Iterable[Timeline], path: str | os.PathLike,
                       flows: bool = True) -> Path:
    """Write :func:`chrome_trace` to ``path`` (open it in ui.perfetto.dev or
    chrome://tracing).  Returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(chrome_trace(timelines, flows=flows)), encoding="utf-8")
    return path
