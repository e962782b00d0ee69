"""Measured traces of the attention steps, on the CPU: event buffers laid out word for word as
kernels/common/gl_trace.cuh writes them (header gt0, clk0, gt1, clk1, smid | count << 32, block,
role, -, then (clock, info) pairs), with the events in the order the kernels record them
(kernels/attention/attn_a2..a5), decode into the attention simulator's timeline: its lanes, MMA
and softmax spans, loads, hand-offs; the KPIs come out as computed by hand; A4's Q K^T that
retires with P V's wait and A5's wait_group 1 are handled; head dim 256 (rings only) says its
spans were not recorded; every role's events fit the capacity; the CLI refuses bad input and a
machine without a Hopper GPU in one line, and writes its page and summary from a run's records
(the GPU run replaced: it has not yet run on the H200)."""
from __future__ import annotations

import json

import pytest

from gemm_ladder.choreography import attention_trace as at
from gemm_ladder.choreography import saved, trace
from gemm_ladder.choreography.timeline import kpis

EV = trace.EVENTS
BAR = {v: k for k, v in trace.BARRIERS.items()}
ROLE = {v: k for k, v in trace.ROLES.items()}
T0 = 1_800_000_000_000_000_000  # a globaltimer value of today's order
CLK0 = 5_000_000
CAP_NS = 2 * 64 * 128 * 128 / 4096  # one consumer's Q K^T (or P V) at D 128, BN 128, at peak: 512 clocks (1 ns each)


class Slot:
    """One recording slot: its role and events (t in ns, name, barrier name, stage, phase, k, tile)."""

    def __init__(self, role: str, smid: int = 0):
        self.role, self.smid, self.ev = role, smid, []

    def __call__(self, t, name, bar=None, stage=0, phase=0, k=0, tile=0):
        self.ev.append((t, name, bar, stage, phase, k, tile))


def words(ctas: dict[int, dict[int, Slot]], cap: int, ns_per_clock: float = 1.0) -> list[int]:
    """The int64 buffer the tracer writes for these CTAs' slots (absent slots stay zero)."""
    stride = trace.HEADER_WORDS + 2 * cap
    out = [0] * ((max(ctas) + 1) * trace.SLOTS_PER_CTA * stride)
    for block, slots in ctas.items():
        for slot, s in slots.items():
            base = (block * trace.SLOTS_PER_CTA + slot) * stride
            t_end = int(max(e[0] for e in s.ev)) + 1
            gt0 = T0 + 1000 * block  # each CTA starts a little later
            out[base:base + 8] = [gt0, CLK0, gt0 + t_end, CLK0 + round(t_end / ns_per_clock),
                                  s.smid | (min(len(s.ev), cap) << 32), block, ROLE[s.role], 0]
            for i, (t, name, bar, stage, phase, k, tile) in enumerate(s.ev[:cap]):
                info = EV[name] | BAR.get(bar, 0) << 8 | stage << 16 | phase << 24 | (k & 0xFFFF) << 32 | tile << 48
                out[base + 8 + 2 * i:base + 10 + 2 * i] = [CLK0 + round(t / ns_per_clock), info]
    return out


# ---- the kernels' event orders ----------------------------------------------------------------

def producer(blocks: int, at_block=lambda j: 10 + 20 * j, smid: int = 0, depth: int = 2) -> Slot:
    """attn_warpspec.cuh's produce(): the Q buffer, then per block K and V (a wait on the empty
    barrier, the TMA issue)."""
    p = Slot("producer", smid)
    p(0, "EV_WAIT_BEGIN", "q_empty", 0, 1)
    p(0, "EV_WAIT_END", "q_empty", 0, 1)
    for j in range(blocks):
        t, s, ph = at_block(j), j % depth, (j // depth + 1) % 2
        for ring, dt in (("k", 0), ("v", 6)):
            p(t + dt, "EV_WAIT_BEGIN", f"{ring}_empty", s, ph, j)
            p(t + dt + 2, "EV_WAIT_END", f"{ring}_empty", s, ph, j)
            p(t + dt + 4, "EV_LOAD_ISSUE", f"{ring}_full", s, ph ^ 1, j)
    return p


BASE, HALF, SOFT, DONE, FIRST_DONE = 1000, 1100, 400, 1100, 600


def a4_consumer(c: int, blocks: int, *, spans: bool = True, tile: int = 7, smid: int = 0) -> Slot:
    """attn_a4_pingpong.cu's consumer c: the turns at BASE + n x 2 HALF + c x HALF; a turn's MMAs
    retire DONE after it starts (FIRST_DONE for the first Q K^T); each softmax takes SOFT."""
    s = Slot("consumer", smid)
    mma = (lambda *a, **kw: s(*a, **kw)) if spans else (lambda *a, **kw: None)
    s(0, "EV_TILE_BEGIN", tile=tile)
    s(0, "EV_WAIT_BEGIN", "q_full", 0, 0)
    s(BASE, "EV_WAIT_END", "q_full", 0, 0)
    T = BASE + c * HALF
    s(BASE, "EV_WAIT_BEGIN", "turn", c, 1 - c)
    s(T, "EV_WAIT_END", "turn", c, 1 - c)
    s(T, "EV_WAIT_BEGIN", "k_full", 0, 0, 0)
    s(T, "EV_WAIT_END", "k_full", 0, 0, 0)
    mma(T + 10, "EV_MMA_ISSUE", "k_full", k=0)
    s(T + 20, "EV_ARRIVE", "turn", 1 - c, 1 - c, 0)
    mma(T + FIRST_DONE, "EV_MMA_DONE", "k_full", k=0)
    s(T + FIRST_DONE + 10, "EV_ARRIVE", "k_empty", 0, 0, 0)
    mma(T + FIRST_DONE + 20, "EV_SOFTMAX_BEGIN", k=0)
    mma(T + FIRST_DONE + 20 + SOFT, "EV_SOFTMAX_END", k=0)
    for j in range(blocks):
        nxt = j + 1 < blocks
        prev_end = T + (FIRST_DONE + 30 + SOFT if j == 0 else DONE + 30 + SOFT)
        T = BASE + (j + 1) * 2 * HALF + c * HALF
        s(prev_end, "EV_WAIT_BEGIN", "turn", c, (1 - c + j + 1) % 2, j + 1)
        s(T, "EV_WAIT_END", "turn", c, (1 - c + j + 1) % 2, j + 1)
        s(T, "EV_WAIT_BEGIN", "v_full", j % 2, (j // 2) % 2, j)
        s(T, "EV_WAIT_END", "v_full", j % 2, (j // 2) % 2, j)
        mma(T + 10, "EV_MMA_ISSUE", "v_full", k=j)
        if nxt:
            s(T + 12, "EV_WAIT_BEGIN", "k_full", (j + 1) % 2, ((j + 1) // 2) % 2, j + 1)
            s(T + 15, "EV_WAIT_END", "k_full", (j + 1) % 2, ((j + 1) // 2) % 2, j + 1)
            mma(T + 20, "EV_MMA_ISSUE", "k_full", k=j + 1)
        s(T + 30, "EV_ARRIVE", "turn", 1 - c, 0, j + 1)
        mma(T + DONE, "EV_MMA_DONE", "v_full", k=j)  # Q K^T_{j+1} retired by the same wait
        s(T + DONE + 5, "EV_ARRIVE", "v_empty", j % 2, 0, j)
        if nxt:
            s(T + DONE + 10, "EV_ARRIVE", "k_empty", (j + 1) % 2, 0, j + 1)
            mma(T + DONE + 20, "EV_SOFTMAX_BEGIN", k=j + 1)
            mma(T + DONE + 20 + SOFT, "EV_SOFTMAX_END", k=j + 1)
    return s


def a4_cta(blocks: int, *, spans: bool = True, smid: int = 0) -> dict[int, Slot]:
    # the producer loads block j >= 2 once its stage is free, before consumer 0 waits for it
    load = lambda j: 10 + 20 * j if j < 2 else BASE + (j - 1) * 2 * HALF + 1200  # noqa: E731
    return {0: producer(blocks, load, smid), 1: a4_consumer(0, blocks, spans=spans, smid=smid),
            2: a4_consumer(1, blocks, spans=spans, smid=smid)}


def decoded(ctas: dict[int, dict[int, Slot]], cap: int = 4096, ns_per_clock: float = 1.0) -> list[dict]:
    return trace.decode(words(ctas, cap, ns_per_clock), max(ctas) + 1, cap)


# ---- A4 -------------------------------------------------------------------------------------------

def test_a4_cta_decodes_into_the_simulators_lanes_and_spans():
    B = 6
    recs = decoded({0: a4_cta(B)})
    assert [r["role"] for r in recs] == ["producer", "consumer", "consumer"]
    tl = at.attention_timeline(recs, "A4", {"D": 128, "S": B * 128})
    assert tl.source == "measured" and tl.step == 4
    assert tl.lanes == ["cta0/producer", "cta0/consumer0", "cta0/consumer1", "cta0/tma"]
    for c in (0, 1):
        lane = f"cta0/consumer{c}"
        mma = sorted((s for s in tl.spans if s.kind == "mma" and s.lane == lane), key=lambda s: s.start)
        qk = [s for s in mma if s.barrier == "k_full"]
        pv = [s for s in mma if s.barrier == "v_full"]
        assert [s.k for s in qk] == list(range(B)) and [s.k for s in pv] == list(range(B))
        # slots as the simulator numbers them: K stage s is slot s, V stage s is slot 2 + s
        assert [s.stage for s in qk] == [j % 2 for j in range(B)]
        assert [s.stage for s in pv] == [2 + j % 2 for j in range(B)]
        assert pv[0].label == "P V block 0 (V stage 0)"
        # A4: Q K^T_{j+1} retires with P V_j's wait (only that retirement is recorded)
        for j in range(B - 1):
            assert "retired with P V block %d's wait" % j in qk[j + 1].label
            t_done = BASE + (j + 1) * 2 * HALF + c * HALF + DONE
            assert qk[j + 1].end <= t_done
        # each group counted for its time at the peak rate, one after another on the tensor core
        assert all(s.dur == pytest.approx(CAP_NS) for s in mma)
        soft = sorted((s for s in tl.spans if s.kind == "softmax" and s.lane == lane), key=lambda s: s.k)
        assert [s.k for s in soft] == list(range(B)) and all(s.dur == SOFT for s in soft)
    allmma = sorted((s for s in tl.spans if s.kind == "mma"), key=lambda s: s.start)
    assert all(b.start >= a.end - 1e-9 for a, b in zip(allmma, allmma[1:]))  # one tensor core
    # loads: K and V of each block, from the TMA issue until consumer 0 saw the block land
    loads = [s for s in tl.spans if s.kind == "load"]
    assert sorted((s.barrier, s.k) for s in loads) == sorted((b, j) for j in range(B) for b in ("k_full", "v_full"))
    assert all(s.lane == "cta0/tma" and s.end >= s.start for s in loads)
    assert {s.stage for s in loads if s.barrier == "v_full"} == {2, 3}
    # hand-offs: the producer's loads release the consumers, the consumers pass each other the turn
    pairs = {(h.barrier, h.src_lane, h.dst_lane) for h in tl.handoffs}
    assert ("k_full", "cta0/producer", "cta0/consumer0") in pairs
    assert ("turn", "cta0/consumer0", "cta0/consumer1") in pairs
    assert ("turn", "cta0/consumer1", "cta0/consumer0") in pairs
    assert ("k_empty", "cta0/consumer1", "cta0/producer") in pairs
    assert tl.meta["tile_ids"] == {"0": [7]} and tl.meta["blocks"] == B


def test_a4_kpis_as_the_simulator_computes_them():
    B = 6
    tl = at.attention_timeline(decoded({0: a4_cta(B)}), "A4", {"D": 128})
    # the CTA runs from the producer's first wait (t = 0) to consumer 1's last release
    mk = BASE + B * 2 * HALF + HALF + DONE + 5
    k = at.measured_kpis(tl, "A4", B * 128)
    assert k["spans_recorded"] and k["sms"] == 1
    assert k["makespan_ns"] == pytest.approx(mk)
    assert k["tensor_core_busy"] == pytest.approx(2 * 2 * B * CAP_NS / mk)
    assert k["softmax_busy"] == pytest.approx(B * SOFT / mk)          # a warpgroup's share, mean of the two
    assert k["cuda_core_busy"] == pytest.approx(2 * B * SOFT / mk)    # the two never overlap here
    assert k["per_block_ns"] == pytest.approx(mk / B)
    assert k["tflops_steady"] == pytest.approx(4 * 128 * B * 128 * 128 / mk * 132 / 1e3)
    assert k["fill_ns"] == pytest.approx(BASE + 10)
    # the same figures kpis() gives the timeline (one CTA: one SM)
    assert kpis(tl)["tensor_core_busy"] == pytest.approx(k["tensor_core_busy"])


def test_ctas_group_by_sm_and_the_page_shows_block_0s():
    recs = decoded({0: a4_cta(4, smid=3), 1: a4_cta(4, smid=5)})
    tl = at.attention_timeline(recs, "A4", {"D": 128})
    assert {"cta0/consumer1", "cta1/consumer0", "cta1/tma"} <= set(tl.lanes)
    assert [list(x) for x in tl.meta["cta_sm"]] == [[0, 3], [1, 5]]
    k = at.measured_kpis(tl, "A4", 512)
    assert k["sms"] == 2 and [r["sm"] for r in k["per_sm"]] == [3, 5]
    assert k["per_sm"][0]["tensor_core_busy"] == pytest.approx(k["per_sm"][1]["tensor_core_busy"])
    assert k["grid_makespan_ns"] == pytest.approx(k["makespan_ns"] + 1000)  # CTA 1 started 1 us later
    assert at.shown_blocks(recs, 1) == [0]
    shown = at.attention_timeline(recs, "A4", {"D": 128}, ctas=[1])
    assert shown.meta["blocks_shown"] == [1] and {s.cta for s in shown.spans} == {0}


def test_head_dim_256_records_rings_only_and_says_so():
    recs = decoded({0: a4_cta(4, spans=False)})
    tl = at.attention_timeline(recs, "A4", {"D": 256})
    assert tl.meta["spans_recorded"] is False
    assert not [s for s in tl.spans if s.kind in ("mma", "softmax")]
    assert any(s.kind == "wait" and s.barrier == "turn" for s in tl.spans)
    assert any(s.kind == "load" for s in tl.spans)
    k = at.measured_kpis(tl, "A4", 256)
    assert k["spans_recorded"] is False and "head dim 256" in k["note"]
    assert k["tensor_core_busy"] is None and k["softmax_busy"] is None and k["cuda_core_busy"] is None
    assert k["makespan_ns"] > 0 and k["per_block_ns"] > 0
    json.dumps(k)  # no NaN, nothing a summary cannot hold


# ---- A5 and A2 ----------------------------------------------------------------------------------

def a5_consumer(c: int, blocks: int) -> Slot:
    """attn_a5_intra_overlap.cu: Q K^T_{j+1} issued before P V_j, waited for alone (wait_group 1)."""
    s, t = Slot("consumer"), 0
    def ev(*a, **kw):
        nonlocal t
        t += 50
        s(t, *a, **kw)
    ev("EV_TILE_BEGIN", tile=c)
    for name in ("EV_WAIT_BEGIN", "EV_WAIT_END"):
        ev(name, "q_full")
    ev("EV_WAIT_BEGIN", "turn", c)
    ev("EV_WAIT_END", "turn", c)
    ev("EV_WAIT_BEGIN", "k_full", 0, 0, 0)
    ev("EV_WAIT_END", "k_full", 0, 0, 0)
    ev("EV_MMA_ISSUE", "k_full", k=0)
    ev("EV_ARRIVE", "turn", 1 - c)
    ev("EV_MMA_DONE", "k_full", k=0)
    ev("EV_ARRIVE", "k_empty", 0, 0, 0)
    ev("EV_SOFTMAX_BEGIN", k=0)
    ev("EV_SOFTMAX_END", k=0)
    for j in range(blocks - 1):
        ev("EV_WAIT_BEGIN", "turn", c, k=j + 1)
        ev("EV_WAIT_END", "turn", c, k=j + 1)
        ev("EV_WAIT_BEGIN", "k_full", (j + 1) % 2, k=j + 1)
        ev("EV_WAIT_END", "k_full", (j + 1) % 2, k=j + 1)
        ev("EV_MMA_ISSUE", "k_full", k=j + 1)
        ev("EV_WAIT_BEGIN", "v_full", j % 2, k=j)
        ev("EV_WAIT_END", "v_full", j % 2, k=j)
        ev("EV_MMA_ISSUE", "v_full", k=j)
        ev("EV_ARRIVE", "turn", 1 - c, k=j + 1)
        ev("EV_MMA_DONE", "k_full", k=j + 1)   # wait_group 1: P V_j may still run
        ev("EV_ARRIVE", "k_empty", (j + 1) % 2, k=j + 1)
        ev("EV_SOFTMAX_BEGIN", k=j + 1)
        ev("EV_SOFTMAX_END", k=j + 1)
        ev("EV_MMA_DONE", "v_full", k=j)
        ev("EV_ARRIVE", "v_empty", j % 2, k=j)
    last = blocks - 1
    for name, args in (("EV_WAIT_BEGIN", ("turn", c)), ("EV_WAIT_END", ("turn", c)),
                       ("EV_WAIT_BEGIN", ("v_full", last % 2)), ("EV_WAIT_END", ("v_full", last % 2))):
        ev(name, *args, k=last)
    ev("EV_MMA_ISSUE", "v_full", k=last)
    ev("EV_ARRIVE", "turn", 1 - c, k=last + 1)
    ev("EV_MMA_DONE", "v_full", k=last)
    ev("EV_ARRIVE", "v_empty", last % 2, k=last)
    return s


def test_a5_wait_group_1_keeps_p_v_in_flight_until_its_own_wait():
    B = 5
    recs = decoded({0: {0: producer(B), 1: a5_consumer(0, B), 2: a5_consumer(1, B)}})
    ev = recs[1]["events"]
    when = lambda name, bar, k: next(e[0] for e in ev if trace.EVENT_NAMES[e[1]] == name  # noqa: E731
                                     and trace.BARRIERS.get(e[2]) == bar and e[5] == k)
    raw = at.attention_timeline(recs, "A5", {"D": 128}, settle=False)
    mma = [s for s in raw.spans if s.kind == "mma" and s.lane == "cta0/consumer0"]
    assert len(mma) == 2 * B and not any("retired with" in s.label for s in mma)
    for s in mma:  # each group from its issue to its own retirement
        seen = (when("EV_MMA_ISSUE", s.barrier, s.k), when("EV_MMA_DONE", s.barrier, s.k))
        assert (s.start, s.end) == pytest.approx(seen)
    pv = {s.k: s for s in mma if s.barrier == "v_full"}
    soft = {s.k: s for s in raw.spans if s.kind == "softmax" and s.lane == "cta0/consumer0"}
    for j in range(B - 1):  # P V_j in flight under the softmax of block j + 1
        assert pv[j].start < soft[j + 1].start and pv[j].end > soft[j + 1].end
    settled = at.attention_timeline(recs, "A5", {"D": 128})
    allmma = sorted((s for s in settled.spans if s.kind == "mma"), key=lambda s: s.start)
    assert len(allmma) == 4 * B and all(b.start >= a.end - 1e-9 for a, b in zip(allmma, allmma[1:]))
    assert settled.meta["tile_ids"] == {"0": [0]}


def a2_team(blocks: int, smid: int, depth: int = 2) -> Slot:
    """attn_a2_fused.cu's leader: the first DEPTH loads, then per block wait, Q K^T, softmax,
    P V, the refill with block j + DEPTH."""
    s, t = Slot("team", smid), 0
    for j in range(min(depth, blocks)):
        s(t, "EV_LOAD_ISSUE", "full", j, 0, j)
    for j in range(blocks):
        st, ph = j % depth, (j // depth) % 2
        s(t + 10, "EV_WAIT_BEGIN", "full", st, ph, j)
        s(t + 900, "EV_WAIT_END", "full", st, ph, j)
        s(t + 910, "EV_MMA_ISSUE", "k_full", k=j)
        s(t + 1100, "EV_MMA_DONE", "k_full", k=j)
        s(t + 1110, "EV_SOFTMAX_BEGIN", k=j)
        s(t + 1400, "EV_SOFTMAX_END", k=j)
        s(t + 1410, "EV_MMA_ISSUE", "v_full", k=j)
        s(t + 1600, "EV_MMA_DONE", "v_full", k=j)
        if j + depth < blocks:
            s(t + 1610, "EV_LOAD_ISSUE", "full", st, ph, j + depth)
        t += 1610
    return s


def test_a2_team_two_ctas_on_one_sm():
    B = 4
    recs = decoded({0: {0: a2_team(B, 7)}, 1: {0: a2_team(B, 9)}, 2: {0: a2_team(B, 7)}})
    tl = at.attention_timeline(recs, "A2", {"D": 128})
    assert tl.lanes[:2] == ["cta0/team", "cta0/tma"] and tl.meta["style"] == "lockstep"
    waits = [s for s in tl.spans if s.kind == "wait" and s.cta == 0]
    assert {s.barrier for s in waits} == {"kv_full"}  # A2's lockstep ring, as the model names it
    mma = [s for s in tl.spans if s.kind == "mma" and s.cta == 0]
    assert {s.barrier for s in mma} == {"kv_full"} and len(mma) == 2 * B
    loads = [s for s in tl.spans if s.kind == "load" and s.cta == 0]
    assert sorted((s.stage, s.k) for s in loads) == sorted((r * 2 + j % 2, j) for j in range(B) for r in (0, 1))
    k = at.measured_kpis(tl, "A2", B * 64)
    assert k["sms"] == 2 and [r["ctas"] for r in k["per_sm"]] == [[0, 2], [1]]
    # two CTAs on SM 7 share its tensor core: settled one after the other, never counted twice
    sm7 = sorted((s for s in tl.spans if s.kind == "mma" and s.cta in (0, 2)), key=lambda s: s.start)
    assert all(b.start >= a.end - 1e-9 for a, b in zip(sm7, sm7[1:]))
    assert at.shown_blocks(recs, 2) == [0, 2]
    shown = at.attention_timeline(recs, "A2", {"D": 128}, ctas=[0, 2])
    assert shown.meta["ctas_per_sm"] == 2 and {"cta0/team", "cta1/team"} <= set(shown.lanes)


# ---- capacity ----------------------------------------------------------------------------------

@pytest.mark.parametrize("B", [1, 2, 7, 32])
def test_every_role_fits_the_capacity(B):
    from gemm_ladder.families.attention import get
    for key, slots in (("A4", a4_cta(B)), ("A5", {0: producer(B), 1: a5_consumer(0, B)}),
                       ("A2", {0: a2_team(B, 0)})):
        st = get(key, 128)
        cap = at.events_needed(st, B * st.bn)
        assert max(len(s.ev) for s in slots.values()) <= cap - 16, key  # with the 16 spare
        recs = trace.decode(words({0: slots}, cap), 1, cap)
        assert all(len(r["events"]) == len(slots[r["slot"]].ev) for r in recs)
    assert at.events_needed(get("A5:p", 128), 4096, tiles_per_cta=3) > 3 * 32 * 15


def test_one_wave_heads():
    from gemm_ladder.families.attention import get
    assert at.one_wave_heads(get("A4", 128), 4096, 132) == 4       # 32 query blocks of 128 per head
    assert at.one_wave_heads(get("A2", 128), 4096, 132) == 4       # 64 of 64, two CTAs per SM
    assert at.one_wave_heads(get("A2", 256), 4096, 132) == 2
    assert at.one_wave_heads(get("A4", 128), 65536, 132) == 1


# ---- records files --------------------------------------------------------------------------

def test_attention_records_save_and_are_refused_by_calibrate(tmp_path):
    recs = decoded({0: a4_cta(3)})
    path = saved.write_records(tmp_path / "r.json.gz", "A4", (1, 4, 384), json.loads(json.dumps(recs)),
                               fmt=saved.ATTENTION_RECORDS_FORMAT, D=128)
    doc = saved.read_records(path)
    tl = at.attention_timeline(doc["records"], doc["step"], {"D": doc["D"]})
    assert at.measured_kpis(tl)["tensor_core_busy"] == pytest.approx(
        at.measured_kpis(at.attention_timeline(recs, "A4", {"D": 128}))["tensor_core_busy"], rel=1e-6)
    with pytest.raises(ValueError, match="an attention step's trace"):
        saved.measured_timelines(path)


# ---- the CLI ------------------------------------------------------------------------------------

def run_main(capsys, *args):
    from gemm_ladder.cli import commands
    try:
        code = commands.main(list(args))
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("args,needle", [
    (("--attention", "A9"), "invalid choice: 'A9'"),
    (("--attention", "A4", "--head-dim", "96"), "invalid choice: 96"),
    (("--attention", "A4", "--seq-len", "0"), "--seq-len"),
    (("--attention", "A4", "--step", "7"), "without --step"),
    (("--attention", "A4", "--size", "1024"), "without --size"),
    (("--head-dim", "128",), "--head-dim is for an attention trace"),
    (("--causal", "--seq-len", "1024"), "--seq-len, --causal are for an attention trace"),
])
def test_bad_attention_trace_input_is_one_line_exit_2(capsys, tmp_path, monkeypatch, args, needle):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, "trace", *args)
    assert code == 2 and "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], err
    assert not (tmp_path / "out").exists()


def test_attention_trace_without_a_hopper_gpu_is_the_gemm_traces_refusal(capsys, monkeypatch, tmp_path):
    from gemm_ladder.cli import doors
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(doors, "hopper_problem", lambda: "no CUDA GPU is available here")
    lines = []
    for args in (("--attention", "A4"), ()):
        code, out, err = run_main(capsys, "trace", *args)
        assert code == 2 and len(err.strip().splitlines()) == 1
        lines.append(err.strip())
    assert lines[0] == lines[1] and "needs a Hopper GPU (sm_90" in lines[0]


def test_attention_trace_command_writes_page_and_summary(capsys, monkeypatch, tmp_path):
    """`gemm-ladder trace --attention A4` with the GPU run replaced by the records of an A4 CTA."""
    from gemm_ladder.cli import doors
    B = 6
    recs = decoded({0: a4_cta(B), 1: a4_cta(B, smid=1)})
    fake = {"records": recs, "correct": True, "max_abs_err": 1e-3, "tolerance": 4e-3, "sdpa_max_abs_err": 2e-3,
            "ms_plain": 0.20, "ms_traced": 0.22, "overhead": 0.1, "B": 1, "H": 1, "S": B * 128, "D": 128,
            "causal": False, "tiles": 2, "blocks": 2, "tiles_per_cta": 1, "events_per_slot": 4096,
            "num_sms": 132, "overflow": []}
    monkeypatch.setattr(doors, "require_hopper", lambda *a, **k: None)
    monkeypatch.setattr(at, "measure_attention", lambda *a, **k: fake)
    code, out, err = run_main(capsys, "trace", "--attention", "A4", "--seq-len", str(B * 128),
                              "--out-dir", str(tmp_path))
    assert code == 0, out + err
    stem = tmp_path / f"trace_attention_A4_d128_s{B * 128}"
    doc = json.loads(stem.with_suffix(".json").read_text())
    s = doc["summary"]
    assert s["step"] == "A4" and s["correct"] and s["spans_recorded"] and s["shown_blocks"] == [0]
    assert s["kpis_measured"]["tensor_core_busy"] == pytest.approx(
        2 * 2 * B * CAP_NS / (BASE + B * 2 * HALF + HALF + DONE + 5))
    assert 0 < s["kpis_simulated"]["tensor_core_busy"] <= 1 and s["makespan_simulated_ns"] > 0
    assert s["makespan_ratio"] == pytest.approx(s["makespan_measured_ns"] / s["makespan_simulated_ns"])
    assert s["trace_overhead"] == pytest.approx(0.1) and len(s["kpis_measured_per_sm"]) == 2
    assert doc["timeline"]["source"] == "measured"
    page = (tmp_path / f"{stem.name}.html").read_text()
    assert "simulated vs measured" in page
    from gemm_ladder.choreography.saved import _from_page
    tls = _from_page(page)
    assert [t.source for t in tls] == ["sim", "measured"] and tls[0].step == tls[1].step == 4
    assert {"softmax", "mma"} <= {sp.kind for sp in tls[1].spans}
    assert (tmp_path / f"{stem.name}_perfetto.json").exists()
    assert (tmp_path / f"{stem.name}_records.json.gz").exists()
    assert "makespan measured (the median SM's) / simulated" in out


def test_device_session_runs_the_attention_traces():
    import re
    import subprocess
    from pathlib import Path
    script = Path(__file__).resolve().parents[1] / "scripts" / "device_session.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    stage = text.split("if has attntrace; then")[1].split("\nfi\n")[0]
    assert "A3 A4 A5" in stage and re.search(r"trace --attention \"\$s\" --head-dim 128 --seq-len 4096 "
                                             r"--out-dir \"\$W\"", stage)
    assert "--causal" not in stage and "attntrace" in "".join(text.splitlines(keepends=True)[:25])


# ---- on the H200 (scripts/device_session.sh tests) ---------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("key,D", [("A2", 128), ("A3", 128), ("A4", 128), ("A5", 128), ("A4", 256)])
def test_measured_attention_trace_on_the_gpu(key, D):
    from gpu_util import has_hopper
    if not has_hopper():
        pytest.skip("needs a CUDA sm_90 (Hopper) GPU")
    res = at.measure_attention(key, D, 1024, reps=2)
    assert res["correct"], (res["max_abs_err"], res["tolerance"])
    assert not res["overflow"], res["overflow"]
    tl = at.attention_timeline(res["records"], key, {"D": D})
    k = at.measured_kpis(tl, key, 1024)
    assert k["spans_recorded"] == (D < 256) and k["makespan_ns"] > 0
    if D < 256:
        assert 0 < k["tensor_core_busy"] <= 1 and 0 < k["softmax_busy"] <= 1
        assert len([s for s in tl.spans if s.kind == "mma" and s.cta == 0]) == 2 * (1024 // tl.meta["tile"][1]) * (
            1 if key == "A2" else 2)
