"""Running the model: build the barriers and roles of a step, run them, and return the
timeline, its KPIs and the verdict."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ...families.ladder_step import Step
from ..timeline import Span, Timeline, kpis, lane_cta
from ..whatifs import get_what_if
from .engine import Engine
from .params import SimParams, depth_needed, params_for_step, simulated_steps
from .roles import CLUSTER_WIDE, consumer, lockstep_team, producer, writeback


@dataclass
class SimResult:
    """A simulation's outcome: the timeline, its KPIs, and the verdict.

    ``verdict`` is ``"ok"``, ``"deadlock"`` (no event can make progress while
    a role still waits) or ``"early_release"`` (a barrier released a role
    before the data/buffer it guards was ready; the simulation stops there).
    ``explanation`` is one sentence ("" for a plain ok run).
    """

    timeline: Timeline
    kpis: dict
    verdict: str
    explanation: str
    params: SimParams
    what_if: str | None = None

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"


def _lanes(e: Engine) -> list[str]:
    p = e.p
    if p.lockstep:
        return [e.lane(0, "team"), e.lane(0, "tma")]
    out = []
    for c in range(p.cluster):
        out.append(e.lane(c, "producer"))
        out += [e.lane(c, f"consumer{i}") for i in range(p.num_consumers)]
        out += [e.lane(c, "writeback"), e.lane(c, "tma")]
    return out


def _check_what_if(p: SimParams, what_if: str | None) -> None:
    if what_if is None:
        return
    w = get_what_if(what_if)
    if w.needs == "pair" and p.lockstep:
        ws = ", ".join(st.key for st in simulated_steps() if st.style == "warp-specialized")
        raise ValueError(f"{what_if} needs a producer and a consumer: use a warp-specialized step ({ws})")
    if w.needs == "shared-empty" and (p.lockstep or p.cluster * p.consumers_per_stage < 2):
        shared = ", ".join(st.key for st in simulated_steps() if st.cluster_m * st.consumers > 1
                           and not st.pingpong)
        raise ValueError(f"{what_if} needs an empty barrier that more than one consumer arrives on: "
                         f"use step {shared}")
    if w.needs == "cluster" and p.cluster < 2:
        clusters = ", ".join(st.key for st in simulated_steps() if st.cluster_m > 1)
        raise ValueError(f"{what_if} needs a 2-CTA cluster: use step {clusters}")
    if w.needs == "borrow" and (p.lent_chunks < 2 or p.num_consumers < 2):
        raise ValueError(f"{what_if} needs two consumers staging into a borrowed stage's B part (step 9, "
                         f"K of at least {p.depth} k-tiles)")


def _make_barriers(e: Engine, what_if: str | None) -> None:
    """The warp-specialized kernels' barriers, with their init counts and arrivers (the
    what-ifs that break a count or a cluster rule change them here)."""
    p = e.p
    D = p.depth
    consumers = lambda c: [e.lane(c, f"consumer{i}") for i in range(p.num_consumers)]  # noqa: E731
    everyone = [ln for c in range(p.cluster) for ln in consumers(c)]
    empty = p.empty_count
    for c in range(p.cluster):
        arrivers, count = everyone, empty
        if what_if == "init-count-high":
            count = empty + 1
        elif what_if == "init-count-low":
            count = empty - 1
        elif what_if == "local-empty":         # counts and hears only this CTA's consumers
            arrivers, count = consumers(c), empty // p.cluster
        for s in range(D):
            e.make_bar(c, "tma2mma", s, 1, [e.lane(c, "producer")])
            e.make_bar(c, "mma2tma", s, count, arrivers, per_phase=len(arrivers) * empty // len(everyone))
        for a in range(p.staging_stages):
            writers = consumers(c) if p.shared_staging else [e.lane(c, f"consumer{a % p.num_consumers}")]
            e.make_bar(c, "mma2ld", a, len(writers) if p.shared_staging else 1, writers)
            e.make_bar(c, "ld2mma", a, 1, [e.lane(c, "writeback")])
        for j in range(p.lent_chunks):  # borrowed stage: chunk j staged there (one arrival per consumer)
            e.make_bar(c, "lent_full", j, p.num_consumers, consumers(c))
        if p.pingpong:
            for w in range(p.num_consumers):
                other = e.lane(c, f"consumer{(w + p.num_consumers - 1) % p.num_consumers}")
                e.make_bar(c, "turn", w, p.warps_per_consumer, [other])
    if p.cluster > 1 and what_if != "no-exit-sync":
        roles = [e.lane(c, r) for c in range(p.cluster)
                 for r in ["producer", *(f"consumer{i}" for i in range(p.num_consumers)), "writeback"]]
        e.make_bar(CLUSTER_WIDE, "cluster_sync", 0, len(roles), roles)


def simulate(params: SimParams | int | str | Step, what_if: str | None = None, title: str | None = None,
             **overrides: Any) -> SimResult:
    """Run the model once.  Never hangs; deadlocks and early releases are returned
    as a verdict with a one-sentence explanation (see :class:`SimResult`).

    ``params`` is a :class:`SimParams`, or a step (key or Step) whose model
    (:func:`params_for_step`) is used; ``overrides`` (e.g. ``depth=2``,
    ``k_tiles=16``; None values ignored) replace fields of either.

    Raises ValueError only for invalid parameters or a what-if that does not
    apply to the step (e.g. ``init-count-low`` on a step with one arrival)."""
    if isinstance(params, SimParams):
        ov = {k: v for k, v in overrides.items() if v is not None}
        p = dataclasses.replace(params, **ov) if ov else params
    else:
        p = params_for_step(params, **overrides)
    if what_if == "depth-1":
        p = dataclasses.replace(p, depth=1)
    _check_what_if(p, what_if)
    e = Engine(p, what_if)
    D = p.depth
    if p.lockstep:
        init_full = 2 if what_if == "init-count-high" else 1
        for s in range(D):
            e.make_bar(0, "tma2mma", s, init_full, [e.lane(0, "team")], per_phase=1)
        e.spawn(e.lane(0, "team"), lockstep_team(e, 0))
    else:
        _make_barriers(e, what_if)
        for c in range(p.cluster):
            e.spawn(e.lane(c, "producer"), producer(e, c))
            for i in range(p.num_consumers):
                e.spawn(e.lane(c, f"consumer{i}"), consumer(e, c, i))
            e.spawn(e.lane(c, "writeback"), writeback(e, c))
    e.run()
    if e.verdict == "early_release":
        # close the waits that were open when the simulation stopped
        for pr in e.procs:
            if pr.blocked is not None:
                b, parity, t0, label = pr.blocked
                e.spans.append(Span(pr.lane, "wait", t0, e.now, stage=b.stage, phase=parity,
                                    barrier=b.name, cta=lane_cta(pr.lane),
                                    label=f"{label} (simulation stopped)"))
    e.spans.sort(key=lambda s: (s.start, s.end, s.lane))

    style = "lockstep" if p.lockstep else "warp-specialized"
    if title is None:
        title = f"{p.title}, depth {p.depth}"
        if what_if:
            title += f" - what-if {what_if}"
    barriers = sorted({(name, b.count, len(set(e.arrivers.get((b.cta, name), []))),
                        e.per_phase.get((b.cta, name), b.count))
                       for (c, name, s), b in e.bars.items()})
    meta = dict(
        key=p.key,
        model_only=p.model_only,
        style=style,
        depth=p.depth,
        k_tiles=p.k_tiles,
        tiles_per_cta=p.tiles_per_cta,
        tile=[p.cta_m, p.tile_n, p.tile_k],
        num_ctas=p.cluster,
        cluster=p.cluster,
        num_consumers=p.num_consumers,
        pingpong=p.pingpong,
        params=p.to_dict(),
        what_if=what_if,
        what_if_text=get_what_if(what_if).text if what_if else "",
        why=get_what_if(what_if).why if what_if else "",
        verdict=e.verdict,
        explanation=e.explanation,
        hazard_t=e.hazard_t,
        depth_needed=depth_needed(p),
        barriers=[dict(name=n, count=c, arrivers=a, arrivals_per_phase=pp) for n, c, a, pp in barriers],
        barrier_log=e.log,
    )
    tl = Timeline(source="sim", step=p.step, title=title, lanes=_lanes(e), spans=e.spans,
                  handoffs=sorted(e.handoffs, key=lambda h: (h.t_release, h.dst_lane)), meta=meta)
    k = kpis(tl)
    return SimResult(timeline=tl, kpis=k, verdict=e.verdict, explanation=e.explanation, params=p,
                     what_if=what_if)


def simulate_step(step: int | str | Step, **overrides: Any) -> SimResult:
    """``simulate(params_for_step(step, **overrides))``."""
    return simulate(params_for_step(step, **overrides))


def run_what_if(name: str, step: int | str | Step | None = None, **overrides: Any) -> SimResult:
    """Run one of the course's exercises (:data:`WHAT_IFS`) on ``step`` (default:
    the what-if's natural step, 7, or 8 for init-count-low).

    For ``depth-1`` (which does not deadlock) the verdict is "ok" and the
    explanation compares the busy fraction with the step's own depth."""
    step = step if step is not None else get_what_if(name).default_step
    p = params_for_step(step, **overrides)
    res = simulate(p, what_if=name)
    if name == "depth-1" and res.verdict == "ok":
        base_depth = p.depth if p.depth > 1 else params_for_step(step).depth
        if base_depth <= 1:
            base_depth = 2
        base = simulate(dataclasses.replace(p, depth=base_depth))
        res.explanation = (
            f"depth 1: a single stage cannot overlap the load of k-tile k+1 with the wgmma of k-tile k, "
            f"so the tensor core is busy {res.kpis['tensor_core_busy']:.0%} of the time "
            f"(steady {res.kpis['tensor_core_busy_steady']:.0%}) against "
            f"{base.kpis['tensor_core_busy']:.0%} at depth {base_depth}")
        res.timeline.meta["explanation"] = res.explanation
    return res
