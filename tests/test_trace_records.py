"""The tracer's two-slot records on the CPU: a consumer's k-tile (EV_KTILE) and a producer's
stage (EV_STAGE_LOAD), packed word for word as gl_trace.cuh's Tracer writes them (32-bit clock
stamps, the head and the tail of a k-tile), decode into the same events the kernels used to
write one by one; a 32-bit clock that wraps inside a run is unwrapped; a full slot is seen."""
from __future__ import annotations

import pytest

from gemm_ladder.choreography import trace

EV = trace.EVENTS
BAR = {v: k for k, v in trace.BARRIERS.items()}
MASK = 0xFFFFFFFFFFFFFFFF
GT0 = 1_800_000_000_000_000_000  # a globaltimer value of today's order


def info(kind: int, barrier: int, stage: int, phase: int, k: int, tile: int) -> int:
    return kind | barrier << 8 | stage << 16 | phase << 24 | k << 32 | tile << 48


def ktile_words(t: dict, stage: int, phase: int, k: int, tile: int, old_stage: int, old_phase: int,
                lag: int) -> list[int]:
    """Tracer::ktile_head and ktile_tail: t holds the clock64 values of the wait's start and
    return, the issue and, when a group retired, its retirement and release."""
    lo = lambda c: c & 0xFFFFFFFF  # noqa: E731
    retired = "retired" in t
    head = [lo(t["wait_begin"]) | ((t["wait_end"] - t["wait_begin"]) & 0xFFFFFFFF) << 32,
            info(EV["EV_KTILE"], BAR["tma2mma"], stage, phase, k, tile) | old_stage << 25 | old_phase << 31]
    release = min(t["released"] - t["retired"], 0xFFFF) if retired else 0
    tail = [lo(t["issued"]) | (lo(t["retired"]) if retired else 0) << 32,
            release | lag << 16 | BAR["mma2tma"] << 24 | int(retired) << 32]
    return head + tail


def stage_load_words(t: dict, stage: int, phase: int, k: int, tile: int) -> list[int]:
    return [(t["wait_begin"] & 0xFFFFFFFF) | ((t["wait_end"] - t["wait_begin"]) & 0xFFFFFFFF) << 32,
            info(EV["EV_STAGE_LOAD"], BAR["tma2mma"], stage, phase, k, tile),
            ((t["issued"] - t["wait_begin"]) & 0xFFFFFFFF) | BAR["mma2tma"] << 32, 0]


def buffer(slot_words: list[int], clk0: int, clk1: int, cap: int, slot: int = 1) -> list[int]:
    """One CTA's four slots; `slot` holds the words (the header as Tracer writes it, 1 ns per clock)."""
    stride = trace.HEADER_WORDS + 2 * cap
    words = [0] * (trace.SLOTS_PER_CTA * stride)
    base = slot * stride
    n = len(slot_words) // 2
    words[base:base + 7] = [GT0, clk0, GT0 + (clk1 - clk0), clk1, 7 | n << 32, 0, 2]
    words[base + trace.HEADER_WORDS:base + trace.HEADER_WORDS + len(slot_words)] = slot_words
    return [w - (1 << 64) if w >= 1 << 63 else w for w in words]  # as the int64 tensor holds them


def test_ktile_records_decode_to_the_events_they_replace_across_a_clock_wrap():
    clk0 = (1 << 32) - 3000      # the 32-bit stamps wrap during the second k-tile
    words, expected, t = [], [], clk0 + 100
    # a plain 64-bit event before the loop (the ping-pong turn), then four k-tiles, lag 1
    words += [t, info(EV["EV_WAIT_BEGIN"], BAR["turn"], 0, 1, 0, 0)]
    expected.append((t, EV["EV_WAIT_BEGIN"], BAR["turn"], 0, 1, 0, 0))
    for k in range(4):
        st, ph = k % 4, 0
        s = dict(wait_begin=t + 40, wait_end=t + 40 + 7 * k, issued=t + 300)
        if k >= 1:
            s.update(retired=t + 520, released=t + 531)
        words += ktile_words(s, st, ph, k, 9, (k - 1) % 4, 0, 1)
        expected += [(s["wait_begin"], EV["EV_WAIT_BEGIN"], BAR["tma2mma"], st, ph, k, 0),
                     (s["wait_end"], EV["EV_WAIT_END"], BAR["tma2mma"], st, ph, k, 0),
                     (s["issued"], EV["EV_MMA_ISSUE"], 0, st, ph, k, 9)]
        if k >= 1:
            expected += [(s["retired"], EV["EV_MMA_DONE"], 0, (k - 1) % 4, 0, k - 1, 9),
                         (s["released"], EV["EV_ARRIVE"], BAR["mma2tma"], (k - 1) % 4, 0, k - 1, 0)]
        t += 700
    cap = 64
    [rec] = trace.decode(buffer(words, clk0, t + 1000, cap), 1, cap)
    assert rec["slots_used"] == len(words) // 2 == 1 + 2 * 4
    got = rec["events"]
    assert [e[1:] for e in got] == [e[1:] for e in expected]
    assert [e[0] for e in got] == pytest.approx([e[0] - clk0 for e in expected])  # 1 ns per clock here


def test_stage_load_record_decodes_to_the_producers_wait_and_issue():
    clk0, t = 5000, 5200
    s = dict(wait_begin=t, wait_end=t + 65, issued=t + 119)
    [rec] = trace.decode(buffer(stage_load_words(s, 2, 1, 6, 3), clk0, t + 500, 16, slot=0), 1, 16)
    assert [e[1:] for e in rec["events"]] == [(EV["EV_WAIT_BEGIN"], BAR["mma2tma"], 2, 1, 6, 0),
                                              (EV["EV_WAIT_END"], BAR["mma2tma"], 2, 1, 6, 0),
                                              (EV["EV_LOAD_ISSUE"], BAR["tma2mma"], 2, 1, 6, 3)]
    assert [e[0] for e in rec["events"]] == pytest.approx([200, 265, 319])


def test_decoded_records_draw_a_consumer_on_the_timeline():
    """A k-tile record becomes the wait, the wgmma issue mark and the mma span of the timeline."""
    from gemm_ladder.families.keys import get_step
    clk0, t, words = 0, 1000, []
    for k in range(3):
        s = dict(wait_begin=t, wait_end=t + 10, issued=t + 200)
        if k:
            s.update(retired=t + 400, released=t + 405)
        words += ktile_words(s, k, 0, k, 0, k - 1 if k else 0, 0, 1)
        t += 600
    recs = trace.decode(buffer(words, clk0, t, 32), 1, 32)
    tl = trace.to_timeline(recs, get_step("7:d4"))
    waits = [s for s in tl.spans if s.kind == "wait" and s.barrier == "tma2mma"]
    mma = [s for s in tl.spans if s.kind == "mma"]
    assert [x for s in waits for x in (s.start, s.end)] == pytest.approx([1000, 1010, 1600, 1610, 2200, 2210])
    assert [s.k for s in mma] == [0, 1]   # the last group retires after the loop (mma_drain's event)
    assert mma[0].start == pytest.approx(1200)


def test_a_full_slot_is_seen_as_overflow():
    """The capacity check counts slots written: records take two."""
    clk0, words, t = 0, [], 100
    for k in range(3):
        words += ktile_words(dict(wait_begin=t, wait_end=t + 5, issued=t + 50), k, 0, k, 0, 0, 0, 1)
        t += 100
    cap = 6  # exactly the three records
    [rec] = trace.decode(buffer(words, clk0, t, cap), 1, cap)
    assert rec["slots_used"] == cap and len(rec["events"]) == 9


# ---- on the H200 (scripts/device_session.sh tests) ---------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("key", ["7:d4", "9", "10"])
def test_the_kernels_records_decode_to_every_k_tile(key):
    """Each consumer's k-tile records decode to one wait, one issue mark and one wgmma span
    per k-tile of each of its tiles, in order, and its producer's to one load per stage."""
    from gpu_util import has_hopper

    from gemm_ladder.choreography.timeline import WGMMA_ISSUED, lane_role
    from gemm_ladder.families.keys import get_step
    if not has_hopper():
        pytest.skip("needs a CUDA sm_90 (Hopper) GPU")
    st = get_step(key)
    res = trace.measure(st, 2048, 2048, 2048, reps=3, decode_ctas=2)
    assert res["correct"] and not res["overflow"], res["check"]
    tl = trace.to_timeline(res["records"], st)
    k_tiles = 2048 // st.bk
    for lane in tl.lanes:
        spans = [s for s in tl.spans if s.lane == lane]
        if lane_role(lane).startswith("consumer"):
            issued = [(s.tile, s.k) for s in spans if s.kind == "issue" and s.label.startswith(WGMMA_ISSUED)]
            waits = [s for s in spans if s.kind == "wait" and s.barrier == "tma2mma"]
            tiles = sorted({t for t, _ in issued})
            assert issued == [(t, k) for t in tiles for k in range(k_tiles)], lane
            assert len(waits) == len(issued) and all(w.end >= w.start for w in waits)
        if lane_role(lane) == "producer":
            loads = [s for s in spans if s.kind == "issue" and s.barrier == "tma2mma"]
            assert len(loads) % k_tiles == 0 and loads, lane
    mma = [s for s in tl.spans if s.kind == "mma" and s.cta == 0]
    assert len(mma) == len([s for s in tl.spans if s.cta == 0 and s.kind == "issue"
                            and s.label.startswith(WGMMA_ISSUED)])
