"""Why a simulation deadlocked, in one sentence: follow who waits on which barrier and who
could still arrive on it, to a cycle, a tx-count no load in flight can pay, or an arrival
count no remaining arriver can meet."""
from __future__ import annotations

from typing import Any

from ..timeline import Span, lane_cta, lane_role
from .barriers import MBarrier

# The engine (engine.py) calls explain_deadlock with itself and its live processes; this module
# reads them without importing the engine, which imports it.
Engine = Proc = Any


def _waits_txt(e: Engine, lane: str, b: MBarrier, parity: int) -> str:
    return f"{e.role(lane)} waits on {b.ref}{e.cta_txt(b.cta)} for parity {parity}"


def _phase_txt(b: MBarrier) -> str:
    return f"phase {b.phase}" + (f" (parity {b.phase & 1})" if b.phase > 1 else "")


def _arrivers(e: Engine, b: MBarrier) -> list[str]:
    """Who arrives on ``b``: per stage where the model says (a ping-pong's turn[c]), else per barrier."""
    return e.arrivers.get((b.cta, b.name, b.stage)) or e.arrivers.get((b.cta, b.name), [])


def _stuck_reason(e: Engine, b: MBarrier, live: dict[str, Proc]) -> tuple[str, Any]:
    """Why can't ``b``'s current phase complete?  ('tx'|'count'|'chain'|'other', detail)."""
    inflight = any(any(x is b for x in r["bars"]) for r in e.inflight.values())
    arr = _arrivers(e, b)
    if b.pending <= 0 and b.tx > 0 and not inflight:
        return "tx", None
    if b.pending > 0:
        if len(b.arrived) >= e.per_phase.get((b.cta, b.name), b.count):
            return "count", None                  # every arrival a phase gets has come
        remaining = [a for a in arr if a not in b.arrived]
        waiting = [a for a in remaining if a in live and live[a].blocked is not None]
        if not remaining or all(a not in live for a in remaining):
            return "count", None
        if waiting:
            return "chain", waiting
    return "other", None


def explain_deadlock(e: Engine, live_procs: list[Proc]) -> str:
    live = {pr.lane: pr for pr in live_procs}
    blocked = [pr for pr in live_procs if pr.blocked is not None]
    if not blocked:
        return "deadlock: roles are left unfinished but none is waiting on a barrier (a model bug)"
    # close the open waits so the view shows them
    t_end = e.now + max(e.p.load_latency_ns, 200.0)
    for pr in blocked:
        b, parity, t0, label = pr.blocked
        e.spans.append(Span(pr.lane, "wait", t0, t_end, stage=b.stage, phase=parity,
                            barrier=b.name, cta=lane_cta(pr.lane), label=f"{label} - blocked forever"))
    reasons = {pr.lane: _stuck_reason(e, pr.blocked[0], live) for pr in blocked}
    # start from a root cause (tx / count); else from the producer (or earliest waiter)
    roots = [pr for pr in blocked if reasons[pr.lane][0] in ("tx", "count")]
    roots.sort(key=lambda pr: (pr.blocked[2], pr.lane))
    if roots:
        pr = roots[0]
        b, parity = pr.blocked[0], pr.blocked[1]
        head = f"deadlock: {_waits_txt(e, pr.lane, b, parity)}, but "
        kind = reasons[pr.lane][0]
        if kind == "tx":
            landed = b.landed
            return (head + f"that barrier's {_phase_txt(b)} still expects {b.tx} more "
                    f"transaction bytes and no TMA load to it is in flight - expect_tx announced "
                    f"{b.expected} B while the stage's loads delivered {landed} B, so the phase "
                    f"can never complete")
        arr = list(dict.fromkeys(_arrivers(e, b)))
        per_phase = e.per_phase.get((b.cta, b.name), len(arr))
        warps = e.p.warps_per_consumer if b.name in ("mma2tma", "turn") else 1
        names = ", ".join(e.role(a) for a in arr) or "none"
        if per_phase < warps * len(arr):      # ping-pong: one consumer per stage
            names = f"{warps} warps of the consumer whose tile it is: {names}"
        elif warps > 1:
            names = f"{warps} warps each of " + names if len(arr) > 1 else f"{warps} warps of " + names
        more = _plural(b.pending, "more arrival")
        come = _plural(per_phase, "arrival")
        return (head + f"that barrier still needs {more} in its {_phase_txt(b)}: it was "
                f"initialised with count {b.count} while only {come} per phase "
                f"{'comes' if per_phase == 1 else 'come'} ({names}) and "
                f"{'it has' if len(arr) == 1 else 'they have all'} arrived, so the phase can "
                f"never complete")
    first = getattr(e, "deadlock_start", ("producer", "team"))  # the role to follow the waits from
    blocked.sort(key=lambda pr: (0 if lane_role(pr.lane) in first else 1, pr.blocked[2], pr.lane))
    start = blocked[0]
    chain = [start]
    seen = {start.lane}
    parts = []
    cur = start
    while True:
        b, parity = cur.blocked[0], cur.blocked[1]
        kind, detail = reasons[cur.lane]
        if kind != "chain":
            break
        nxt = live[detail[0]]
        only = "only arriver" if len(_arrivers(e, b)) == 1 else "arriver"
        parts.append((cur, b, parity, only, nxt))
        if nxt.lane in seen or nxt.blocked is None:
            chain.append(nxt)
            break
        seen.add(nxt.lane)
        chain.append(nxt)
        cur = nxt
    b, parity = start.blocked[0], start.blocked[1]
    if not parts:
        return (f"deadlock: {_waits_txt(e, start.lane, b, parity)}, but that barrier is still "
                f"in {_phase_txt(b)} and nothing left can complete it")
    txt = f"deadlock: {_waits_txt(e, start.lane, b, parity)}, but that barrier is still in {_phase_txt(b)}"
    for i, (_, _, _, only, nxt) in enumerate(parts):
        nb, npar = nxt.blocked[0], nxt.blocked[1]
        if i == 0:
            txt += f" and its {only}, {e.role(nxt.lane)}, is itself waiting on {nb.ref}{e.cta_txt(nb.cta)} for parity {npar}"
        elif nxt.lane != start.lane:
            txt += f", whose {only} {e.role(nxt.lane)} waits on {nb.ref}{e.cta_txt(nb.cta)} for parity {npar}"
    last = chain[-1]
    if last.lane in {c.lane for c in chain[:-1]}:
        hint = getattr(e, "deadlock_hint", "") or {"both-phase-0": "both PipelineStates started at phase 0"}.get(
            e.what_if or "", "the waits form a cycle")
        txt += (f" - {hint}, so neither side is ever released" if len(parts) <= 2 else
                f" - {hint} back to {e.role(last.lane)}, so none of them is ever released")
    else:
        txt += ", which can never complete"
    return txt


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")
