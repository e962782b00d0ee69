"""The attention steps' roles (A2-A5) on the simulator's engine: one SM, its tensor core (a FIFO
of wgmma groups, as the GEMM model's), its CUDA cores (the softmax: a processor-sharing pipe,
so two warpgroups computing at once take twice as long each), the K/V rings' TMA loads, and the
mbarriers with the hardware's semantics. The roles follow kernels/attention/ line by line:
attn_a2_fused.cu (the team), attn_warpspec.cuh (the producer), attn_a3/a4/a5 (the consumers)."""
from __future__ import annotations

from typing import Iterator

from ..timeline import WGMMA_ISSUED, Span, lane_cta, lane_role
from .attn_params import ATTN_WHAT_IFS, AttnParams
from .barriers import PipelineState
from .engine import Engine

FULL = {"K": "k_full", "V": "v_full"}
EMPTY = {"K": "k_empty", "V": "v_empty"}


class CudaCores:
    """An SM's CUDA cores and MUFU, shared by the warpgroups that compute on them at once
    (processor sharing: n jobs each progress at 1/n of the solo rate). A job's ``work`` is its
    time alone on the SM; its span (kind ``softmax``) is drawn on the lane that asked."""

    def __init__(self, e: "AttnEngine"):
        self.e = e
        self.jobs: dict[int, dict] = {}
        self.t = 0.0
        self.version = 0
        self.n = 0

    def submit(self, lane: str, work: float, **span) -> None:
        self._advance()
        self.n += 1
        self.jobs[self.n] = dict(left=work, lane=lane, t0=self.e.now, span=span)
        self._arm()

    def _advance(self) -> None:
        now = self.e.now
        if self.jobs:
            share = (now - self.t) / len(self.jobs)
            for j in self.jobs.values():
                j["left"] -= share
        self.t = now

    def _arm(self) -> None:
        self.version += 1
        if self.jobs:
            left = min(j["left"] for j in self.jobs.values())
            v = self.version
            self.e.schedule(self.e.now + max(0.0, left) * len(self.jobs), lambda: self._fire(v))

    def _fire(self, v: int) -> None:
        if v != self.version:
            return
        e = self.e
        self._advance()
        first = min(self.jobs, key=lambda k: self.jobs[k]["left"])
        for k in [k for k, j in self.jobs.items() if k == first or j["left"] <= 1e-6]:
            j = self.jobs.pop(k)
            e.spans.append(Span(j["lane"], "softmax", j["t0"], e.now, **j["span"]))
            e.schedule(e.now, lambda pr=e.proc_of[j["lane"]]: e.step(pr))
        self._arm()


class AttnEngine(Engine):
    """The engine with attention's resources: per SM one tensor core and one set of CUDA cores
    (every CTA of the model runs on SM 0), the K and V rings' occupants (for the hazard checks:
    a wgmma reading a stage whose loads have not landed, a load into a stage whose readers have
    not released it or whose release nothing orders before the load)."""

    def __init__(self, p: AttnParams, what_if: str | None):
        super().__init__(p, what_if)  # type: ignore[arg-type]
        self.cores = CudaCores(self)
        self.proc_of: dict = {}
        self.occ: dict[tuple[int, str, int], dict] = {}
        w = ATTN_WHAT_IFS.get(what_if or "")
        self.deadlock_hint = w.hint if w else ""
        if what_if == "pingpong-order-swapped":
            self.deadlock_start = ("consumer0",)

    def spawn(self, lane: str, gen: Iterator) -> None:
        super().spawn(lane, gen)
        self.proc_of[lane] = self.procs[-1]

    def role(self, lane: str) -> str:
        c, r = lane_cta(lane), lane_role(lane)
        name = f"consumer {r[8:]}" if r.startswith("consumer") else {"tma": "TMA engine"}.get(r, r)
        if self.p.ctas_per_sm > 1:
            return f"CTA{c}'s {name}"
        return name if r.startswith("consumer") else f"the {name}"

    def cta_txt(self, cta: int) -> str:
        return f" (CTA{cta})" if self.p.ctas_per_sm > 1 else ""

    def slot(self, ring: str, s: int) -> int:
        """A stage's place in the SMEM view: the K ring's stages are slots 0..D-1, V's D..2D-1."""
        return s if ring == "K" else self.p.depth + s

    def readers(self, cta: int) -> list[str]:
        p = self.p
        return [self.lane(cta, "team")] if p.lockstep else [self.lane(cta, f"consumer{i}") for i in range(p.consumers)]

    # -- TMA loads ----------------------------------------------------------------------------
    def _landing(self, nbytes: int) -> float:
        p = self.p
        if p.l2_bytes_per_ns:  # the SM's L2 -> SMEM pipe, shared by its CTAs
            s0 = max(self.now, self.pipe_free.get(0, 0.0))
            self.pipe_free[0] = s0 + nbytes / p.l2_bytes_per_ns
            return self.pipe_free[0] + p.load_latency_ns
        return self.now + p.load_latency_ns

    def _issue_load(self, cta: int, issuer: str, bar_name: str, stage: int, nbytes: int, span: Span,
                    on_land=None) -> None:
        land = self._landing(nbytes)
        span.end = land
        self.spans.append(span)
        vc = dict(self.tick(issuer))
        b = self.bar(cta, bar_name, stage)
        self.load_seq += 1
        self.inflight[self.load_seq] = dict(bars=[b], bytes=nbytes, dests=[cta], stage=stage, src=cta)

        def _land(lid=self.load_seq) -> None:
            self.inflight.pop(lid)
            if on_land is not None:
                on_land()
            self.complete_tx(b, nbytes, self.lane(cta, "tma"), vc)
        self.schedule(land, _land)

    def q_load(self, cta: int, issuer: str, rows: str) -> None:
        p = self.p
        self._issue_load(cta, issuer, "q_full", 0, p.q_bytes,
                         Span(self.lane(cta, "tma"), "load", self.now, self.now, cta=cta, barrier="q_full",
                              label=f"TMA Q rows {rows} -> q_full, {p.q_bytes} B"))

    def kv_load(self, cta: int, ring: str, s: int, block: int, issuer: str, bar_name: str) -> None:
        """A TMA load of key block ``block``'s K (or V) into stage ``s`` of its ring, credited to
        ``bar_name[s]``; a hazard when the stage's previous contents are still being read."""
        key = (cta, ring, s)
        occ = self.occ.get(key)
        if occ is not None and occ["block"] != block:
            self._refill_check(issuer, ring, s, block, occ, cta)
            occ = None
        if occ is None:
            occ = dict(block=block, loads_left=0, readers=set(self.readers(cta)), released={})
            self.occ[key] = occ
        occ["loads_left"] += 1
        slot = self.slot(ring, s)

        def landed() -> None:
            occ["loads_left"] -= 1
        self._issue_load(cta, issuer, bar_name, s, self.p.kv_bytes,
                         Span(self.lane(cta, "tma"), "load", self.now, self.now, stage=slot, tile=0, k=block,
                              cta=cta, barrier=bar_name,
                              label=f"TMA {ring} block {block} -> {ring} stage {s}, {self.p.kv_bytes} B"), landed)

    def _refill_check(self, issuer: str, ring: str, s: int, block: int, occ: dict, cta: int) -> None:
        where = f"{ring} stage {s}{self.cta_txt(cta)}"
        if occ["readers"]:
            names = " and ".join(self.role(r) for r in sorted(occ["readers"]))
            self.hazard(f"early release: {self.role(issuer)} issued a TMA load (block {block}) into {where} at "
                        f"t={self.now:.0f} ns while {names} had not released its previous contents "
                        f"(block {occ['block']})")
        vc = self.vc.get(issuer, {})
        for r, stamp in occ["released"].items():
            if vc.get(r, 0) < stamp:
                self.hazard(f"early release: {self.role(issuer)} issued a TMA load (block {block}) into {where} at "
                            f"t={self.now:.0f} ns although nothing orders it after {self.role(r)} released "
                            f"block {occ['block']} there")

    # -- the tensor core, the CUDA cores, releases ----------------------------------------------
    def mma(self, cta: int, lane: str, ring: str, s: int, block: int, label: str) -> float:
        """Queue one consumer's wgmma group reading ``ring`` stage ``s`` (block ``block``) on the
        SM's tensor core; returns its end."""
        occ = self.occ.get((cta, ring, s))
        if occ is None or occ["block"] != block or occ["loads_left"] > 0:
            self.hazard(f"early release: {self.role(lane)} started {label} on {ring} stage {s}{self.cta_txt(cta)} "
                        f"at t={self.now:.0f} ns before block {block}'s {ring} had landed there")
        start = max(self.now, self.tc_free.get(0, 0.0))
        end = start + self.p.mma_time
        self.tc_free[0] = end
        self.spans.append(Span(lane, "mma", start, end, stage=self.slot(ring, s), tile=0, k=block, cta=cta,
                               barrier=self.full_name(ring), label=label))
        return end

    def full_name(self, ring: str) -> str:
        return "kv_full" if self.p.lockstep else FULL[ring]

    def release(self, cta: int, ring: str, s: int, lane: str) -> None:
        """``lane`` is done reading ``ring`` stage ``s``: one arrival per warp on its empty barrier
        (the team: its CTA barrier, no arrival)."""
        occ = self.occ.get((cta, ring, s))
        if self.p.lockstep:
            stamp = self.tick(lane)[lane]
        else:
            self.arrive(self.bar(cta, EMPTY[ring], s), lane, n=self.p.warps_per_consumer)
            stamp = self.vc[lane][lane]
            self.spans.append(Span(lane, "issue", self.now, self.now, stage=s, barrier=EMPTY[ring], tile=0,
                                   k=occ["block"] if occ else None, cta=cta, label=f"arrive {EMPTY[ring]}[{s}]"))
        if occ is not None:
            occ["readers"].discard(lane)
            occ["released"][lane] = stamp


# ---- the roles -------------------------------------------------------------------------------

def _issue(e: AttnEngine, cta: int, lane: str, ring: str, s: int, block: int, what: str) -> Iterator:
    """Issue one wgmma group (``mma_issue_ns`` after the wait that let it); returns its end."""
    yield ("sleep", e.p.mma_issue_ns)
    end = e.mma(cta, lane, ring, s, block, f"{what} block {block} ({ring} stage {s})")
    e.spans.append(Span(lane, "issue", e.now, e.now, stage=s, tile=0, k=block, cta=cta,
                        label=f"{WGMMA_ISSUED}: {what} block {block}"))
    return end


def _wait_group(e: AttnEngine, end: float) -> Iterator:
    """``wgmma.wait_group`` returns ``mma_wait_ns`` after the group it waits for is done."""
    yield ("until", end)
    yield ("sleep", e.p.mma_wait_ns)


def _cuda(e: AttnEngine, cta: int, lane: str, work: float, block: int, label: str) -> Iterator:
    if e.p.block_cuda_ns is not None:  # measured: latency-bound, not slowed by the other warpgroup
        t0 = e.now
        yield ("sleep", work)
        e.spans.append(Span(lane, "softmax", t0, e.now, tile=0, k=block, cta=cta, label=label))
        return
    e.cores.submit(lane, work, tile=0, k=block, cta=cta, label=label)
    yield ("park",)


def _softmax(e: AttnEngine, cta: int, lane: str, j: int, rescale: bool = True) -> Iterator:
    p = e.p
    work = p.cuda_time(rescale=rescale)
    what = "max, exp2, sum, P -> 16 bit" + (", rescale O" if rescale else "")
    yield from _cuda(e, cta, lane, work, j, f"softmax block {j} ({what})")


def _epilogue(e: AttnEngine, cta: int, lane: str) -> Iterator:
    t0 = e.now
    yield ("sleep", e.p.epilogue_time)
    e.spans.append(Span(lane, "epilogue", t0, e.now, cta=cta, tile=0,
                        label="O / rowsum -> memory (store_rows)"))


def _wait(e: AttnEngine, cta: int, name: str, st: PipelineState) -> tuple:
    return ("wait", e.bar(cta, name, st.stage), st.phase, f"wait {name}[{st.stage}] parity {st.phase}")


def team(e: AttnEngine, cta: int) -> Iterator:
    """A2: one warpgroup; its leader loads Q and the first DEPTH blocks (K and V of a block on
    one full barrier), then per block: wait, Q K^T, wait 0, softmax and rescale, P V, wait 0,
    the CTA barrier, and the leader refills the stage with block j + DEPTH."""
    p = e.p
    lane = e.lane(cta, "team")
    D, B = p.depth, p.blocks
    ld = PipelineState(D, 0, 0)  # the leader fills in the order the team drains (consumer numbering)

    def load(j: int) -> Iterator:
        s, t0 = ld.stage, e.now
        yield ("sleep", 3 * p.issue_ns)
        e.spans.append(Span(lane, "issue", t0, e.now, stage=s, barrier="kv_full", tile=0, k=j, cta=cta,
                            label=f"arrive.expect_tx(kv_full[{s}], {2 * p.kv_bytes} B) + TMA K, V block {j}"))
        e.arrive(e.bar(cta, "kv_full", s), lane, expect=2 * p.kv_bytes)
        e.kv_load(cta, "K", s, j, lane, "kv_full")
        e.kv_load(cta, "V", s, j, lane, "kv_full")
        ld.advance()

    yield ("sleep", p.issue_ns)
    e.arrive(e.bar(cta, "q_full", 0), lane, expect=p.q_bytes)
    e.q_load(cta, lane, "0-63")
    for j in range(min(D, B)):
        yield from load(j)
    rd = PipelineState(D, 0, 0)
    yield ("wait", e.bar(cta, "q_full", 0), 0, "wait q_full parity 0")
    for j in range(B):
        s = rd.stage
        yield _wait(e, cta, "kv_full", rd)
        end = yield from _issue(e, cta, lane, "K", s, j, "Q K^T")
        yield from _wait_group(e, end)
        yield from _softmax(e, cta, lane, j)
        end = yield from _issue(e, cta, lane, "V", s, j, "P V")
        yield from _wait_group(e, end)
        yield ("sleep", p.issue_ns)  # __syncthreads: the team is done with the stage
        e.release(cta, "K", s, lane)
        e.release(cta, "V", s, lane)
        if j + D < B:
            yield from load(j + D)
        rd.advance()
    yield from _epilogue(e, cta, lane)


def producer(e: AttnEngine, cta: int) -> Iterator:
    """A3-A5 (attn_warpspec.cuh, produce): Q once on q_full, then per block K into the K ring and V
    into the V ring, each stage acquired on its empty barrier."""
    p = e.p
    lane = e.lane(cta, "producer")
    ks = PipelineState(p.depth, 0, 1)
    vs = PipelineState(p.depth, 0, 0 if e.what_if == "v-ring-phase-0" else 1)
    qs = PipelineState(1, 0, 1)
    yield ("wait", e.bar(cta, "q_empty", 0), qs.phase, f"wait q_empty[0] parity {qs.phase}")
    qs.advance()
    yield ("sleep", p.issue_ns)
    e.arrive(e.bar(cta, "q_full", 0), lane, expect=p.consumers * p.q_bytes)
    for c in range(p.consumers):
        yield ("sleep", p.issue_ns)
        e.q_load(cta, lane, f"{64 * c}-{64 * c + 63}")
    for j in range(p.blocks):
        for ring, st in (("K", ks), ("V", vs)):
            s = st.stage
            yield _wait(e, cta, EMPTY[ring], st)
            t0 = e.now
            yield ("sleep", 2 * p.issue_ns)
            e.arrive(e.bar(cta, FULL[ring], s), lane, expect=p.kv_bytes)
            e.kv_load(cta, ring, s, j, lane, FULL[ring])
            e.spans.append(Span(lane, "issue", t0, e.now, stage=s, barrier=FULL[ring], tile=0, k=j, cta=cta,
                                label=f"arrive.expect_tx({FULL[ring]}[{s}], {p.kv_bytes} B) + TMA {ring} block {j}"))
            st.advance()


class _Consumer:
    """A consumer warpgroup's rings and turn (attn_warpspec.cuh's Consumer, gl_pipeline's
    OrderedBarrier member)."""

    def __init__(self, e: AttnEngine, cta: int, c: int):
        p = e.p
        self.e, self.cta, self.c = e, cta, c
        self.lane = e.lane(cta, f"consumer{c}")
        self.ks = PipelineState(p.depth, 0, 0)
        self.vs = PipelineState(p.depth, 0, 0)
        first = 1 if c == 0 and e.what_if != "pingpong-order-swapped" else 0
        self.turn = PipelineState(1, 0, first)

    def wait(self, ring: str) -> tuple:
        return _wait(self.e, self.cta, FULL[ring], self.ks if ring == "K" else self.vs)

    def issue(self, ring: str, j: int) -> Iterator:
        st = self.ks if ring == "K" else self.vs
        return _issue(self.e, self.cta, self.lane, ring, st.stage, j, "Q K^T" if ring == "K" else "P V")

    def release(self, ring: str) -> None:
        st = self.ks if ring == "K" else self.vs
        self.e.release(self.cta, ring, st.stage, self.lane)
        st.advance()

    def release_q(self) -> None:
        self.e.arrive(self.e.bar(self.cta, "q_empty", 0), self.lane, n=self.e.p.warps_per_consumer)

    def wait_turn(self) -> Iterator:
        t = self.turn
        yield ("wait", self.e.bar(self.cta, "turn", self.c), t.phase, f"wait turn[{self.c}] parity {t.phase}")
        t.advance()

    def pass_turn(self) -> None:
        e, nxt = self.e, (self.c + 1) % self.e.p.consumers
        e.spans.append(Span(self.lane, "issue", e.now, e.now, stage=nxt, barrier="turn", cta=self.cta,
                            label=f"arrive turn[{nxt}] (pass the turn)"))
        e.arrive(e.bar(self.cta, "turn", nxt), self.lane, n=e.p.warps_per_consumer)

    def softmax(self, j: int, rescale: bool = True) -> Iterator:
        return _softmax(self.e, self.cta, self.lane, j, rescale)


def consumer(e: AttnEngine, cta: int, c: int) -> Iterator:
    """A consumer warpgroup of A3, A4 or A5 (their kernels' loops)."""
    p = e.p
    me = _Consumer(e, cta, c)
    B = p.blocks
    yield ("wait", e.bar(cta, "q_full", 0), 0, "wait q_full parity 0")
    if not p.pingpong:  # A3: A2's loop, K released before the softmax, V waited for after it
        for j in range(B):
            yield me.wait("K")
            end = yield from me.issue("K", j)
            yield from _wait_group(e, end)
            me.release("K")
            if j == B - 1:
                me.release_q()
            yield from me.softmax(j)
            yield me.wait("V")
            end = yield from me.issue("V", j)
            yield from _wait_group(e, end)
            me.release("V")
        yield from _epilogue(e, cta, me.lane)
        return
    # A4, A5: the first block's Q K^T in a turn of its own
    yield from me.wait_turn()
    yield me.wait("K")
    end = yield from me.issue("K", 0)
    me.pass_turn()
    yield from _wait_group(e, end)
    me.release("K")
    if B == 1:
        me.release_q()
    yield from me.softmax(0, rescale=False)  # O is still zero
    if not p.intra:  # A4: a turn issues P V_j and Q K^T_{j+1} back to back, then waits for both
        for j in range(B):
            nxt = j + 1 < B
            yield from me.wait_turn()
            yield me.wait("V")
            end = yield from me.issue("V", j)
            if nxt:
                yield me.wait("K")
                end = yield from me.issue("K", j + 1)
            me.pass_turn()
            yield from _wait_group(e, end)  # wait_group 0 (the tensor core runs groups in order)
            me.release("V")
            if nxt:
                me.release("K")
                if j + 2 == B:
                    me.release_q()
                yield from me.softmax(j + 1)
        yield from _epilogue(e, cta, me.lane)
        return
    # A5: Q K^T_{j+1} first, then P V_j; the softmax of j+1 runs while P V_j is on the tensor core
    last = B - 1
    for j in range(last):
        yield from me.wait_turn()
        yield me.wait("K")
        end_qk = yield from me.issue("K", j + 1)
        yield me.wait("V")
        end_pv = yield from me.issue("V", j)
        me.pass_turn()
        yield from _wait_group(e, end_qk)  # wait_group 1: Q K^T_{j+1} retired
        me.release("K")
        if j + 1 == last:
            me.release_q()
        yield from me.softmax(j + 1, rescale=False)
        yield from _wait_group(e, end_pv)  # wait_group 0
        me.release("V")
        yield from _cuda(e, cta, me.lane, p.cuda_time(softmax=False), j + 1,
                         f"rescale O (block {j + 1}), after P V {j}")
    yield from me.wait_turn()
    yield me.wait("V")
    end = yield from me.issue("V", last)
    me.pass_turn()
    yield from _wait_group(e, end)
    me.release("V")
    yield from _epilogue(e, cta, me.lane)
