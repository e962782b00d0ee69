"""The attention steps' trace records on the CPU: a consumer's key block (EV_ATTN_BLOCK, four
slots) and the producer's K and V stages (EV_STAGE_LOAD, two each), packed word for word as
kernels/attention/attn_warpspec.cuh's BlockRecord and gl_trace.cuh's Tracer write them (32-bit
clock stamps), decode into the events the kernels used to write one at a time: a hand-packed
A5 block into its fifteen, in order; and the event streams of A3, A4 (with and without its MMA
and softmax spans) and A5, packed as records, into the same events, timeline and KPIs as
written one by one, across a 32-bit clock wrap."""
from __future__ import annotations

import pytest

from gemm_ladder.choreography import attention_trace as at
from gemm_ladder.choreography import trace
from test_attention_trace import ROLE, T0, Slot, a4_consumer, a5_consumer, producer

EV = trace.EVENTS
BAR = {v: k for k, v in trace.BARRIERS.items()}
F = trace.BLOCK
LO = 0xFFFFFFFF
CLK0 = (1 << 32) - 20_000  # the stamps' low 32 bits wrap some 20 us into the run

# (event, barrier) -> its 32-bit word in a block record (attn_warpspec.cuh's BlockRecord)
STAMP = {("EV_WAIT_BEGIN", "turn"): 12, ("EV_WAIT_END", "turn"): 13, ("EV_ARRIVE", "turn"): 14,
         ("EV_WAIT_BEGIN", "k_full"): 0, ("EV_WAIT_END", "k_full"): 1, ("EV_MMA_ISSUE", "k_full"): "qk",
         ("EV_MMA_DONE", "k_full"): 4, ("EV_ARRIVE", "k_empty"): 5, ("EV_SOFTMAX_BEGIN", None): 6,
         ("EV_SOFTMAX_END", None): 7, ("EV_WAIT_BEGIN", "v_full"): 8, ("EV_WAIT_END", "v_full"): 9,
         ("EV_MMA_ISSUE", "v_full"): "pv", ("EV_MMA_DONE", "v_full"): 10, ("EV_ARRIVE", "v_empty"): 11}


def info(name: str, bar: str | None, stage: int = 0, phase: int = 0, k: int = 0, tile: int = 0) -> int:
    return EV[name] | BAR.get(bar, 0) << 8 | stage << 16 | phase << 24 | (k & 0xFFFF) << 32 | tile << 48


def block_words(ev: list[tuple]) -> list[int]:
    """One key block's events (t, name, barrier, stage, phase, k, tile), as the kernel's loop
    met them -> the record's eight words, as BlockRecord::write packs them."""
    u, flags, fields = [0] * 16, 0, {}
    for t, name, bar, stage, phase, k, _ in ev:
        fields[(name, bar)] = (stage, phase, k)
        i = STAMP[(name, bar)]
        if isinstance(i, int):  # the MMAs' issues are cycles after their waits (below)
            u[i] = (CLK0 + t) & LO
    kk = next(fields[key][2] for key in (("EV_WAIT_BEGIN", "k_full"), ("EV_WAIT_BEGIN", "turn")) if key in fields)
    when = {(name, bar): CLK0 + t for t, name, bar, *_ in ev}
    for key, bit in ((("EV_WAIT_BEGIN", "turn"), "TURN"), (("EV_WAIT_BEGIN", "k_full"), "K"),
                     (("EV_MMA_ISSUE", "k_full"), "QK_ISSUE"), (("EV_MMA_DONE", "k_full"), "QK_DONE"),
                     (("EV_SOFTMAX_BEGIN", None), "SOFTMAX"), (("EV_WAIT_BEGIN", "v_full"), "V"),
                     (("EV_MMA_ISSUE", "v_full"), "PV")):
        flags |= F[bit] if key in fields else 0
    if ("EV_WAIT_BEGIN", "v_full") in fields and fields[("EV_WAIT_BEGIN", "v_full")][2] == kk - 1:
        flags |= F["V_LAG"]
    ks, kph, _ = fields.get(("EV_WAIT_BEGIN", "k_full"), (0, 0, 0))
    vs, vph, _ = fields.get(("EV_WAIT_BEGIN", "v_full"), (0, 0, 0))
    group, wait_phase, _ = fields.get(("EV_WAIT_BEGIN", "turn"), (0, 0, 0))
    to, pass_phase, _ = fields.get(("EV_ARRIVE", "turn"), (0, 0, 0))
    where = ks | kph << 4 | vs << 5 | vph << 9 | group << 10 | wait_phase << 12 | to << 13 | pass_phase << 15
    sat = lambda a, b: min((when[a] - when[b]) & LO, 0xFFFF) if a in when else 0  # noqa: E731
    u[2] = EV["EV_ATTN_BLOCK"] | (kk & 0xFFFF) << 8 | flags << 24
    u[3] = where | sat(("EV_MMA_ISSUE", "k_full"), ("EV_WAIT_END", "k_full")) << 16
    u[15] = sat(("EV_MMA_ISSUE", "v_full"), ("EV_WAIT_END", "v_full"))
    return [u[2 * i] | u[2 * i + 1] << 32 for i in range(8)]


def stage_words(wait_begin, wait_end, load) -> list[int]:
    """A producer's stage (its empty barrier's wait, the load) -> Tracer::stage_load's words."""
    (t0, _, empty, stage, phase, k, _), (t1, *_), (t2, _, full, *_, tile) = wait_begin, wait_end, load
    c0 = CLK0 + t0
    return [(c0 & LO) | (t1 - t0) << 32, info("EV_STAGE_LOAD", full, stage, phase, k, tile),
            ((t2 - t0) & LO) | BAR[empty] << 32, 0]


def as_records(s: Slot) -> list[list[int]]:
    """A slot's events as the A3-A5 kernels record them: each key block of a consumer one
    record (from its turn's wait, or in A3 its K wait, to the next), each stage of the producer
    one, the rest (the tile, the Q buffer's waits) one event each (two words)."""
    items, block = [], []
    starts = ("turn",) if any(e[2] == "turn" for e in s.ev) else ("k_full",)

    def flush():
        if block:
            items.append(block_words(block))
            block.clear()
    ev = list(s.ev)
    while ev:
        e = ev.pop(0)
        t, name, bar, stage, phase, k, tile = e
        if s.role == "producer" and bar in ("k_empty", "v_empty"):
            items.append(stage_words(e, ev.pop(0), ev.pop(0)))
        elif (name, bar) in STAMP:
            if name == "EV_WAIT_BEGIN" and bar in starts:
                flush()
            block.append(e)
        else:
            flush()
            items.append([CLK0 + t, info(name, bar, stage, phase, k, tile)])
    flush()
    return items


def buffer(ctas: dict[int, dict[int, Slot]], cap: int, records: bool) -> list[int]:
    """The int64 buffer of these CTAs' slots: events one at a time (clock64, info), or as the
    A3-A5 kernels write them (:func:`as_records`)."""
    stride = trace.HEADER_WORDS + 2 * cap
    out = [0] * ((max(ctas) + 1) * trace.SLOTS_PER_CTA * stride)
    for block, slots in ctas.items():
        for slot, s in slots.items():
            base = (block * trace.SLOTS_PER_CTA + slot) * stride
            items = as_records(s) if records else [[CLK0 + e[0], info(*e[1:])] for e in s.ev]
            body = [w for item in items for w in item]
            assert len(body) <= 2 * cap
            t_end = max(e[0] for e in s.ev) + 1
            out[base:base + 8] = [T0, CLK0, T0 + t_end, CLK0 + t_end, s.smid | (len(body) // 2) << 32, block,
                                  ROLE[s.role], 0]
            out[base + 8:base + 8 + len(body)] = body
    return [w - (1 << 64) if w >= 1 << 63 else w for w in out]  # as the int64 tensor holds them


def a3_consumer(blocks: int, c: int = 0) -> Slot:
    """attn_a3_warp_specialized.cu's consumer c: per block K's wait, Q K^T, K's release, the
    softmax, V's wait, P V, V's release (the two consumers' MMAs at the same time)."""
    s, t = Slot("consumer"), 100 + 37 * c
    s(0, "EV_TILE_BEGIN", tile=c)
    s(1, "EV_WAIT_BEGIN", "q_full")
    s(t, "EV_WAIT_END", "q_full")
    for j in range(blocks):
        ring = (j % 2, (j // 2) % 2)  # the K and V stage and phase
        for dt, name, bar, fields in (
                (5, "EV_WAIT_BEGIN", "k_full", ring), (260, "EV_WAIT_END", "k_full", ring),
                (275, "EV_MMA_ISSUE", "k_full", (0, 0)), (800, "EV_MMA_DONE", "k_full", (0, 0)),
                (811, "EV_ARRIVE", "k_empty", ring), (820, "EV_SOFTMAX_BEGIN", None, (0, 0)),
                (1300, "EV_SOFTMAX_END", None, (0, 0)), (1390, "EV_WAIT_BEGIN", "v_full", ring),
                (1395, "EV_WAIT_END", "v_full", ring), (1410, "EV_MMA_ISSUE", "v_full", (0, 0)),
                (1930, "EV_MMA_DONE", "v_full", (0, 0)), (1938, "EV_ARRIVE", "v_empty", ring)):
            s(t + dt, name, bar, *fields, j)
        t += 2000
    return s


def as_kernel(s: Slot) -> Slot:
    """test_attention_trace's slots with each load and release in the phase of its ring's
    wait and each turn's wait under the block of its pass, as the kernels name them (their
    record keeps one stage and phase per ring, one block per turn)."""
    phase, out = {}, []
    for t, name, bar, stage, ph, k, tile in s.ev:
        if name == "EV_WAIT_BEGIN" and bar in ("k_full", "v_full", "k_empty", "v_empty"):
            phase[(bar[0], k)] = ph
        elif name in ("EV_LOAD_ISSUE", "EV_ARRIVE") and bar in ("k_full", "v_full", "k_empty", "v_empty"):
            ph = phase[(bar[0], k)]
        out.append((t, name, bar, stage, ph, k, tile))
    passes = [i for i, e in enumerate(out) if e[1] == "EV_ARRIVE" and e[2] == "turn"]
    for i, e in enumerate(out):
        if e[2] == "turn" and e[1] != "EV_ARRIVE":
            k = out[min(j for j in passes if j > i)][5]
            out[i] = (*e[:5], k, e[6])
    s.ev = out
    return s


def ctas(key: str, blocks: int) -> dict[int, dict[int, Slot]]:
    if key == "A3":
        c = {0: {0: producer(blocks), 1: a3_consumer(blocks, 0), 2: a3_consumer(blocks, 1)}}
    elif key == "A5":
        c = {0: {0: producer(blocks), 1: a5_consumer(0, blocks), 2: a5_consumer(1, blocks)}}
    else:
        spans = key == "A4"
        c = {0: {0: producer(blocks), 1: a4_consumer(0, blocks, spans=spans), 2: a4_consumer(1, blocks, spans=spans)},
             1: {0: producer(blocks, smid=1), 1: a4_consumer(0, blocks, spans=spans, smid=1)}}
    return {b: {i: as_kernel(s) for i, s in slots.items()} for b, slots in c.items()}


def test_the_flags_are_the_kernels():
    assert F == {"TURN": 1, "K": 2, "QK_ISSUE": 4, "QK_DONE": 8, "SOFTMAX": 16, "V": 32, "PV": 64, "V_LAG": 128}
    assert trace.RECORDS[EV["EV_ATTN_BLOCK"]][0] == 4


def test_an_a5_block_record_decodes_to_its_fifteen_events_in_order():
    """Block 3 of A5's loop (its turn, K_3 and Q K^T_3, V_2 and P V_2), packed by hand as the
    kernel's comment lays the words out; its clocks cross 2^32."""
    c = lambda t: (CLK0 + t) & LO  # noqa: E731
    u = [0] * 16
    u[12], u[13] = c(19_990), c(20_010)             # the turn's wait (group 1, phase 0) ...
    u[0], u[1] = c(20_020), c(20_100)               # K_3's wait (stage 1, phase 1)
    u[8], u[9] = c(20_150), c(20_160)               # V_2's wait (stage 0, phase 1)
    u[14] = c(20_200)                               # the turn passed (to group 0, phase 1)
    u[4], u[5], u[6], u[7] = c(20_600), c(20_610), c(20_620), c(21_100)  # Q K^T retired, K released, softmax
    u[10], u[11] = c(21_300), c(21_305)             # P V retired, V released
    flags = sum(F[f] for f in ("TURN", "K", "QK_ISSUE", "QK_DONE", "SOFTMAX", "V", "PV", "V_LAG"))
    where = 1 | 1 << 4 | 0 << 5 | 1 << 9 | 1 << 10 | 0 << 12 | 0 << 13 | 1 << 15
    u[2] = EV["EV_ATTN_BLOCK"] | 3 << 8 | flags << 24
    u[3] = where | 30 << 16                         # Q K^T issued 30 cycles after K's wait
    u[15] = 25                                      # P V issued 25 cycles after V's wait
    words = [u[2 * i] | u[2 * i + 1] << 32 for i in range(8)]
    cap = 8
    buf = [0] * (trace.SLOTS_PER_CTA * (trace.HEADER_WORDS + 2 * cap))
    base = trace.HEADER_WORDS + 2 * cap  # slot 1
    buf[base:base + 8] = [T0, CLK0, T0 + 30_000, CLK0 + 30_000, 4 << 32, 0, ROLE["consumer"], 0]
    buf[base + 8:base + 16] = words
    [rec] = trace.decode(buf, 1, cap)
    assert rec["slots_used"] == 4
    assert [(t, trace.EVENT_NAMES[kind], trace.BARRIERS.get(bar), stage, phase, k)
            for t, kind, bar, stage, phase, k, _ in rec["events"]] == [
        (19_990, "EV_WAIT_BEGIN", "turn", 1, 0, 3), (20_010, "EV_WAIT_END", "turn", 1, 0, 3),
        (20_020, "EV_WAIT_BEGIN", "k_full", 1, 1, 3), (20_100, "EV_WAIT_END", "k_full", 1, 1, 3),
        (20_130, "EV_MMA_ISSUE", "k_full", 0, 0, 3),
        (20_150, "EV_WAIT_BEGIN", "v_full", 0, 1, 2), (20_160, "EV_WAIT_END", "v_full", 0, 1, 2),
        (20_185, "EV_MMA_ISSUE", "v_full", 0, 0, 2), (20_200, "EV_ARRIVE", "turn", 0, 1, 3),
        (20_600, "EV_MMA_DONE", "k_full", 0, 0, 3), (20_610, "EV_ARRIVE", "k_empty", 1, 1, 3),
        (20_620, "EV_SOFTMAX_BEGIN", None, 0, 0, 3), (21_100, "EV_SOFTMAX_END", None, 0, 0, 3),
        (21_300, "EV_MMA_DONE", "v_full", 0, 0, 2), (21_305, "EV_ARRIVE", "v_empty", 0, 1, 2)]


@pytest.mark.parametrize("key", ["A3", "A4", "A4-rings", "A5"])
def test_records_decode_to_the_events_written_one_at_a_time(key):
    B, cap = 7, 512
    c = ctas(key, B)
    one, rec = (trace.decode(buffer(c, cap, records), len(c), cap) for records in (False, True))
    assert [(r["block"], r["slot"]) for r in one] == [(r["block"], r["slot"]) for r in rec]
    for a, b in zip(one, rec):
        assert b["events"] == a["events"], (a["block"], a["slot"])
        assert b["slots_used"] < a["slots_used"]  # four slots a block where there were up to fifteen
    step = key[:2]
    D = 256 if key == "A4-rings" else 128
    tl_one, tl_rec = (at.attention_timeline(r, step, {"D": D}) for r in (one, rec))
    assert tl_rec.spans == tl_one.spans and tl_rec.handoffs == tl_one.handoffs and tl_rec.meta == tl_one.meta
    assert at.measured_kpis(tl_rec, step, B * 128) == at.measured_kpis(tl_one, step, B * 128)
    kinds = {s.kind for s in tl_rec.spans}
    assert ({"mma", "softmax"} <= kinds) == (key != "A4-rings") and {"wait", "load"} <= kinds


def test_a_consumers_records_fit_the_capacity_with_room_to_spare():
    """A block takes four slots, where the events took up to fifteen: the capacity for the
    events holds the records with room left (the overflow check counts slots)."""
    from gemm_ladder.families.attention import get
    for key, B in (("A5", 32), ("A4", 32), ("A3", 32)):
        st = get(key, 128)
        cap = at.events_needed(st, B * st.bn)
        c = ctas(key, B)
        recs = trace.decode(buffer(c, cap, True), len(c), cap)
        assert max(r["slots_used"] for r in recs) <= 4 * (B + 1) + 3 < cap - 4, key
