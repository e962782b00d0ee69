"""The discrete-event engine: roles are generators that yield commands (sleep, wait on a
barrier parity, run until a time); the engine keeps the clock, the barriers, the tensor
core and the TMA loads in flight, and stops at the first early release it detects."""
from __future__ import annotations

import heapq
from typing import Callable, Iterator

from ..timeline import Handoff, Span, lane_cta, lane_role
from .barriers import MBarrier
from .explain import explain_deadlock
from .params import SimParams


class Stop(Exception):
    """An early release was detected: the simulation ends there."""


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
        self.procs: list[Proc] = []
        self.tc_free: dict[int, float] = {}
        self.pipe_free: dict[int, float] = {}
        self.inflight: dict[int, dict] = {}
        self.load_seq = 0
        self.occupant: dict[tuple[int, int], dict] = {}
        self.last_wait: dict[str, MBarrier] = {}
        self.log: list[list] = []
        self.verdict = "ok"
        self.explanation = ""
        self.hazard_t: float | None = None

    # -- naming ---------------------------------------------------------------
    def role(self, lane: str) -> str:
        c, r = lane_cta(lane), lane_role(lane)
        if r.startswith("consumer"):
            name = "consumer" if self.p.num_consumers == 1 else f"consumer {r[8:]}"
        else:
            name = {"writeback": "writeback warp", "tma": "TMA engine"}.get(r, r)
        if self.p.cluster > 1:
            return f"CTA{c}'s {name}"
        return f"the {name}"

    # -- barriers -------------------------------------------------------------
    def make_bar(self, cta: int, name: str, stage: int, count: int, arrivers: list[str]) -> MBarrier:
        b = MBarrier(name=name, stage=stage, cta=cta, count=count)
        self.bars[(cta, name, stage)] = b
        self.arrivers[(cta, name)] = arrivers
        self._log(b)
        return b

    def bar(self, cta: int, name: str, stage: int) -> MBarrier:
        return self.bars[(cta, name, stage)]

    def _log(self, b: MBarrier) -> None:
        self.log.append([self.now, b.cta, b.name, b.stage, b.phase, b.pending, b.tx])

    def arrive(self, b: MBarrier, lane: str, expect: int = 0) -> None:
        if expect:
            b.expect_tx(expect)
        if b.pending <= 0:
            self.hazard(
                f"early release: {self.role(lane)} arrived on {b.ref}"
                f"{self.cta_txt(b.cta)} when no arrival was pending in its phase {b.phase} "
                f"(init count {b.count}), so the barrier's arrival count no longer matches its arrivers")
        b.arrive(lane)
        self._log(b)
        self._check(b)

    def complete_tx(self, b: MBarrier, nbytes: int, src: str) -> None:
        b.complete_tx(nbytes, src)
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
            who = (" and ".join(self.role(l) for l in readers)) if readers else "a consumer"
            self.hazard(
                f"early release: {b.ref}{self.cta_txt(b.cta)} completed its phase {b.phase} at "
                f"t={self.now:.0f} ns while {inflight_bytes} B of TMA loads into stage {b.stage} were "
                f"still in flight - expect_tx announced {b.expected} B but the stage's loads deliver "
                f"{total} B, so {who} would read stage {b.stage} before its data has landed")
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
                self.last_wait[proc.lane] = b
                self.schedule(t_rel, lambda pr=proc: self.step(pr))
            else:
                still.append(w)
        b.waiters = still

    def cta_txt(self, cta: int) -> str:
        return f" (CTA{cta})" if self.p.cluster > 1 else ""

    # -- scheduling -----------------------------------------------------------
    def schedule(self, t: float, fn: Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (t, self.seq, fn))

    def hazard(self, text: str) -> None:
        if self.verdict == "ok":
            self.verdict = "early_release"
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
            if op == "wait":
                _, b, parity, label = cmd
                if b.try_wait(parity):
                    self.spans.append(Span(pr.lane, "wait", self.now, self.now, stage=b.stage,
                                           phase=parity, barrier=b.name, cta=lane_cta(pr.lane),
                                           label=label))
                    self.last_wait[pr.lane] = b
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

        def _done(key=(cta, stage)) -> None:
            o = self.occupant.get(key)
            if o is not None:
                o["readers_left"] -= 1
                if lane in o["readers"]:
                    o["readers"].remove(lane)
        self.schedule(end, _done)
        return end

    def tma_load(self, src: int, dests: list[int], stage: int, tile: int, k: int, nbytes: int,
                 what: str, readers: int) -> float:
        """Issue a TMA load of ``nbytes`` from CTA ``src`` into ``stage`` of every CTA in
        ``dests`` (multicast when more than one); returns its landing time."""
        issuer = f"cta{src}/producer" if not self.p.lockstep else f"cta{src}/team"
        for d in dests:
            occ = self.occupant.get((d, stage))
            if occ is not None and occ["key"] != (tile, k) and occ["readers_left"] > 0:
                waited = self.last_wait.get(issuer)
                if waited is not None and waited.name == "mma2tma":
                    arr = self.arrivers.get((waited.cta, waited.name), [])
                    why = (f" - {waited.ref} was initialised with count {waited.count} but "
                           f"{len(arr)} consumer arrivals come per phase "
                           f"({', '.join(self.role(a) for a in arr)}), so it completed early")
                    via = f" by {waited.ref}"
                else:
                    why, via = "", ""
                names = " and ".join(self.role(r) for r in occ["readers"]) or "a reader"
                self.hazard(
                    f"early release: {self.role(issuer)} was released{via} and issued a TMA load "
                    f"(k-tile {k}) into stage {stage}{self.cta_txt(d)} at t={self.now:.0f} ns "
                    f"while {names} had not finished the wgmma on its previous contents "
                    f"(k-tile {occ['key'][1]}){why}")
        for d in dests:
            occ = self.occupant.get((d, stage))
            if occ is None or occ["key"] != (tile, k):
                rl = ([f"cta{d}/team"] if self.p.lockstep else
                      [f"cta{d}/consumer{i}" for i in range(self.p.num_consumers)])
                occ = dict(key=(tile, k), loads_left=0, readers_left=readers, readers=rl)
                self.occupant[(d, stage)] = occ
            occ["loads_left"] += 1
        if self.p.l2_bytes_per_ns:
            xfer = nbytes / self.p.l2_bytes_per_ns
            s0 = max(self.now, self.pipe_free.get(src, 0.0))
            self.pipe_free[src] = s0 + xfer
            land = s0 + xfer + self.p.load_latency_ns
        else:
            land = self.now + self.p.load_latency_ns
        bars = [self.bar(d, "tma2mma", stage) for d in dests]
        self.load_seq += 1
        rec = dict(bars=bars, bytes=nbytes, dests=dests, stage=stage)
        self.inflight[self.load_seq] = rec
        for d in dests:
            mc = ""
            if len(dests) > 1:
                mc = f" (multicast from cta{src})" if d != src else " (multicast to all)"
            self.spans.append(Span(f"cta{d}/tma", "load", self.now, land, stage=stage, tile=tile,
                                   k=k, cta=d, barrier="tma2mma",
                                   label=f"TMA {what} k={k} -> stage {stage}{mc}, {nbytes} B"))

        def _land(lid=self.load_seq) -> None:
            r = self.inflight.pop(lid)
            for d, b in zip(r["dests"], r["bars"]):
                o = self.occupant.get((d, r["stage"]))
                if o is not None:
                    o["loads_left"] -= 1
                self.complete_tx(b, r["bytes"], f"cta{src}/tma")
        self.schedule(land, _land)
        return land
