"""A discrete-event simulator of the GEMM ladder's mbarrier pipelines (steps 4-9).

Pure standard-library Python: importing it imports neither torch nor CUDA.

What is modelled
----------------
* **mbarrier** (:class:`MBarrier`) with the hardware's semantics: an init
  (expected arrival) count, a pending arrival count, a signed transaction-byte
  count (``expect_tx`` adds, a TMA completion subtracts) and a current phase.
  The phase completes (flips) when the pending count reaches 0 *and* the
  tx-count is 0; the pending count is then re-armed to the init count.
  ``try_wait.parity(p)`` succeeds when the phase with parity ``p`` has
  completed, i.e. when the barrier's current phase parity is not ``p``: a fresh
  barrier (phase 0) lets a wait for parity 1 pass at once and blocks a wait for
  parity 0.
* **PipelineState** ``{stage, phase}`` with ``advance()`` (stage + 1, phase flips on
  wrap).  The producer of a ring starts at phase 1, its consumer at phase 0.
* **TMA loads**: a load issued at ``t`` lands at ``t + load_latency_ns`` (plus,
  when ``l2_bytes_per_ns`` is set, the time its bytes spend in the issuing SM's
  L2->SMEM pipe, which serialises that SM's loads).  Landing performs
  ``complete_tx`` on the destination stage's full barrier - in every CTA it is
  multicast to.
* **wgmma**: ``mma_ns`` per 128x128x64 k-tile (scaled by the consumer tile's
  volume), serial on the SM's tensor core (a FIFO shared by the SM's consumer
  warpgroups); issued asynchronously, waited with ``wgmma.wait_group``.
* **Epilogue**: accumulators -> SMEM staging (``epilogue_ns`` per 128x128 tile,
  split into EPI_N-column chunks when ``epi_n`` is set), then a **TMA store**
  (``store_latency_ns`` per chunk until the staging buffer has been read).
* Every role pays ``issue_ns`` per instruction it issues and resumes
  ``wake_ns`` after the phase completion that releases it.

Roles per step (the parameters come from the step's `Step`, see :func:`params_for_step`)
-------------------------------------------------------------------------------------
* *lockstep* (steps 4-6): one team issues its loads, waits on the full barrier,
  issues the wgmma, waits for it, ... and writes the epilogue itself.  With one
  stage (step 4) nothing overlaps; with a ring of ``depth`` stages the team
  prefetches depth-1 ahead and keeps one wgmma in flight (``wgmma.wait_group(1)``);
  a persistent step runs several tiles per CTA.  The TMA engine's loads/stores
  in flight are drawn on a ``cta0/tma`` lane.
* *warp-specialized* (step 7): a producer warp, consumer warpgroup(s) and a
  writeback warp; two rings = four mbarriers: ``tma2mma``/``mma2tma`` (the SMEM
  operand ring, depth stages) and ``mma2ld``/``ld2mma`` (the accumulator staging
  buffer: full / free).
* a cluster of 2 CTAs (modelled step 8): each CTA loads its own A and half of B,
  multicasting its B half to both CTAs; each CTA's full barrier expects the
  whole stage's bytes; the empty barrier counts the consumers of both CTAs
  (remote arrive).
* two consumers (modelled step 9): as 8, with two consumer warpgroups per CTA
  that share each staged B tile (each has its own A block), and a chunked
  (64-column) epilogue.

Steps 8 and 9 are "model only": no kernel implements them yet.

Deadlocks and early releases (the course's exercises, :data:`WHAT_IFS`) never
hang and never raise: :func:`simulate` returns a :class:`SimResult` whose
``verdict`` is ``"deadlock"`` or ``"early_release"`` with a one-sentence
``explanation``.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from ..runtime.steps import EPI_CHUNK_COLS, MODELLED_STEPS, Step, all_steps, get_step
from .timeline import Handoff, Span, Timeline, kpis, lane_cta, lane_role

__all__ = [
    "SimParams",
    "SimResult",
    "MBarrier",
    "PipelineState",
    "WHAT_IFS",
    "WHAT_IF_DEFAULT_STEP",
    "simulated_steps",
    "params_for_step",
    "simulate",
    "simulate_step",
    "run_what_if",
    "depth_needed",
    "calibrate",
    "simulate_like",
]

# ---------------------------------------------------------------------------
# parameters
# ---------------------------------------------------------------------------

# SMs of an H100 SXM / H200, for sizing persistent grids when the real count is not known.
DEFAULT_NUM_SMS = 132


def simulated_steps() -> list[Step]:
    """The steps the simulator models: every kernel step with mbarrier stages (the TMA
    steps), then the steps modelled before their kernels exist ("model only")."""
    return [st for st in all_steps(include_variants=False) if st.uses_tma] + list(MODELLED_STEPS.values())


@dataclass
class SimParams:
    """Model parameters.  Times in ns, sizes in bytes / elements.

    Defaults are rough estimates for one H200 SM at 128x128x64 fp16 tiles:

    * ``mma_ns = 280``: a 128x128x64 k-tile is 2*128*128*64 = 2.10 MFLOP; an
      SM's dense fp16 tensor throughput is 4096 FLOP/clock (ANCHORS.md: 132
      SMs x 4096 FLOP/clk x 1.83 GHz = 989 TFLOP/s), so 512 clocks = 0.28 us
      at 1.83 GHz.  Derived from the datasheet peak, not measured.
    * ``load_latency_ns = 800``: TMA issue -> bytes landed for a 16 KB box
      under load (L2 hits mixed with HBM misses).  An estimate (the brief's
      0.8-1.0 us range); calibrate it from a measured trace.
    * ``l2_bytes_per_ns = None``: the issuing SM's share of L2->SMEM bandwidth.
      None = unlimited (a pure latency model).  A value around 60-70 B/ns
      (~8-9 TB/s over 132 SMs, an estimate) makes 128x128 tiles bandwidth-bound,
      which is what the cluster multicast and the shared B of steps 8-9 relieve.
    * ``epilogue_ns = 300``: registers -> SMEM (stmatrix) of a 128x128 fp16
      tile (32 KB at ~128 B/clock plus fences); estimate.
    * ``store_latency_ns = 500``: TMA store issue -> staging buffer read
      (``cp.async.bulk.wait_group.read``) per stored chunk; estimate.
    * ``issue_ns = 10``, ``wake_ns = 10``: instruction issue cost and the delay
      from a phase completion to the waiter resuming; estimates.
    """

    step: int = 7
    key: str = "7"             # the step's registry key, e.g. "7:d4"
    name: str = "warp specialization"
    style: str = "warp-specialized"   # or "lockstep"
    model_only: bool = False   # no kernel implements this step yet
    depth: int = 4
    k_tiles: int = 64
    tiles_per_cta: int = 1
    tile_m: int = 128          # rows of A per consumer warpgroup
    tile_n: int = 128          # columns (rows of B) per CTA
    tile_k: int = 64
    in_bytes: int = 2          # fp16 / bf16
    out_bytes: int = 2
    num_consumers: int = 1
    cluster: int = 1           # CTAs per cluster (B multicast across them)
    epi_n: int | None = None   # epilogue chunk width (columns); None = whole tile
    staging_stages: int = 1    # staging buffers per consumer (the mma2ld ring depth)
    mma_ns: float = 280.0      # per 128x128x64 k-tile, scaled by the consumer tile volume
    load_latency_ns: float = 800.0
    l2_bytes_per_ns: float | None = None
    epilogue_ns: float = 300.0  # per 128x128 tile, scaled by area
    store_latency_ns: float = 500.0
    issue_ns: float = 10.0
    wake_ns: float = 10.0

    @property
    def lockstep(self) -> bool:
        return self.style == "lockstep"

    @property
    def title(self) -> str:
        notes = self.style + (", model only" if self.model_only else "")
        return f"step {self.key} - {self.name} ({notes})"

    @property
    def a_bytes(self) -> int:
        """Bytes of one consumer's A block per stage."""
        return self.tile_m * self.tile_k * self.in_bytes

    @property
    def b_bytes(self) -> int:
        """Bytes of the CTA's B tile per stage."""
        return self.tile_n * self.tile_k * self.in_bytes

    @property
    def stage_bytes(self) -> int:
        """Bytes that land in one CTA's stage (its full barrier's expect_tx)."""
        return self.num_consumers * self.a_bytes + self.b_bytes

    @property
    def mma_time(self) -> float:
        return self.mma_ns * (self.tile_m * self.tile_n * self.tile_k) / (128 * 128 * 64)

    @property
    def chunks(self) -> int:
        if not self.epi_n or self.epi_n >= self.tile_n:
            return 1
        return max(1, math.ceil(self.tile_n / self.epi_n))

    @property
    def epilogue_chunk_time(self) -> float:
        return self.epilogue_ns * (self.tile_m * self.tile_n) / (128 * 128) / self.chunks

    @property
    def store_chunk_bytes(self) -> int:
        return self.tile_m * self.tile_n * self.out_bytes // self.chunks

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def params_for_step(step: int | str | Step, *, size: tuple[int, int, int] | None = None,
                    num_sms: int | None = None, **overrides: Any) -> SimParams:
    """The model of a ladder step: tile, ring depth, style, consumers and cluster come from
    its :class:`~gemm_ladder.runtime.steps.Step` (a key such as ``7`` or ``"7:d4"``, or a
    Step), the timings from :class:`SimParams`' defaults; ``overrides`` (None values
    ignored) replace any field.

    Without ``size``: k_tiles = 64 (K = 4096 at BK = 64), and 2 tiles per CTA for the
    persistent steps (enough to show the tile-to-tile hand-over; at 4096^3 on 132 SMs a
    persistent CTA runs 8), else 1.  With ``size`` = (M, N, K): the k-tiles of K and the
    busiest CTA's tile count on ``num_sms`` SMs (default 132).
    """
    try:
        st = step if isinstance(step, Step) else get_step(step, modelled=True)
    except KeyError as e:
        raise ValueError(e.args[0]) from None
    if not st.uses_tma:
        keys = ", ".join(s.key for s in simulated_steps())
        raise ValueError(f"the simulator models the mbarrier pipelines of steps {keys}, not step {st.key}")
    base: dict[str, Any] = dict(
        step=st.number, key=st.key, name=st.name, style=st.style, model_only=st.model_only,
        depth=st.depth, tile_m=st.bm // st.consumers, tile_n=st.bn, tile_k=st.bk,
        num_consumers=st.consumers, cluster=st.cluster_m,
        epi_n=EPI_CHUNK_COLS if st.epi_stages else None, staging_stages=st.epilogue_slots,
        k_tiles=64, tiles_per_cta=2 if st.persistent else 1)
    if size is not None:
        M, N, K = size
        base.update(k_tiles=-(-K // st.bk), tiles_per_cta=st.tiles_per_cta(M, N, num_sms or DEFAULT_NUM_SMS))
    base.update({k: v for k, v in overrides.items() if v is not None})
    p = SimParams(**base)
    if p.depth < 1 or p.k_tiles < 1 or p.tiles_per_cta < 1:
        raise ValueError("depth, k_tiles and tiles_per_cta must be >= 1")
    return p


def depth_needed(p: SimParams) -> int:
    """The smallest ring depth at which the model's warp-specialized mainloop
    keeps the tensor core fed back to back.

    A stage freed when wgmma k ends is refilled and ready for k+depth after
    ``wake + issue (expect_tx) + pieces*issue + transfer + latency + wake +
    issue``; the tensor core reaches k+depth after ``(depth-1) * mma``
    more.  So depth >= 1 + ceil(refill / mma).
    """
    pieces = p.num_consumers + 1
    xfer = 0.0
    if p.l2_bytes_per_ns:
        own = p.num_consumers * p.a_bytes + p.b_bytes / max(1, p.cluster)
        xfer = own / p.l2_bytes_per_ns
    refill = (2 * p.wake_ns + (pieces + 2) * p.issue_ns + xfer + p.load_latency_ns)
    per_stage = p.mma_time * p.num_consumers
    return 1 + math.ceil(refill / per_stage - 1e-9)


# ---------------------------------------------------------------------------
# hardware objects
# ---------------------------------------------------------------------------

@dataclass
class PipelineState:
    """A ring's bookkeeping: which slot (``stage``) and which parity (``phase``)."""

    depth: int
    stage: int = 0
    phase: int = 0

    def advance(self) -> None:
        self.stage += 1
        if self.stage == self.depth:
            self.stage = 0
            self.phase ^= 1


@dataclass
class MBarrier:
    """An mbarrier: init count, pending arrivals, tx-count, current phase.

    ``phase`` is the index of the current (incomplete) phase, starting at 0;
    its parity is ``phase & 1``.
    """

    name: str
    stage: int
    cta: int
    count: int
    pending: int = -1
    tx: int = 0
    phase: int = 0
    arrived: list = field(default_factory=list)     # lanes that arrived this phase
    expected: int = 0                                # bytes announced this phase
    landed: int = 0                                  # bytes landed this phase
    last_src: str = ""
    waiters: list = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.pending < 0:
            self.pending = self.count

    @property
    def ref(self) -> str:
        return f"{self.name}[{self.stage}]"

    def try_wait(self, parity: int) -> bool:
        """``mbarrier.try_wait.parity``: has the phase with this parity completed?"""
        return (self.phase & 1) != parity

    def arrive(self, lane: str) -> None:
        self.pending -= 1
        self.arrived.append(lane)
        self.last_src = lane

    def expect_tx(self, nbytes: int) -> None:
        self.tx += nbytes
        self.expected += nbytes

    def complete_tx(self, nbytes: int, src: str) -> None:
        self.tx -= nbytes
        self.landed += nbytes
        self.last_src = src

    def ready(self) -> bool:
        return self.pending == 0 and self.tx == 0

    def flip(self) -> None:
        """Complete the current phase and re-arm."""
        self.phase += 1
        self.pending = self.count
        self.arrived = []
        self.expected = 0
        self.landed = 0


# ---------------------------------------------------------------------------
# what-ifs
# ---------------------------------------------------------------------------

WHAT_IFS = {
    "both-phase-0": "both PipelineStates of the operand ring start at phase 0 (the producer should start at 1)",
    "expect-tx-small": "the producer's expect_tx announces fewer bytes than the stage's loads deliver (the B tile is left out)",
    "expect-tx-large": "the producer's expect_tx announces more bytes than the stage's loads deliver (one B tile too many)",
    "init-count-high": "the empty barrier's init count is one more than the arrivals per phase (full barrier for lockstep steps)",
    "init-count-low": "the empty barrier mma2tma's init count is one less than the consumers that arrive per phase",
    "depth-1": "a one-stage ring: the load of k-tile k+1 cannot overlap the wgmma of k-tile k",
}

WHAT_IF_DEFAULT_STEP = {
    "both-phase-0": 7,
    "expect-tx-small": 7,
    "expect-tx-large": 7,
    "init-count-high": 7,
    "init-count-low": 8,
    "depth-1": 7,
}


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


class _Stop(Exception):
    pass


# ---------------------------------------------------------------------------
# the engine
# ---------------------------------------------------------------------------

class _Proc:
    def __init__(self, lane: str, gen: Iterator):
        self.lane = lane
        self.gen = gen
        self.done = False
        self.blocked: tuple | None = None   # (bar, parity, t_begin, label)


class _Engine:
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
        self.procs: list[_Proc] = []
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
                f"{self._cta_txt(b.cta)} when no arrival was pending in its phase {b.phase} "
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
                f"early release: {b.ref}{self._cta_txt(b.cta)} completed its phase {b.phase} at "
                f"t={self.now:.0f} ns while {inflight_bytes} B of TMA loads into stage {b.stage} were "
                f"still in flight - expect_tx announced {b.expected} B but the stage's loads deliver "
                f"{total} B, so {who} would read stage {b.stage} before its data has landed")
        done_phase = b.phase
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
        del done_phase

    def _cta_txt(self, cta: int) -> str:
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
        raise _Stop()

    def spawn(self, lane: str, gen: Iterator) -> None:
        pr = _Proc(lane, gen)
        self.procs.append(pr)
        self.schedule(0.0, lambda: self.step(pr))

    def step(self, pr: _Proc) -> None:
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
        except _Stop:
            return
        live = [pr for pr in self.procs if not pr.done]
        if live:
            self.verdict = "deadlock"
            self.explanation = self.explain_deadlock(live)

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
                f"{self._cta_txt(cta)}{via} at t={self.now:.0f} ns while {missing} of that stage's "
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
                    f"(k-tile {k}) into stage {stage}{self._cta_txt(d)} at t={self.now:.0f} ns "
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

    # -- deadlock explanation --------------------------------------------------
    def _waits_txt(self, lane: str, b: MBarrier, parity: int) -> str:
        return f"{self.role(lane)} waits on {b.ref}{self._cta_txt(b.cta)} for parity {parity}"

    @staticmethod
    def _phase_txt(b: MBarrier) -> str:
        return f"phase {b.phase}" + (f" (parity {b.phase & 1})" if b.phase > 1 else "")

    def _stuck_reason(self, b: MBarrier, live: dict[str, _Proc]) -> tuple[str, Any]:
        """Why can't ``b``'s current phase complete?  ('tx'|'count'|'chain'|'other', detail)."""
        inflight = any(any(x is b for x in r["bars"]) for r in self.inflight.values())
        arr = self.arrivers.get((b.cta, b.name), [])
        if b.pending <= 0 and b.tx > 0 and not inflight:
            return "tx", None
        if b.pending > 0:
            remaining = [a for a in arr if a not in b.arrived]
            waiting = [a for a in remaining if a in live and live[a].blocked is not None]
            if not remaining or all(a not in live for a in remaining):
                return "count", None
            if waiting:
                return "chain", waiting
        return "other", None

    def explain_deadlock(self, live_procs: list[_Proc]) -> str:
        live = {pr.lane: pr for pr in live_procs}
        blocked = [pr for pr in live_procs if pr.blocked is not None]
        if not blocked:
            return "deadlock: roles are left unfinished but none is waiting on a barrier (a model bug)"
        # close the open waits so the view shows them
        t_end = self.now + max(self.p.load_latency_ns, 200.0)
        for pr in blocked:
            b, parity, t0, label = pr.blocked
            self.spans.append(Span(pr.lane, "wait", t0, t_end, stage=b.stage, phase=parity,
                                   barrier=b.name, cta=lane_cta(pr.lane),
                                   label=f"{label} - blocked forever"))
        reasons = {pr.lane: self._stuck_reason(pr.blocked[0], live) for pr in blocked}
        # start from a root cause (tx / count); else from the producer (or earliest waiter)
        roots = [pr for pr in blocked if reasons[pr.lane][0] in ("tx", "count")]
        roots.sort(key=lambda pr: (pr.blocked[2], pr.lane))
        if roots:
            pr = roots[0]
            b, parity = pr.blocked[0], pr.blocked[1]
            head = f"deadlock: {self._waits_txt(pr.lane, b, parity)}, but "
            kind = reasons[pr.lane][0]
            if kind == "tx":
                landed = b.landed
                return (head + f"that barrier's {self._phase_txt(b)} still expects {b.tx} more "
                        f"transaction bytes and no TMA load to it is in flight - expect_tx announced "
                        f"{b.expected} B while the stage's loads delivered {landed} B, so the phase "
                        f"can never complete")
            arr = self.arrivers.get((b.cta, b.name), [])
            names = ", ".join(self.role(a) for a in arr) or "none"
            more = _plural(b.pending, "more arrival")
            come = _plural(len(arr), "arrival")
            return (head + f"that barrier still needs {more} in its {self._phase_txt(b)}: it was "
                    f"initialised with count {b.count} while only {come} per phase "
                    f"{'comes' if len(arr) == 1 else 'come'} ({names}) and "
                    f"{'it has' if len(arr) == 1 else 'they have all'} arrived, so the phase can "
                    f"never complete")
        blocked.sort(key=lambda pr: (0 if lane_role(pr.lane) in ("producer", "team") else 1,
                                     pr.blocked[2], pr.lane))
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
            only = "only arriver" if len(self.arrivers.get((b.cta, b.name), [])) == 1 else "arriver"
            parts.append((cur, b, parity, only, nxt))
            if nxt.lane in seen or nxt.blocked is None:
                chain.append(nxt)
                break
            seen.add(nxt.lane)
            chain.append(nxt)
            cur = nxt
        b, parity = start.blocked[0], start.blocked[1]
        if not parts:
            return (f"deadlock: {self._waits_txt(start.lane, b, parity)}, but that barrier is still "
                    f"in {self._phase_txt(b)} and nothing left can complete it")
        txt = f"deadlock: {self._waits_txt(start.lane, b, parity)}, but that barrier is still in {self._phase_txt(b)}"
        for i, (cur, b1, p1, only, nxt) in enumerate(parts):
            nb, npar = nxt.blocked[0], nxt.blocked[1]
            if i == 0:
                txt += f" and its {only}, {self.role(nxt.lane)}, is itself waiting on {nb.ref}{self._cta_txt(nb.cta)} for parity {npar}"
            elif nxt.lane != start.lane:
                txt += f", whose {only} {self.role(nxt.lane)} waits on {nb.ref}{self._cta_txt(nb.cta)} for parity {npar}"
        last = chain[-1]
        if last.lane in {c.lane for c in chain[:-1]}:
            hint = {"both-phase-0": "both PipelineStates started at phase 0"}.get(self.what_if or "",
                                                                               "the waits form a cycle")
            first_arr = parts[-1][1]
            txt += (f" - {hint}, so neither side is ever released" if len(parts) <= 2 else
                    f" - {hint} back to {self.role(last.lane)}, so none of them is ever released")
            del first_arr
        else:
            txt += ", which can never complete"
        return txt


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


# ---------------------------------------------------------------------------
# roles
# ---------------------------------------------------------------------------

def _lockstep_team(e: _Engine, cta: int) -> Iterator:
    """Steps 4-6: one team loads, waits, multiplies and writes, in turn."""
    p = e.p
    D, K = p.depth, p.k_tiles
    lane, tma = f"cta{cta}/team", f"cta{cta}/tma"
    nbytes = p.stage_bytes
    announce = _announce(e, nbytes)
    st = PipelineState(D, 0, 0)
    store_read_at: float | None = None

    def load(g: int, tile: int) -> Iterator:
        s = g % D
        t0 = e.now
        yield ("sleep", 2 * p.issue_ns)
        e.spans.append(Span(lane, "issue", t0, e.now, stage=s, barrier="tma2mma", tile=tile,
                            k=g - tile * K, cta=cta,
                            label=f"arrive.expect_tx(tma2mma[{s}], {announce} B) + TMA A,B k={g - tile * K}"))
        e.arrive(e.bar(cta, "tma2mma", s), lane, expect=announce)
        e.tma_load(cta, [cta], s, tile, g - tile * K, p.a_bytes, "A", 1)
        e.tma_load(cta, [cta], s, tile, g - tile * K, p.b_bytes, "B", 1)

    for tile in range(p.tiles_per_cta):
        base = tile * K
        for kk in range(min(D - 1, K)):
            yield from load(base + kk, tile)
        prev_end = None
        for k in range(K):
            g = base + k
            if D == 1:
                yield from load(g, tile)
            yield ("wait", e.bar(cta, "tma2mma", st.stage), st.phase,
                   f"wait tma2mma[{st.stage}] parity {st.phase}")
            yield ("sleep", p.issue_ns)
            end = e.wgmma(cta, lane, st.stage, tile, k, f"wgmma k={k} (stage {st.stage})")
            if D == 1:
                yield ("until", end)                     # wait_group(0): stage reused next
            else:
                if prev_end is not None:
                    yield ("until", prev_end)            # wait_group(1): k-1 done, its stage free
                if k + D - 1 < K:
                    yield from load(g + D - 1, tile)
            prev_end = end
            st.advance()
        yield ("until", prev_end)                        # wait_group(0)
        if store_read_at is not None and store_read_at > e.now:
            t0 = e.now
            yield ("until", store_read_at)
            e.spans.append(Span(lane, "wait", t0, e.now, barrier="bulk_group", cta=cta, tile=tile,
                                label="cp.async.bulk.wait_group.read (staging still being stored)"))
        t0 = e.now
        yield ("sleep", p.epilogue_chunk_time * p.chunks)
        e.spans.append(Span(lane, "epilogue", t0, e.now, stage=0, tile=tile, k=0, cta=cta,
                            label=f"epilogue tile {tile}: registers -> SMEM"))
        t0 = e.now
        yield ("sleep", p.issue_ns)
        store_t = _store_time(p, p.store_chunk_bytes * p.chunks)
        e.spans.append(Span(tma, "store", e.now, e.now + store_t, stage=0, tile=tile, k=0, cta=cta,
                            label=f"TMA store tile {tile}"))
        store_read_at = e.now + store_t
    if store_read_at is not None:
        yield ("until", store_read_at)


def _store_time(p: SimParams, nbytes: int) -> float:
    t = p.store_latency_ns
    if p.l2_bytes_per_ns:
        t += nbytes / p.l2_bytes_per_ns
    return t


def _announce(e: _Engine, nbytes: int) -> int:
    """The bytes the producer announces with expect_tx (altered by the tx what-ifs)."""
    p = e.p
    b_share = p.b_bytes
    if e.what_if == "expect-tx-small":
        return nbytes - b_share
    if e.what_if == "expect-tx-large":
        return nbytes + b_share
    return nbytes


def _producer(e: _Engine, cta: int) -> Iterator:
    p = e.p
    lane = f"cta{cta}/producer"
    st = PipelineState(p.depth, 0, 0 if e.what_if == "both-phase-0" else 1)
    announce = _announce(e, p.stage_bytes)
    peers = list(range(p.cluster))
    pieces = [(f"A{i}" if p.num_consumers > 1 else "A", [cta], p.a_bytes)
              for i in range(p.num_consumers)]
    if p.cluster > 1:
        pieces.append((f"B half {cta}", peers, p.b_bytes // p.cluster))
    else:
        pieces.append(("B", [cta], p.b_bytes))
    readers = p.num_consumers
    for tile in range(p.tiles_per_cta):
        for k in range(p.k_tiles):
            s = st.stage
            yield ("wait", e.bar(cta, "mma2tma", s), st.phase, f"wait mma2tma[{s}] parity {st.phase}")
            t0 = e.now
            yield ("sleep", p.issue_ns)
            e.arrive(e.bar(cta, "tma2mma", s), lane, expect=announce)
            for what, dests, nb in pieces:
                yield ("sleep", p.issue_ns)
                e.tma_load(cta, dests, s, tile, k, nb, what, readers)
            e.spans.append(Span(lane, "issue", t0, e.now, stage=s, barrier="tma2mma", tile=tile, k=k,
                                cta=cta, label=f"arrive.expect_tx(tma2mma[{s}], {announce} B) + "
                                               f"TMA {', '.join(w for w, _, _ in pieces)} k={k}"))
            st.advance()


def _consumer(e: _Engine, cta: int, ci: int) -> Iterator:
    p = e.p
    lane = f"cta{cta}/consumer{ci}"
    st = PipelineState(p.depth, 0, 0)
    acc = PipelineState(p.staging_stages, 0, 1)
    peers = list(range(p.cluster))

    def release(stage: int) -> None:
        for c in peers:
            e.arrive(e.bar(c, "mma2tma", stage), lane)

    for tile in range(p.tiles_per_cta):
        prev: tuple[float, int] | None = None
        for k in range(p.k_tiles):
            s = st.stage
            yield ("wait", e.bar(cta, "tma2mma", s), st.phase, f"wait tma2mma[{s}] parity {st.phase}")
            yield ("sleep", p.issue_ns)
            end = e.wgmma(cta, lane, s, tile, k, f"wgmma k={k} (stage {s})")
            if p.depth == 1:
                # one slot: it must be released before the next load can land, so
                # wait_group(0) (keeping one wgmma in flight would deadlock here)
                yield ("until", end)
                release(s)
                st.advance()
                continue
            if prev is not None:
                yield ("until", prev[0])                 # wgmma.wait_group(1)
                release(prev[1])
            prev = (end, s)
            st.advance()
        if prev is not None:
            yield ("until", prev[0])                     # wgmma.wait_group(0)
            release(prev[1])
        for ch in range(p.chunks):
            a = ci * p.staging_stages + acc.stage
            yield ("wait", e.bar(cta, "ld2mma", a), acc.phase, f"wait ld2mma[{a}] parity {acc.phase}")
            t0 = e.now
            yield ("sleep", p.epilogue_chunk_time)
            chunk = f" chunk {ch}" if p.chunks > 1 else ""
            e.spans.append(Span(lane, "epilogue", t0, e.now, stage=a, tile=tile, k=ch, cta=cta,
                                label=f"epilogue tile {tile}{chunk}: registers -> SMEM staging[{a}]"))
            e.arrive(e.bar(cta, "mma2ld", a), lane)
            acc.advance()


def _writeback(e: _Engine, cta: int) -> Iterator:
    p = e.p
    lane = f"cta{cta}/writeback"
    states = [PipelineState(p.staging_stages, 0, 0) for _ in range(p.num_consumers)]
    for tile in range(p.tiles_per_cta):
        for ch in range(p.chunks):
            for ci in range(p.num_consumers):
                st = states[ci]
                a = ci * p.staging_stages + st.stage
                yield ("wait", e.bar(cta, "mma2ld", a), st.phase, f"wait mma2ld[{a}] parity {st.phase}")
                yield ("sleep", p.issue_ns)
                t0 = e.now
                yield ("sleep", _store_time(p, p.store_chunk_bytes))
                chunk = f" chunk {ch}" if p.chunks > 1 else ""
                e.spans.append(Span(lane, "store", t0, e.now, stage=a, tile=tile, k=ch, cta=cta,
                                    label=f"TMA store tile {tile}{chunk} from staging[{a}]"))
                e.arrive(e.bar(cta, "ld2mma", a), lane)
                st.advance()


# ---------------------------------------------------------------------------
# public entry points
# ---------------------------------------------------------------------------

def _lanes(p: SimParams) -> list[str]:
    if p.lockstep:
        return ["cta0/team", "cta0/tma"]
    out = []
    for c in range(p.cluster):
        out.append(f"cta{c}/producer")
        out += [f"cta{c}/consumer{i}" for i in range(p.num_consumers)]
        out += [f"cta{c}/writeback", f"cta{c}/tma"]
    return out


def _check_what_if(p: SimParams, what_if: str | None) -> None:
    if what_if is None:
        return
    if what_if not in WHAT_IFS:
        raise ValueError(f"unknown what-if {what_if!r}; choose from {', '.join(WHAT_IFS)}")
    if what_if == "both-phase-0" and p.lockstep:
        ws = ", ".join(st.key for st in simulated_steps() if st.style == "warp-specialized")
        raise ValueError(f"both-phase-0 needs a producer and a consumer: use a warp-specialized step ({ws})")
    if what_if == "init-count-low":
        if p.lockstep or p.cluster * p.num_consumers < 2:
            shared = ", ".join(st.key for st in simulated_steps() if st.cluster_m * st.consumers > 1)
            raise ValueError("init-count-low needs an empty barrier with at least two arrivals per "
                             f"phase: use step {shared} (several consumers arrive on mma2tma)")


def simulate(params: SimParams | int, what_if: str | None = None, title: str | None = None,
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
    e = _Engine(p, what_if)
    D = p.depth
    if p.lockstep:
        init_full = 2 if what_if == "init-count-high" else 1
        for s in range(D):
            e.make_bar(0, "tma2mma", s, init_full, ["cta0/team"])
        e.spawn("cta0/team", _lockstep_team(e, 0))
    else:
        consumers_all = [f"cta{c}/consumer{i}" for c in range(p.cluster)
                         for i in range(p.num_consumers)]
        empty = len(consumers_all)
        if what_if == "init-count-high":
            empty += 1
        elif what_if == "init-count-low":
            empty -= 1
        for c in range(p.cluster):
            for s in range(D):
                e.make_bar(c, "tma2mma", s, 1, [f"cta{c}/producer"])
                e.make_bar(c, "mma2tma", s, empty, consumers_all)
            for i in range(p.num_consumers):
                for a in range(p.staging_stages):
                    ix = i * p.staging_stages + a
                    e.make_bar(c, "mma2ld", ix, 1, [f"cta{c}/consumer{i}"])
                    e.make_bar(c, "ld2mma", ix, 1, [f"cta{c}/writeback"])
        for c in range(p.cluster):
            e.spawn(f"cta{c}/producer", _producer(e, c))
            for i in range(p.num_consumers):
                e.spawn(f"cta{c}/consumer{i}", _consumer(e, c, i))
            e.spawn(f"cta{c}/writeback", _writeback(e, c))
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
    barriers = sorted({(name, b.count, len(e.arrivers.get((b.cta, name), [])))
                       for (c, name, s), b in e.bars.items()})
    meta = dict(
        key=p.key,
        model_only=p.model_only,
        style=style,
        depth=p.depth,
        k_tiles=p.k_tiles,
        tiles_per_cta=p.tiles_per_cta,
        tile=[p.tile_m * p.num_consumers, p.tile_n, p.tile_k],
        num_ctas=p.cluster,
        num_consumers=p.num_consumers,
        params=p.to_dict(),
        what_if=what_if,
        what_if_text=WHAT_IFS.get(what_if or "", ""),
        verdict=e.verdict,
        explanation=e.explanation,
        hazard_t=e.hazard_t,
        depth_needed=depth_needed(p),
        barriers=[dict(name=n, count=c, arrivers=a) for n, c, a in barriers],
        barrier_log=e.log,
    )
    tl = Timeline(source="sim", step=p.step, title=title, lanes=_lanes(p), spans=e.spans,
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
    if name not in WHAT_IFS:
        raise ValueError(f"unknown what-if {name!r}; choose from {', '.join(WHAT_IFS)}")
    step = step if step is not None else WHAT_IF_DEFAULT_STEP[name]
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


# ---------------------------------------------------------------------------
# calibration from a measured timeline
# ---------------------------------------------------------------------------

def calibrate(params: SimParams, measured: Timeline) -> SimParams:
    """Fit the model's timing parameters to a measured :class:`Timeline`.

    * ``mma_ns``: per CTA, the union of its ``mma`` spans divided by their
      number (tensor-core time per k-tile, robust to overlapping issue->wait
      spans), median over CTAs, rescaled to a 128x128x64 k-tile.
    * ``load_latency_ns``: median ``load`` span duration, less the bandwidth
      transfer time of one piece when ``l2_bytes_per_ns`` is set.
    * ``epilogue_ns`` / ``store_latency_ns``: median ``epilogue`` / ``store``
      span durations, rescaled the same way the model scales them.

    Parameters without matching spans are left as they are.
    """
    upd: dict[str, float] = {}
    per_cta = []
    for c in sorted({s.cta for s in measured.spans}):
        mm = [s for s in measured.spans if s.cta == c and s.kind == "mma"]
        if mm:
            from .timeline import union_length
            per_cta.append(union_length((s.start, s.end) for s in mm) / len(mm))
    scale = (params.tile_m * params.tile_n * params.tile_k) / (128 * 128 * 64)
    if per_cta:
        upd["mma_ns"] = statistics.median(per_cta) / scale
    loads = [s.dur for s in measured.spans if s.kind == "load" and s.dur > 0]
    if loads:
        lat = statistics.median(loads)
        if params.l2_bytes_per_ns:
            lat -= params.a_bytes / params.l2_bytes_per_ns
        upd["load_latency_ns"] = max(0.0, lat)
    epi = [s.dur for s in measured.spans if s.kind == "epilogue" and s.dur > 0]
    if epi:
        area = (params.tile_m * params.tile_n) / (128 * 128)
        upd["epilogue_ns"] = statistics.median(epi) * params.chunks / area
    st = [s.dur for s in measured.spans if s.kind == "store" and s.dur > 0]
    if st:
        t = statistics.median(st)
        if params.l2_bytes_per_ns:
            t -= params.store_chunk_bytes / params.l2_bytes_per_ns
        upd["store_latency_ns"] = max(0.0, t)
    return dataclasses.replace(params, **upd)


def simulate_like(measured: Timeline, fit: bool = True, **overrides: Any) -> SimResult:
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
    res = simulate(p, title=f"{p.title}, depth {p.depth} (simulated{', calibrated' if fit else ''})")
    return res
