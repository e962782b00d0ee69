"""The roles of the modelled kernels, as generators the engine runs: the lockstep team, and
the warp-specialized producer, consumers and writeback."""
from __future__ import annotations

from typing import Iterator

from ..timeline import Span
from .barriers import PipelineState
from .engine import Engine
from .params import SimParams


def lockstep_team(e: Engine, cta: int) -> Iterator:
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
    return p.store_latency_ns + p.transfer_ns(nbytes)


def _announce(e: Engine, nbytes: int) -> int:
    """The bytes the producer announces with expect_tx (altered by the tx what-ifs)."""
    p = e.p
    b_share = p.b_bytes
    if e.what_if == "expect-tx-small":
        return nbytes - b_share
    if e.what_if == "expect-tx-large":
        return nbytes + b_share
    return nbytes


def producer(e: Engine, cta: int) -> Iterator:
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


def consumer(e: Engine, cta: int, ci: int) -> Iterator:
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


def writeback(e: Engine, cta: int) -> Iterator:
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
