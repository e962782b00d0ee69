"""The shared timeline model of a GEMM kernel's choreography, and its KPIs.

One model serves two sources:

* ``source="sim"``: produced by :mod:`gemm_ladder.choreography.sim` (a discrete-event model
  of the mbarrier pipelines);
* ``source="measured"``: decoded from in-kernel GPU traces (issue / wait-begin /
  wait-end events recorded by each role).

Both are drawn by :mod:`gemm_ladder.choreography.viz` and summarised by :func:`kpis`.  This
module is pure standard-library Python (no torch, no CUDA).

Model
-----
A :class:`Timeline` is a set of *lanes* (one per role and CTA, named
``"cta<i>/<role>"``), a list of :class:`Span` (something a lane did from
``start`` to ``end``, in nanoseconds) and a list of :class:`Handoff` (an
mbarrier arrival / phase completion that released a waiting role, drawn as an
arrow).

Lane naming convention::

    cta0/producer   the TMA producer warp (warp-specialized steps)
    cta0/consumer0  a consumer (MMA) warpgroup; cta0/consumer1 the second one
    cta0/writeback  the writeback role (TMA store of the staged accumulators)
    cta0/team       the single team of a lockstep kernel (steps 4-6)
    cta0/tma        the TMA engine: loads (and, for lockstep, stores) in flight

In a thread-block cluster each CTA's lanes also name its rank in the cluster
(:func:`lane_name`): ``cta3.rank1/consumer0`` is block 3, the second CTA of its cluster.

Span kinds::

    load      a TMA load in flight for a stage (issue -> bytes landed)
    mma       the tensor core busy with this lane's wgmma work
    epilogue  accumulators registers -> SMEM staging buffer
    store     a TMA store in flight (staging buffer being read / written out)
    wait      a role blocked on an mbarrier (``barrier``, ``stage``, ``phase``
              say which; ``phase`` is the parity waited for).  A zero-length
              wait is a ``try_wait.parity`` that passed at once.
    issue     a short instruction issue (expect_tx, TMA issue, arrive ...)
    idle      nothing to do
    softmax   a warpgroup on the CUDA cores (attention: max, exp2, sum, rescale)

Keys that tie spans together (used by the ring-occupancy KPI): ``cta``,
``tile`` (an output tile id, unique within the CTA: the simulator numbers a
CTA's tiles 0, 1, ...; a decoder may use global tile ids), ``k`` (k-tile
index within the tile for load/mma; epilogue chunk index for epilogue/store)
and ``stage`` (the ring slot).  A decoder of measured traces should fill them
when it knows them; KPIs that need a key skip spans without one.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Iterable

__all__ = [
    "KINDS", "WGMMA_ISSUED", "Span", "Handoff", "Timeline", "kpis", "union_length", "merge_intervals",
    "stage_intervals", "timeline_events", "lane_cta", "lane_role", "lane_name",
]

KINDS = ("load", "mma", "epilogue", "store", "wait", "issue", "idle", "softmax")
# The label of the mark (a zero-length ``issue`` span) a consumer leaves when it has issued a
# k-tile's wgmma group; the simulator and the trace decoder both draw it.
WGMMA_ISSUED = "wgmma issued"


class _Record:
    """A flat dataclass that round-trips through a JSON dict (unknown keys ignored)."""

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict):
        return cls(**{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d})


@dataclass
class Span(_Record):
    """Something one lane did (or one engine had in flight) from ``start`` to ``end`` (ns)."""

    lane: str
    kind: str
    start: float
    end: float
    stage: int | None = None
    phase: int | None = None
    barrier: str | None = None
    tile: int | None = None
    k: int | None = None
    cta: int = 0
    label: str = ""

    @property
    def dur(self) -> float:
        return self.end - self.start


@dataclass
class Handoff(_Record):
    """An mbarrier arrival (or TMA transaction completion) that completed a phase and
    released a waiter: ``src_lane`` arrived at ``t_arrive``; ``dst_lane`` resumed at
    ``t_release``.  ``phase`` is the parity the waiter waited for."""

    barrier: str
    stage: int | None
    phase: int | None
    src_lane: str
    dst_lane: str
    t_arrive: float
    t_release: float
    cta: int = 0


@dataclass
class Timeline:
    """A kernel's choreography: lanes, spans, hand-offs, and free-form ``meta``.

    ``meta`` conventions (all optional): ``depth`` (PIPE_DEPTH), ``k_tiles``,
    ``tiles_per_cta``, ``tile`` ([m, n, k]), ``num_ctas``, ``style``
    ("lockstep" / "warp-specialized"), ``ctas_per_sm`` (CTAs c // ctas_per_sm share one
    SM, a unit of the KPIs; default 1); the simulator also stores ``params``,
    ``verdict``, ``explanation``, ``barriers`` and ``barrier_log``.
    """

    source: str
    step: int
    title: str
    lanes: list[str] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)
    handoffs: list[Handoff] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "source": self.source,
            "step": self.step,
            "title": self.title,
            "lanes": list(self.lanes),
            "spans": [s.to_dict() for s in self.spans],
            "handoffs": [h.to_dict() for h in self.handoffs],
            "meta": self.meta,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "Timeline":
        return cls(
            source=d["source"],
            step=int(d["step"]),
            title=d.get("title", ""),
            lanes=list(d.get("lanes", [])),
            spans=[Span.from_dict(s) for s in d.get("spans", [])],
            handoffs=[Handoff.from_dict(h) for h in d.get("handoffs", [])],
            meta=dict(d.get("meta", {})),
        )

    def to_json(self, **kw) -> str:
        return json.dumps(self.to_dict(), **kw)

    @classmethod
    def from_json(cls, s: str) -> "Timeline":
        return cls.from_dict(json.loads(s))

    def ctas(self) -> list[int]:
        """The CTAs that have at least one span, sorted."""
        return sorted({s.cta for s in self.spans})

    def all_lanes(self) -> list[str]:
        """``lanes`` (without repeats) plus any lane that only appears in spans, in a
        stable order."""
        out: list[str] = []
        seen: set[str] = set()
        for ln in self.lanes:
            if ln not in seen:
                seen.add(ln)
                out.append(ln)
        for s in self.spans:
            if s.lane not in seen:
                seen.add(s.lane)
                out.append(s.lane)
        return out


# ---------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------

def lane_name(cta: int, role: str, rank: int | None = None) -> str:
    """``lane_name(1, "producer")`` -> ``"cta1/producer"``; with the CTA's rank in its
    cluster: ``lane_name(3, "producer", 1)`` -> ``"cta3.rank1/producer"``."""
    return f"cta{cta}" + (f".rank{rank}" if rank is not None else "") + f"/{role}"


def lane_cta(lane: str) -> int:
    """``"cta1/producer"`` or ``"cta1.rank1/producer"`` -> 1 (0 when the lane has no
    ``cta<i>`` prefix)."""
    head = lane.split("/", 1)[0]
    digits = ""
    if head.startswith("cta"):
        for ch in head[3:]:
            if not ch.isdigit():
                break
            digits += ch
    return int(digits) if digits else 0


def lane_role(lane: str) -> str:
    """``"cta1/producer"`` -> ``"producer"``."""
    return lane.split("/", 1)[1] if "/" in lane else lane


def merge_intervals(iv: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    """Union of half-open intervals, as a sorted list of disjoint intervals."""
    out: list[list[float]] = []
    for a, b in sorted((a, b) for a, b in iv if b > a):
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1][1] = b
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def union_length(iv: Iterable[tuple[float, float]], lo: float | None = None,
                 hi: float | None = None) -> float:
    """Length of the union of intervals, optionally clipped to [lo, hi]."""
    tot = 0.0
    for a, b in merge_intervals(iv):
        if lo is not None:
            a = max(a, lo)
        if hi is not None:
            b = min(b, hi)
        if b > a:
            tot += b - a
    return tot


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    """Total overlap of two sorted lists of disjoint intervals."""
    i = j = 0
    tot = 0.0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if hi > lo:
            tot += hi - lo
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tot


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs) if xs else 0.0


# ---------------------------------------------------------------------------
# ring occupancy: when is a ring slot full?
# ---------------------------------------------------------------------------

def stage_intervals(tl: Timeline) -> list[dict]:
    """Per ring slot, the intervals during which it was loading / full / being read.

    Rings:

    * ``"smem"`` - the SMEM operand ring (tma2mma / mma2tma).  A slot's occupant
      is identified by ``(cta, tile, k, stage)``.  It is *loading* from the
      first ``load`` span's start to the last one's end, *full* from the end of
      the last ``load`` span with that key (all bytes landed) to the end of the
      last ``mma`` span with that key (every reader done; the slot may be
      refilled), and *reading* while an ``mma`` span with that key runs.
    * ``"staging"`` - the accumulator staging buffer (mma2ld / ld2mma).  Key
      ``(cta, tile, k, stage)`` of ``epilogue``/``store`` spans (k = chunk).
      *Full* from the end of the ``epilogue`` span to the end of the ``store``
      span (the TMA store has read the buffer). Chunks staged in the borrowed operand
      stage (barrier ``lent_full``, step 9) are not staging slots and are left out.

    An occupant with no reader (no mma / no store) stays full to the CTA's end.
    Returns dicts ``{ring, cta, stage, state, t0, t1, tile, k}`` sorted by t0.
    """
    cta_end: dict[int, float] = {}
    for s in tl.spans:
        cta_end[s.cta] = max(cta_end.get(s.cta, s.end), s.end)

    groups: dict[tuple, dict[str, list[Span]]] = {}
    for s in tl.spans:
        if s.stage is None or s.tile is None or s.k is None:
            continue
        if s.kind in ("load", "mma"):
            ring = "smem"
        elif s.kind in ("epilogue", "store"):
            if s.barrier == "lent_full":  # chunks in the borrowed operand stage, not a staging slot
                continue
            ring = "staging"
        else:
            continue
        key = (ring, s.cta, s.tile, s.k, s.stage)
        groups.setdefault(key, {}).setdefault(s.kind, []).append(s)

    out: list[dict] = []
    for (ring, cta, tile, k, stage), by in groups.items():
        fill_kind, read_kind = ("load", "mma") if ring == "smem" else ("epilogue", "store")
        fills, reads = by.get(fill_kind, []), by.get(read_kind, [])
        if not fills:
            continue
        base = dict(ring=ring, cta=cta, stage=stage, tile=tile, k=k)
        f0 = min(s.start for s in fills)
        f1 = max(s.end for s in fills)
        out.append(dict(base, state="loading" if ring == "smem" else "writing", t0=f0, t1=f1))
        r1 = max((s.end for s in reads), default=cta_end.get(cta, f1))
        if r1 > f1:
            out.append(dict(base, state="full", t0=f1, t1=r1))
        for a, b in merge_intervals((s.start, s.end) for s in reads):
            out.append(dict(base, state="reading", t0=a, t1=b))
    out.sort(key=lambda d: (d["t0"], d["ring"], d["cta"], d["stage"]))
    return out


# ---------------------------------------------------------------------------
# KPIs
# ---------------------------------------------------------------------------

def kpis(tl: Timeline) -> dict:
    """KPIs of a timeline (simulated or measured), all times in ns.

    Per CTA ``c`` let ``t0_c``/``t1_c`` be the earliest start / latest end of
    any of its spans (its makespan is ``t1_c - t0_c``), and ``MMA_c`` the
    *union* of its ``mma`` spans over all its lanes (union, because measured
    mma spans - wgmma issue to wait completion - may overlap on one lane or
    across two consumers sharing one SM's tensor core).

    * ``tensor_core_busy``: mean over CTAs of ``|MMA_c| / (t1_c - t0_c)``.
    * ``tensor_core_busy_steady``: mean over CTAs of ``|MMA_c| / (last mma
      end - first mma start)``: the busy fraction without the fill before the
      first mma and the drain after the last one.
    * ``fill_ns``: mean over CTAs of ``first mma start - t0_c``.
    * ``drain_ns``: mean over CTAs of ``t1_c - last mma end``.
    * ``makespan_ns``: latest end - earliest start over the whole timeline.
    * ``mma_ns``: mean over CTAs of ``|MMA_c|``.
    * ``stall_ns``: ``{lane: {barrier: ns}}``, the union of that lane's
      ``wait`` spans on that barrier (all stages together).
    * ``exposed_stall_ns``: ``{lane: {barrier: ns}}``, the part of those waits
      during which the lane's CTA had no ``mma`` running: the waits that
      actually starve the tensor core (a consumer waiting for the next stage
      while its previous wgmma still runs costs nothing).
    * ``top_stalls``: the five largest ``[lane, barrier, ns, exposed_ns]``
      entries (by ``ns``).
    * ``ring_occupancy``: ``{ring: {"mean": x, "per_stage": {stage: f},
      "stages": n}}`` where ``mean`` is the time-average number of *full*
      slots (see :func:`stage_intervals`) over each CTA's makespan, averaged
      over CTAs, and ``per_stage[s]`` the fraction of the makespan slot ``s``
      was full.  Rings: ``"smem"`` (operand ring) and ``"staging"``.
    * ``softmax_busy`` (with ``softmax`` spans): mean over their lanes of |softmax| / makespan.
    * ``per_cta``: the per-CTA (per SM, ``meta["ctas_per_sm"]``) figures the means were taken over.
    """
    unit = max(1, int(tl.meta.get("ctas_per_sm") or 1))
    by_cta: dict[int, list[Span]] = {}
    for s in tl.spans:
        by_cta.setdefault(s.cta // unit, []).append(s)

    per_cta = []
    for c in sorted(by_cta):
        spans = by_cta[c]
        t0 = min(s.start for s in spans)
        t1 = max(s.end for s in spans)
        mk = t1 - t0
        mma = merge_intervals((s.start, s.end) for s in spans if s.kind == "mma")
        busy_len = sum(b - a for a, b in mma)
        d = dict(cta=c, t0=t0, t1=t1, makespan_ns=mk, mma_ns=busy_len)
        if mma:
            first, last = mma[0][0], mma[-1][1]
            d.update(
                tensor_core_busy=busy_len / mk if mk > 0 else 0.0,
                tensor_core_busy_steady=busy_len / (last - first) if last > first else 0.0,
                fill_ns=first - t0,
                drain_ns=t1 - last,
            )
        else:
            d.update(tensor_core_busy=0.0, tensor_core_busy_steady=0.0, fill_ns=mk, drain_ns=0.0)
        per_cta.append(d)

    # stalls
    waits: dict[str, dict[str, list[tuple[float, float]]]] = {}
    for s in tl.spans:
        if s.kind == "wait":
            waits.setdefault(s.lane, {}).setdefault(s.barrier or "?", []).append((s.start, s.end))
    stall = {lane: {b: union_length(iv) for b, iv in sorted(bars.items())}
             for lane, bars in sorted(waits.items())}
    mma_by_cta = {c: merge_intervals((s.start, s.end) for s in by_cta[c] if s.kind == "mma")
                  for c in by_cta}
    exposed: dict[str, dict[str, float]] = {}
    for lane, bars in sorted(waits.items()):
        c = next(s.cta for s in tl.spans if s.lane == lane) // unit
        exposed[lane] = {}
        for b, iv in sorted(bars.items()):
            w = merge_intervals(iv)
            exposed[lane][b] = sum(b1 - a1 for a1, b1 in w) - _overlap(w, mma_by_cta.get(c, []))
    top = sorted(((lane, b, ns, exposed[lane][b]) for lane, bars in stall.items()
                  for b, ns in bars.items()), key=lambda x: -x[2])[:5]

    # ring occupancy
    occ: dict[str, dict] = {}
    ivs = [d for d in stage_intervals(tl) if d["state"] == "full"]
    cta_mk = {d["cta"]: d["makespan_ns"] for d in per_cta}
    for ring in sorted({d["ring"] for d in ivs}):
        per_stage_cta: dict[tuple[int, int], list] = {}
        for d in ivs:
            if d["ring"] == ring:
                per_stage_cta.setdefault((d["cta"], d["stage"]), []).append((d["t0"], d["t1"]))
        stages = sorted({s for _, s in per_stage_cta})
        ctas = sorted({c for c, _ in per_stage_cta})
        frac = {}
        for (c, st), iv in per_stage_cta.items():
            mk = cta_mk.get(c // unit, 0.0)
            frac[(c, st)] = union_length(iv) / mk if mk > 0 else 0.0
        per_stage = {st: _mean([frac.get((c, st), 0.0) for c in ctas]) for st in stages}
        mean = _mean([sum(frac.get((c, st), 0.0) for st in stages) for c in ctas])
        occ[ring] = {"mean": mean, "per_stage": per_stage, "stages": len(stages)}

    makespan = max(s.end for s in tl.spans) - min(s.start for s in tl.spans) if tl.spans else 0.0
    out = {
        "tensor_core_busy": _mean([d["tensor_core_busy"] for d in per_cta]),
        "tensor_core_busy_steady": _mean([d["tensor_core_busy_steady"] for d in per_cta]),
        "fill_ns": _mean([d["fill_ns"] for d in per_cta]),
        "drain_ns": _mean([d["drain_ns"] for d in per_cta]),
        "makespan_ns": makespan,
        "mma_ns": _mean([d["mma_ns"] for d in per_cta]),
        "stall_ns": stall,
        "exposed_stall_ns": exposed,
        "top_stalls": [list(x) for x in top],
        "ring_occupancy": occ,
        "per_cta": per_cta,
    }
    soft: dict[str, list[tuple[float, float]]] = {}
    for s in (s for s in tl.spans if s.kind == "softmax"):
        soft.setdefault(s.lane, []).append((s.start, s.end, cta_mk.get(s.cta // unit) or 1.0))
    if soft:
        out["softmax_busy"] = _mean([union_length(x[:2] for x in iv) / iv[0][2] for iv in soft.values()])
    return out


# ---------------------------------------------------------------------------
# events, for stepping through a timeline one event at a time
# ---------------------------------------------------------------------------

def _span_text(s: Span) -> str:
    bar = f"{s.barrier}[{s.stage}]" if s.barrier is not None and s.stage is not None else (s.barrier or "")
    if s.label:
        return s.label
    if s.kind == "wait":
        return f"wait {bar} parity {s.phase}"
    if s.kind == "load":
        return f"TMA load k={s.k} -> stage {s.stage}"
    if s.kind == "mma":
        return f"wgmma k={s.k} on stage {s.stage}"
    return s.kind


def timeline_events(tl: Timeline) -> list[dict]:
    """The timeline as a time-ordered list of discrete events, for stepping.

    Each span gives a ``begin`` event; spans with a duration also an ``end``
    event (a ``wait`` span's end is the moment the waiter is released; a
    zero-length wait is one event, "passes at once").  ``issue`` spans give
    one event.  Each event: ``{t, lane, span (index), what ("begin"|"end"|
    "pass"), text}``.  Ties are broken by (ends before begins, lane order).
    """
    lane_ix = {ln: i for i, ln in enumerate(tl.all_lanes())}
    ev = []
    for i, s in enumerate(tl.spans):
        txt = _span_text(s)
        if s.kind == "wait":
            if s.end <= s.start:
                ev.append((s.start, 1, lane_ix[s.lane], i, "pass", f"{txt}: passes at once"))
            else:
                ev.append((s.start, 1, lane_ix[s.lane], i, "begin", f"{txt}: blocks"))
                if "blocked forever" in txt:
                    ev.append((s.end, 0, lane_ix[s.lane], i, "end",
                               f"{txt.replace(' - blocked forever', '')}: never released (deadlock)"))
                else:
                    ev.append((s.end, 0, lane_ix[s.lane], i, "end", f"{txt}: released"))
        elif s.kind == "issue" or s.end <= s.start:
            ev.append((s.start, 1, lane_ix[s.lane], i, "begin", txt))
        else:
            ev.append((s.start, 1, lane_ix[s.lane], i, "begin", f"{txt} begins"))
            ev.append((s.end, 0, lane_ix[s.lane], i, "end", f"{txt} ends"))
    ev.sort(key=lambda e: (e[0], e[1], e[2], e[3]))
    return [dict(t=t, lane=tl.spans[i].lane, span=i, what=w, text=x) for t, _, _, i, w, x in ev]
