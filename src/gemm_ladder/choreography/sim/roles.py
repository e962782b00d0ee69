"""The roles of the modelled kernels, as generators the engine runs: the lockstep team, and
the warp-specialized producer, consumers (splitting each tile, or taking tiles in turns)
and writeback."""
from __future__ import annotations

from typing import Iterator

from ..timeline import WGMMA_ISSUED, Span
from .barriers import PipelineState
from .engine import Engine
from .params import SimParams


def lockstep_team(e: Engine, cta: int) -> Iterator:
    """Steps 4-6: one team loads, waits, multiplies and writes, in turn."""
    p = e.p
    D, K = p.depth, p.k_tiles
    lane, tma = e.lane(cta, "team"), e.lane(cta, "tma")
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
        e.tma_load(cta, [cta], s, tile, g - tile * K, p.a_bytes, "A")
        e.tma_load(cta, [cta], s, tile, g - tile * K, p.b_bytes, "B")

    if p.setup_ns > 0:
        yield ("sleep", p.setup_ns)
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
            yield ("sleep", p.mma_issue_ns)
            end = e.wgmma(cta, lane, st.stage, tile, k, f"wgmma k={k} (stage {st.stage})")
            e.spans.append(Span(lane, "issue", e.now, e.now, stage=st.stage, tile=tile, k=k, cta=cta,
                                label=f"{WGMMA_ISSUED} k={k} (stage {st.stage})"))
            # the same loop latency as a warp-specialized consumer's (the gap), the refill
            # load and the CTA barrier before it included
            loop = p.consumer_gap_ns - p.mma_issue_ns - p.mma_wait_ns
            if D == 1:
                yield ("until", end)                     # wait_group(0): stage reused next
                yield ("sleep", p.mma_wait_ns)
                e.release(cta, st.stage, lane, [], 0)
            else:
                if prev_end is not None:
                    yield ("until", prev_end)            # wait_group(1): k-1 done, its stage free
                    yield ("sleep", p.mma_wait_ns)
                    e.release(cta, (st.stage - 1) % D, lane, [], 0)
                if k + D - 1 < K:
                    yield from load(g + D - 1, tile)
                    loop -= 2 * p.issue_ns
            yield ("sleep", max(0.0, loop))
            prev_end = end
            st.advance()
        yield ("until", prev_end)                        # wait_group(0)
        e.release(cta, (st.stage - 1) % D, lane, [], 0)
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
    return p.store_latency_ns + p.transfer_ns(nbytes)


def _announce(e: Engine, nbytes: int) -> int:
    """The bytes the producer announces with expect_tx (altered by the tx what-ifs)."""
    p = e.p
    if e.what_if == "expect-tx-small":
        return nbytes - p.b_bytes
    if e.what_if == "expect-tx-large":
        return nbytes + p.b_bytes
    if e.what_if == "local-tx":           # only what this CTA's producer issues: A + its B half
        return p.a_bytes + p.b_bytes // p.cluster
    return nbytes


def producer(e: Engine, cta: int) -> Iterator:
    """The TMA producer: per k-tile, wait for the stage to be free (in every CTA it writes
    to), announce the bytes that will land in this CTA's stage, load A and B (in a cluster:
    this CTA's half of B, multicast to every CTA)."""
    p = e.p
    lane = e.lane(cta, "producer")
    st = PipelineState(p.depth, 0, 0 if e.what_if == "both-phase-0" else 1)
    announce = _announce(e, p.stage_bytes)
    if p.cluster > 1:
        b_piece = (f"B half {cta}", list(range(p.cluster)), p.b_bytes // p.cluster)
    else:
        b_piece = ("B", [cta], p.b_bytes)
    pieces = [("A", [cta], p.a_bytes), b_piece]
    if p.setup_ns > 0:
        yield ("sleep", p.setup_ns)
    for tile in range(p.tiles_per_cta):
        for k in range(p.k_tiles):
            s = st.stage
            yield ("wait", e.bar(cta, "mma2tma", s), st.phase, f"wait mma2tma[{s}] parity {st.phase}")
            t0 = e.now
            yield ("sleep", p.issue_ns)
            e.arrive(e.bar(cta, "tma2mma", s), lane, expect=announce)
            for what, dests, nb in pieces:
                yield ("sleep", p.issue_ns)
                e.tma_load(cta, dests, s, tile, k, nb, what)
            e.spans.append(Span(lane, "issue", t0, e.now, stage=s, barrier="tma2mma", tile=tile, k=k,
                                cta=cta, label=f"arrive.expect_tx(tma2mma[{s}], {announce} B) + "
                                               f"TMA {', '.join(w for w, _, _ in pieces)} k={k}"))
            st.advance()
    yield from cluster_exit(e, lane)


def _mainloop(e: Engine, cta: int, ci: int, tile: int, st: PipelineState,
              turn_to: int | None = None, keep_last: bool = False) -> Iterator:
    """One tile's k-tiles, as the kernels' consumer loop: wait for the stage, issue its wgmma
    group (``mma_issue_ns``), wgmma.wait_group(1) for the previous group and release its
    stage (``mma_wait_ns`` after that group is done), loop back (the rest of
    ``consumer_gap_ns``): one consumer issues at most one k-tile per gap. keep_last: the
    last stage is done with but not handed back (the epilogue borrows it; the writeback
    arrives for this consumer once the chunks staged there are stored)."""
    p = e.p
    lane = e.lane(cta, f"consumer{ci}")
    loop = max(0.0, p.consumer_gap_ns - p.mma_issue_ns - p.mma_wait_ns)
    # where the releases arrive: every CTA's empty barrier (the refill writes into all of
    # them), or only this CTA's when the what-if drops the remote arrivals
    peers = [cta] if e.what_if == "local-empty" else list(range(p.cluster))

    def release(stage: int) -> None:
        e.spans.append(Span(lane, "issue", e.now, e.now, stage=stage, barrier="mma2tma", tile=tile, cta=cta,
                            label=f"arrive mma2tma[{stage}]" + (" (both CTAs)" if len(peers) > 1 else "")))
        e.release(cta, stage, lane, peers, p.warps_per_consumer)

    prev: tuple[float, int] | None = None
    for k in range(p.k_tiles):
        s = st.stage
        yield ("wait", e.bar(cta, "tma2mma", s), st.phase, f"wait tma2mma[{s}] parity {st.phase}")
        yield ("sleep", p.mma_issue_ns)
        end = e.wgmma(cta, lane, s, tile, k, f"wgmma k={k} (stage {s})")
        e.spans.append(Span(lane, "issue", e.now, e.now, stage=s, tile=tile, k=k, cta=cta,
                            label=f"{WGMMA_ISSUED} k={k} (stage {s})"))
        if p.depth == 1:
            # one slot: it must be released before the next load can land, so
            # wait_group(0) (keeping one wgmma in flight would deadlock here)
            yield ("until", end)
            yield ("sleep", p.mma_wait_ns)
            release(s)
            yield ("sleep", loop)
            st.advance()
            continue
        if prev is not None:
            yield ("until", prev[0])                     # wgmma.wait_group(1)
            yield ("sleep", p.mma_wait_ns)
            release(prev[1])
            yield ("sleep", loop)
        prev = (end, s)
        st.advance()
    if turn_to is not None:
        # ping-pong: every wgmma of this tile is issued, the other consumer may start
        e.arrive(e.bar(cta, "turn", turn_to), lane, n=p.warps_per_consumer)
    if prev is not None:
        yield ("until", prev[0])                         # wgmma.wait_group(0)
        if keep_last:
            e.release(cta, prev[1], lane, [], 0)         # done reading; no arrival (yet)
        else:
            release(prev[1])


def consumer(e: Engine, cta: int, ci: int) -> Iterator:
    """A consumer warpgroup. Cooperative (steps 7-9): every consumer takes part in every
    tile (its tile_m rows) and all of them read each stage; the epilogue stages the tile
    chunk by chunk into the CTA's staging ring (shared by the consumers: each stages its rows
    and arrives). Ping-pong (step 10): consumer ci takes tiles ci, ci + n, ...; it starts a
    mainloop when the other has issued its last wgmma (the turn barriers), skips the other's
    k-tiles in the ring, and stages its tiles chunk by chunk into its own epilogue ring."""
    p = e.p
    lane = e.lane(cta, f"consumer{ci}")
    st = PipelineState(p.depth, 0, 0)
    n = p.num_consumers
    if p.pingpong:
        for _ in range(ci * p.k_tiles):
            st.advance()
        turn = PipelineState(1, 0, 1 if ci == 0 else 0)   # consumer 0 goes first
        slots = p.staging_stages // n                      # each consumer's own epilogue ring
        acc = PipelineState(slots, 0, 1)
        tiles = range(ci, p.tiles_per_cta, n)
    else:
        acc = PipelineState(p.staging_stages, 0, 1)
        tiles = range(p.tiles_per_cta)
    for tile in tiles:
        if p.pingpong:
            yield ("wait", e.bar(cta, "turn", ci), turn.phase, f"wait turn[{ci}] parity {turn.phase}")
            turn.advance()
        lent = p.lent_chunks
        yield from _mainloop(e, cta, ci, tile, st, (ci + 1) % n if p.pingpong else None, keep_last=lent > 0)
        if p.pingpong:
            for _ in range((n - 1) * p.k_tiles):
                st.advance()
        borrowed = (st.stage - 1) % p.depth
        for ch in range(p.chunks):
            if ch < lent:  # borrowed stage: no slot to wait for
                if ch == 1:  # its B part: every consumer's wgmma on it done (the consumers' named barrier)
                    if e.what_if != "borrow-no-sync":
                        yield ("until", e.tc_free.get(cta, e.now))
                    busy = e.tc_free.get(cta, 0.0)
                    if busy > e.now:  # (the epilogue: the CTA's last wgmmas are this tile's last k-tile's)
                        e.hazard(f"early release: {e.role(lane)} staged chunk 1 of tile {tile} into the B part "
                                 f"of borrowed stage {borrowed}{e.cta_txt(cta)} at t={e.now:.0f} ns while a "
                                 f"wgmma reading that B tile runs until t={busy:.0f} ns - without the consumers' "
                                 f"meeting before the B part is reused, the one that finished first overwrites "
                                 f"operands its partner is still multiplying")
                t0 = e.now
                yield ("sleep", p.epilogue_chunk_time)
                e.spans.append(Span(lane, "epilogue", t0, e.now, stage=borrowed, tile=tile, k=ch, cta=cta,
                                    barrier="lent_full",
                                    label=f"epilogue tile {tile} chunk {ch}: registers -> borrowed stage {borrowed}"))
                e.arrive(e.bar(cta, "lent_full", ch), lane)
                continue
            a = ci * slots + acc.stage if p.pingpong else acc.stage
            yield ("wait", e.bar(cta, "ld2mma", a), acc.phase, f"wait ld2mma[{a}] parity {acc.phase}")
            t0 = e.now
            yield ("sleep", p.epilogue_chunk_time)
            chunk = f" chunk {ch}" if p.chunks > 1 else ""
            e.spans.append(Span(lane, "epilogue", t0, e.now, stage=a, tile=tile, k=ch, cta=cta,
                                label=f"epilogue tile {tile}{chunk}: registers -> SMEM staging[{a}]"))
            e.arrive(e.bar(cta, "mma2ld", a), lane)
            acc.advance()
    yield from cluster_exit(e, lane)


def writeback(e: Engine, cta: int) -> Iterator:
    """The writeback warp: per staged chunk (or, ping-pong, per tile in order, alternating
    consumers' slots), wait until it is staged, TMA-store it, wait until the store has read
    the slot (cp.async.bulk.wait_group.read), and free the slot."""
    p = e.p
    lane = e.lane(cta, "writeback")
    slots = p.staging_stages // p.num_consumers if p.pingpong else p.staging_stages
    if p.pingpong:  # a ring per consumer
        states = [PipelineState(slots, 0, 0) for _ in range(p.num_consumers)]
    else:
        states = [PipelineState(p.staging_stages, 0, 0)]
    lent = p.lent_chunks
    for tile in range(p.tiles_per_cta):
        st = states[tile % len(states)]
        if lent:  # borrowed stage: store its chunks, then hand the stage back for the consumers
            last = tile * p.k_tiles + p.k_tiles - 1
            stage, parity = last % p.depth, tile & 1
            for ch in range(lent):
                yield ("wait", e.bar(cta, "lent_full", ch), parity, f"wait lent_full[{ch}] parity {parity}")
                yield ("sleep", p.issue_ns)
                t0 = e.now
                yield ("sleep", _store_time(p, p.store_chunk_bytes))
                e.spans.append(Span(lane, "store", t0, e.now, stage=stage, tile=tile, k=ch, cta=cta,
                                    barrier="lent_full",
                                    label=f"TMA store tile {tile} chunk {ch} from borrowed stage {stage}"))
            peers = [cta] if e.what_if == "local-empty" else list(range(p.cluster))
            n = p.warps_per_consumer * p.consumers_per_stage
            e.spans.append(Span(lane, "issue", e.now, e.now, stage=stage, barrier="mma2tma", tile=tile, cta=cta,
                                label=f"arrive mma2tma[{stage}] x{n} for the consumers" +
                                      (" (both CTAs)" if len(peers) > 1 else "")))
            for c in peers:
                e.arrive(e.bar(c, "mma2tma", stage), lane, n=n)
        for ch in range(lent, p.chunks):
            a = (tile % p.num_consumers) * slots + st.stage if p.pingpong else st.stage
            yield ("wait", e.bar(cta, "mma2ld", a), st.phase, f"wait mma2ld[{a}] parity {st.phase}")
            yield ("sleep", p.issue_ns)
            t0 = e.now
            yield ("sleep", _store_time(p, p.store_chunk_bytes))
            chunk = f" chunk {ch}" if p.chunks > 1 else ""
            e.spans.append(Span(lane, "store", t0, e.now, stage=a, tile=tile, k=ch, cta=cta,
                                label=f"TMA store tile {tile}{chunk} from staging[{a}]"))
            e.arrive(e.bar(cta, "ld2mma", a), lane)
            st.advance()
    yield from cluster_exit(e, lane)


def cluster_exit(e: Engine, lane: str) -> Iterator:
    """The cluster barrier before exit: nobody leaves while a peer may still write into its
    shared memory or arrive on its barriers (left out by the no-exit-sync what-if)."""
    if e.p.cluster > 1 and e.what_if != "no-exit-sync":
        b = e.bar(CLUSTER_WIDE, "cluster_sync", 0)
        e.arrive(b, lane)
        yield ("wait", b, 0, "barrier.cluster.wait (exit)")


CLUSTER_WIDE = -1  # the "CTA" of the cluster barrier, which lives in no CTA's shared memory
