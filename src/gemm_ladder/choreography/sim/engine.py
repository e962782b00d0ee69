"""The discrete-event engine: roles are generators that yield commands (sleep, wait on a
barrier parity, run until a time); the engine keeps the clock, the barriers, the tensor
core and the TMA loads in flight, and stops at the first hazard it detects.

Hazards are found two ways. By timing: a phase completes while bytes for it are in flight,
a wgmma reads a stage whose loads have not landed, a load overwrites a stage a reader has
not released. And by happens-before (vector clocks carried through arrivals, TMA
completions and waits): a load into a stage that nothing orders after its previous readers'
release, or a CTA of a cluster that exits while nothing orders its peer's remote arrivals
and multicasts into it before the exit. The second kind does not depend on the model's
timings: a race the model's timing happens to win is still a race."""
from __future__ import annotations

import heapq
from typing import Callable, Iterator

from ..timeline import Handoff, Span, lane_cta, lane_name, lane_role
from .barriers import MBarrier, vc_merge
from .explain import explain_deadlock
from .params import SimParams


class Stop(Exception):
    """A hazard was detected: the simulation ends there."""


class Proc:
    def __init__(self, lane: str, gen: Iterator):
        self.lane = lane
        self.gen = gen
        self.done = False
        self.blocked: tuple | None = None   # (bar, parity, t_begin, label)


class Engine:
    MAX_EVENTS = 5_000_000

    def __init__(self, p: SimParams, what_if: str | None):
        self.p = p
        self.what_if = what_if
        self.now = 0.0
        self.heap: list = []
        self.seq = 0
        self.spans: list[Span] = []
        self.handoffs: list[Handoff] = []
        self.bars: dict[tuple[int, str, int], MBarrier] = {}
        self.arrivers: dict[tuple[int, str], list[str]] = {}
        self.per_phase: dict[tuple[int, str], int] = {}
        self.procs: list[Proc] = []
        self.tc_free: dict[int, float] = {}
        self.pipe_free: dict[int, float] = {}
        self.inflight: dict[int, dict] = {}
        self.load_seq = 0
        self.occupant: dict[tuple[int, int], dict] = {}
        self.last_wait: dict[str, MBarrier] = {}
        self.vc: dict[str, dict] = {}
        self.remote_ops: dict[int, list[dict]] = {}   # target CTA -> what other CTAs did to it
        self.exited: dict[int, tuple[float, dict]] = {}
        self.log: list[list] = []
        self.verdict = "ok"
        self.explanation = ""
        self.hazard_t: float | None = None

    # -- naming ---------------------------------------------------------------
    def lane(self, cta: int, role: str) -> str:
        """A role's lane; in a cluster the CTA's rank is its index (one cluster is modelled)."""
        return lane_name(cta, role, cta if self.p.cluster > 1 else None)

    def role(self, lane: str) -> str:
        c, r = lane_cta(lane), lane_role(lane)
        if r.startswith("consumer"):
            name = "consumer" if self.p.num_consumers == 1 else f"consumer {r[8:]}"
        else:
            name = {"writeback": "writeback warp", "tma": "TMA engine"}.get(r, r)
        if self.p.cluster > 1:
            return f"CTA{c}'s {name}"
        return f"the {name}"

    def cta_txt(self, cta: int) -> str:
        return f" (CTA{cta})" if self.p.cluster > 1 else ""

    # -- happens-before -------------------------------------------------------
    def tick(self, lane: str) -> dict:
        """Count an event of ``lane`` (an arrival, a load issue); returns its clock."""
        vc = self.vc.setdefault(lane, {})
        vc[lane] = vc.get(lane, 0) + 1
        return vc

    def _remote(self, target: int, lane: str, stamp: int, what: str) -> None:
        """``lane`` (of another CTA) acted on CTA ``target``'s shared memory or barriers."""
        if target in self.exited:
            t_exit = self.exited[target][0]
            self.hazard(f"early exit: CTA{target} exited at t={t_exit:.0f} ns, and at t={self.now:.0f} ns "
                        f"{self.role(lane)} {what} of CTA{target} - with no cluster barrier before exit "
                        f"nothing kept CTA{target} alive until its peer was done with it", "early_exit")
        self.remote_ops.setdefault(target, []).append(dict(lane=lane, stamp=stamp, t=self.now, what=what))

    def _cta_exit(self, cta: int) -> None:
        """Every role of ``cta`` has finished: its shared memory and barriers are gone."""
        vc: dict = {}
        for pr in self.procs:
            if lane_cta(pr.lane) == cta:
                vc_merge(vc, self.vc.get(pr.lane, {}))
        self.exited[cta] = (self.now, vc)
        unordered = [op for op in self.remote_ops.get(cta, []) if vc.get(op["lane"], 0) < op["stamp"]]
        if unordered:
            op = max(unordered, key=lambda o: o["t"])
            self.hazard(f"early exit: CTA{cta} exited at t={self.now:.0f} ns although nothing orders "
                        f"{self.role(op['lane'])}'s {op['what']} of CTA{cta} (t={op['t']:.0f} ns) before "
                        f"that exit - without a cluster barrier before exit a CTA may leave while its peer "
                        f"still arrives on its barriers, and only the model's timing made it arrive first",
                        "early_exit")

    # -- barriers -------------------------------------------------------------
    def make_bar(self, cta: int, name: str, stage: int, count: int, arrivers: list[str],
                 per_phase: int | None = None) -> MBarrier:
        """A barrier; ``arrivers`` are the lanes that arrive on it, ``per_phase`` how many
        arrivals they make per phase (default: ``count``, a correctly initialised barrier)."""
        b = MBarrier(name=name, stage=stage, cta=cta, count=count)
        self.bars[(cta, name, stage)] = b
        self.arrivers[(cta, name)] = arrivers
        self.per_phase[(cta, name)] = count if per_phase is None else per_phase
        self._log(b)
        return b

    def bar(self, cta: int, name: str, stage: int) -> MBarrier:
        return self.bars[(cta, name, stage)]

    def _log(self, b: MBarrier) -> None:
        self.log.append([self.now, b.cta, b.name, b.stage, b.phase, b.pending, b.tx])

    def arrive(self, b: MBarrier, lane: str, expect: int = 0, n: int = 1) -> None:
        """``n`` arrivals of ``lane`` (e.g. one per warp leader of a consumer warpgroup), each
        its own event: a phase that completes on some of them has not seen the rest."""
        if expect:
            b.expect_tx(expect)
        for _ in range(n):
            self._arrive_one(b, lane, self.tick(lane))

    def _arrive_one(self, b: MBarrier, lane: str, vc: dict) -> None:
        """One arrival of ``lane`` carrying its clock ``vc`` (taken when it was issued)."""
        if b.cta >= 0 and lane_cta(lane) != b.cta:
            self._remote(b.cta, lane, vc[lane], f"remote arrive on {b.ref}")
        if b.pending <= 0:
            self.hazard(
                f"early release: {self.role(lane)} arrived on {b.ref}"
                f"{self.cta_txt(b.cta)} when no arrival was pending in its phase {b.phase} "
                f"(init count {b.count}), so the barrier's arrival count no longer matches its arrivers")
        b.arrive(lane)
        vc_merge(b.phase_vc, vc)
        self._log(b)
        self._check(b)

    def complete_tx(self, b: MBarrier, nbytes: int, src: str, vc: dict) -> None:
        b.complete_tx(nbytes, src)
        vc_merge(b.phase_vc, vc)
        self._log(b)
        self._check(b)

    def _check(self, b: MBarrier) -> None:
        if not b.ready():
            return
        # early release: the phase completes while bytes for this barrier are in flight
        pending = [r for r in self.inflight.values() if any(x is b for x in r["bars"])]
        if pending:
            inflight_bytes = sum(r["bytes"] for r in pending)
            total = b.landed + inflight_bytes
            readers = [w[0].lane for w in b.waiters]
            who = (" and ".join(self.role(ln) for ln in readers)) if readers else "a consumer"
            peer = [r for r in pending if r["src"] != b.cta]
            whose = (f" (the last to land is CTA{peer[0]['src']}'s multicast half)" if peer else "")
            self.hazard(
                f"early release: {b.ref}{self.cta_txt(b.cta)} completed its phase {b.phase} at "
                f"t={self.now:.0f} ns while {inflight_bytes} B of TMA loads into stage {b.stage} were "
                f"still in flight{whose} - expect_tx announced {b.expected} B but the stage's loads "
                f"deliver {total} B, so {who} would read stage {b.stage} before its data has landed")
        b.flip()
        self._log(b)
        still = []
        for w in b.waiters:
            proc, parity, t0, label = w
            if b.try_wait(parity):
                t_rel = self.now + self.p.wake_ns
                self.spans.append(Span(proc.lane, "wait", t0, t_rel, stage=b.stage, phase=parity,
                                       barrier=b.name, cta=lane_cta(proc.lane), label=label))
                self.handoffs.append(Handoff(b.name, b.stage, parity, b.last_src or "?", proc.lane,
                                             self.now, t_rel, cta=b.cta))
                proc.blocked = None
                self._passed(proc.lane, b)
                self.schedule(t_rel, lambda pr=proc: self.step(pr))
            else:
                still.append(w)
        b.waiters = still

    def _passed(self, lane: str, b: MBarrier) -> None:
        """A wait on ``b`` returned: the waiter has seen everything its completed phase saw."""
        self.last_wait[lane] = b
        vc_merge(self.vc.setdefault(lane, {}), b.done_vc)

    # -- scheduling -----------------------------------------------------------
    def schedule(self, t: float, fn: Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, fn))

    def hazard(self, text: str, verdict: str = "early_release") -> None:
        if self.verdict == "ok":
            self.verdict = verdict
            self.explanation = text
            self.hazard_t = self.now
        raise Stop()

    def spawn(self, lane: str, gen: Iterator) -> None:
        pr = Proc(lane, gen)
        self.procs.append(pr)
        self.schedule(0.0, lambda: self.step(pr))

    def step(self, pr: Proc) -> None:
        """Run a process until it blocks or finishes."""
        while True:
            try:
                cmd = next(pr.gen)
            except StopIteration:
                pr.done = True
                cta = lane_cta(pr.lane)
                if all(q.done for q in self.procs if lane_cta(q.lane) == cta):
                    self._cta_exit(cta)
                return
            op = cmd[0]
            if op == "sleep":
                self.schedule(self.now + cmd[1], lambda: self.step(pr))
                return
            if op == "until":
                if cmd[1] > self.now:
                    self.schedule(cmd[1], lambda: self.step(pr))
                    return
                continue
            if op == "park":   # resumed by a shared resource of the model (attention's CUDA cores)
                return
            if op == "wait":
                _, b, parity, label = cmd
                if b.try_wait(parity):
                    self.spans.append(Span(pr.lane, "wait", self.now, self.now, stage=b.stage,
                                           phase=parity, barrier=b.name, cta=lane_cta(pr.lane),
                                           label=label))
                    self._passed(pr.lane, b)
                    continue
                pr.blocked = (b, parity, self.now, label)
                b.waiters.append((pr, parity, self.now, label))
                return
            raise RuntimeError(f"unknown command {cmd!r}")

    def run(self) -> None:
        n = 0
        try:
            while self.heap:
                t, _, fn = heapq.heappop(self.heap)
                self.now = t
                fn()
                n += 1
                if n > self.MAX_EVENTS:
                    raise RuntimeError("simulation exceeded its event budget (a model bug)")
        except Stop:
            return
        live = [pr for pr in self.procs if not pr.done]
        if live:
            self.verdict = "deadlock"
            self.explanation = explain_deadlock(self, live)

    # -- resources ------------------------------------------------------------
    def wgmma(self, cta: int, lane: str, stage: int, tile: int, k: int, label: str) -> float:
        """Queue one k-tile of wgmma on the SM's tensor core; returns its end time."""
        occ = self.occupant.get((cta, stage))
        if occ is None or occ["key"] != (tile, k) or occ["loads_left"] > 0:
            missing = occ["loads_left"] if occ is not None and occ["key"] == (tile, k) else "all"
            waited = self.last_wait.get(lane)
            via = f" after {waited.ref} released it" if waited is not None else ""
            self.hazard(
                f"early release: {self.role(lane)} started the wgmma of k-tile {k} on stage {stage}"
                f"{self.cta_txt(cta)}{via} at t={self.now:.0f} ns while {missing} of that stage's "
                f"TMA loads had not landed, so it would multiply incomplete data")
        start = max(self.now, self.tc_free.get(cta, 0.0))
        end = start + self.p.mma_time
        self.tc_free[cta] = end
        self.spans.append(Span(lane, "mma", start, end, stage=stage, tile=tile, k=k, cta=cta,
                               label=label))
        return end

    def release(self, cta: int, stage: int, lane: str, targets: list[int], n: int) -> None:
        """``lane`` has finished reading stage ``stage`` of its CTA (its wgmma retired) and
        says so with ``n`` arrivals on the empty barrier of each CTA in ``targets`` (none for
        a lockstep team, which refills the stage itself). What a refill must come after, per
        CTA whose producer may refill: the last of those arrivals on that CTA's barrier."""
        occ = self.occupant.get((cta, stage))
        stamps: dict[int, int] = {}
        if occ is not None and lane in occ["readers"]:
            occ["readers"].remove(lane)
            occ["released"][lane] = stamps
        if not targets:
            stamps[cta] = self.tick(lane)[lane]
        delay = self.p.cluster_release_ns if self.p.cluster > 1 else 0.0
        for c in targets:
            if delay <= 0:
                self.arrive(self.bar(c, "mma2tma", stage), lane, n=n)
                stamps[c] = self.vc[lane][lane]
                continue
            # through the cluster (mapa + arrive.release.cluster, the peer's barrier and its
            # own): the arrivals land `delay` later, ordered by the clock they were issued with
            clocks = [dict(self.tick(lane)) for _ in range(n)]
            stamps[c] = clocks[-1][lane]
            b = self.bar(c, "mma2tma", stage)
            self.schedule(self.now + delay, lambda b=b, clocks=clocks: [self._arrive_one(b, lane, v) for v in clocks])

    def _refill_hazard(self, issuer: str, d: int, stage: int, k: int, occ: dict) -> None:
        """A load into stage ``stage`` of CTA ``d`` while its previous contents are still
        being read, or with nothing ordering it after their readers' release."""
        waited = self.last_wait.get(issuer)
        why, via = "", ""
        if waited is not None and waited.name == "mma2tma":
            via = f" by {waited.ref}{self.cta_txt(waited.cta)}"
            per_phase = self.per_phase.get((waited.cta, waited.name), waited.count)
            if waited.count != per_phase:
                arr = dict.fromkeys(self.arrivers.get((waited.cta, waited.name), []))
                why = (f" - {waited.ref} was initialised with count {waited.count} but "
                       f"{per_phase} consumer arrivals come per phase "
                       f"({', '.join(self.role(a) for a in arr)}), so it completed early")
        busy = list(occ["readers"])
        if busy:
            names = " and ".join(self.role(r) for r in busy)
            self.hazard(
                f"early release: {self.role(issuer)} was released{via} and issued a TMA load "
                f"(k-tile {k}) into stage {stage}{self.cta_txt(d)} at t={self.now:.0f} ns "
                f"while {names} had not finished the wgmma on its previous contents "
                f"(k-tile {occ['key'][1]}){why}")
        vc = self.vc.get(issuer, {})
        src = lane_cta(issuer)
        for r, stamps in occ["released"].items():
            # the release that reached the issuer's empty barrier, or (if none did) any of them
            stamp = stamps.get(src, max(stamps.values(), default=0))
            if vc.get(r, 0) < stamp:
                self.hazard(
                    f"early release: {self.role(issuer)} was released{via} and issued a TMA load "
                    f"(k-tile {k}) into stage {stage}{self.cta_txt(d)} at t={self.now:.0f} ns although "
                    f"nothing orders it after {self.role(r)} released that stage's previous contents "
                    f"(k-tile {occ['key'][1]}): the phase that released {self.role(issuer)} did not "
                    f"include {self.role(r)}'s arrival, so only the model's timing kept the load from "
                    f"overwriting data still being read{why}")

    def tma_load(self, src: int, dests: list[int], stage: int, tile: int, k: int, nbytes: int,
                 what: str) -> float:
        """Issue a TMA load of ``nbytes`` from CTA ``src`` into ``stage`` of every CTA in
        ``dests`` (multicast when more than one); returns its landing time."""
        issuer = self.lane(src, "team" if self.p.lockstep else "producer")
        for d in dests:
            # every load into the stage (not only the first of the new contents: the peer's
            # may come first) must follow the release of the previous contents
            occ = self.occupant.get((d, stage))
            previous = occ if occ is not None and occ["key"] != (tile, k) else (occ or {}).get("prev")
            if previous is not None:
                self._refill_hazard(issuer, d, stage, k, previous)
        for d in dests:
            occ = self.occupant.get((d, stage))
            if occ is None or occ["key"] != (tile, k):
                readers = ([self.lane(d, "team")] if self.p.lockstep else
                           [self.lane(d, f"consumer{i}") for i in self.readers_of(tile)])
                if occ is not None:
                    occ.pop("prev", None)
                occ = dict(key=(tile, k), loads_left=0, readers=readers, released={}, prev=occ)
                self.occupant[(d, stage)] = occ
            occ["loads_left"] += 1
        if self.p.l2_bytes_per_ns:
            xfer = nbytes / self.p.l2_bytes_per_ns
            s0 = max(self.now, self.pipe_free.get(src, 0.0))
            self.pipe_free[src] = s0 + xfer
            land = s0 + xfer + self.p.load_latency(tile, k)
        else:
            land = self.now + self.p.load_latency(tile, k)
        vc = dict(self.tick(issuer))
        bars = [self.bar(d, "tma2mma", stage) for d in dests]
        self.load_seq += 1
        self.inflight[self.load_seq] = dict(bars=bars, bytes=nbytes, dests=dests, stage=stage, src=src)
        for d in dests:
            mc = ""
            if len(dests) > 1:
                mc = f" (multicast from cta{src})" if d != src else " (multicast to all)"
            self.spans.append(Span(self.lane(d, "tma"), "load", self.now, land, stage=stage, tile=tile,
                                   k=k, cta=d, barrier="tma2mma",
                                   label=f"TMA {what} k={k} -> stage {stage}{mc}, {nbytes} B"))

        def _land(lid=self.load_seq) -> None:
            r = self.inflight.pop(lid)
            for d, b in zip(r["dests"], r["bars"]):
                o = self.occupant.get((d, r["stage"]))
                if o is not None:
                    o["loads_left"] -= 1
                if d != src:
                    self._remote(d, issuer, vc[issuer], f"multicast into stage {r['stage']}")
                self.complete_tx(b, r["bytes"], self.lane(src, "tma"), vc)
        self.schedule(land, _land)
        return land

    def readers_of(self, tile: int) -> list[int]:
        """The consumers that read a stage of ``tile``: all, or the one whose turn it is."""
        n = self.p.num_consumers
        return [tile % n] if self.p.pingpong else list(range(n))
