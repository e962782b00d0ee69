"""ring_stats on synthetic decoded records (and on a trace shipped with the repository)."""
from pathlib import Path

import pytest

from gemm_ladder.choreography import ring_stats, saved
from gemm_ladder.choreography.trace import EVENTS

FULL, EMPTY = 2, 3  # tma2mma, mma2tma (cuda/kernel_enums)
TRACE = Path(__file__).resolve().parents[1] / "benchmarks/results/traces/heldout_9e9c40a/trace_step9_records.json.gz"


def _ring(n: int, depth: int, period: float, latency: float, prod_wait: float, cons_wait: float):
    """A producer and one consumer over n k-tiles of one tile: the producer issues k-tile i's
    loads at i * period after waiting prod_wait for the empty stage; the consumer waits
    cons_wait and issues its MMAs; each retires period later. Phases as the two ends keep them
    (gl_pipeline.cuh): the producer's first lap at 1, the consumer's at 0."""
    prod, cons = [], []
    for i in range(n):
        stage, lap = i % depth, i // depth
        p_phase, c_phase = (lap + 1) % 2, lap % 2
        t = i * period
        prod += [(t - prod_wait, EVENTS["EV_WAIT_BEGIN"], EMPTY, stage, p_phase, i, 0),
                 (t, EVENTS["EV_WAIT_END"], EMPTY, stage, p_phase, i, 0),
                 (t + 1, EVENTS["EV_LOAD_ISSUE"], FULL, stage, p_phase, i, 0)]
        ready = t + 1 + latency
        cons += [(ready - cons_wait, EVENTS["EV_WAIT_BEGIN"], FULL, stage, c_phase, i, 0),
                 (ready, EVENTS["EV_WAIT_END"], FULL, stage, c_phase, i, 0),
                 (ready + 2, EVENTS["EV_MMA_ISSUE"], 0, stage, c_phase, i, 0),
                 (ready + 2 + period, EVENTS["EV_MMA_DONE"], 0, stage, c_phase, i, 0)]
    return [{"block": 0, "slot": 0, "role": "producer", "events": sorted(prod)},
            {"block": 0, "slot": 1, "role": "consumer", "events": sorted(cons)}]


def test_a_consumer_waiting_for_data():
    s = ring_stats.ring_stats(_ring(40, 4, period=300.0, latency=900.0, prod_wait=10.0, cons_wait=250.0))
    assert s["period_ns"] == pytest.approx(300.0)
    assert s["consumer_wait_ns"] == pytest.approx(250.0) and s["waited_share"] == 1.0
    assert s["producer_wait_ns"] == pytest.approx(10.0)
    assert s["issue_to_ready_ns"] == pytest.approx(900.0)
    assert s["mma_ns"] == pytest.approx(300.0)
    assert s["ktiles"] == 40 - 4 - 1 and s["ctas"] == 1 and s["depth_seen"] == 4


def test_a_producer_waiting_for_empty_stages():
    s = ring_stats.ring_stats(_ring(40, 4, period=500.0, latency=800.0, prod_wait=400.0, cons_wait=40.0))
    assert s["producer_wait_ns"] == pytest.approx(400.0) and s["waited_share"] == 0.0
    assert any("producer waits for an empty stage 400 ns" in line for line in ring_stats.lines(s))


def test_a_consumer_taking_every_other_stage_is_matched_to_its_own_loads():
    records = _ring(40, 4, period=300.0, latency=700.0, prod_wait=0.0, cons_wait=200.0)
    cons = records[1]
    kept = {e[5] for e in cons["events"] if e[5] % 2 == 0}  # ping-pong: this consumer's k-tiles only
    cons["events"] = [e for e in cons["events"] if e[5] in kept]
    s = ring_stats.ring_stats(records, skip=2)
    assert s["issue_to_ready_ns"] == pytest.approx(700.0)


def test_no_steady_state():
    s = ring_stats.ring_stats(_ring(3, 4, 300.0, 900.0, 0.0, 100.0))
    assert s["ktiles"] == 0 and ring_stats.lines(s) == ["no steady-state k-tiles in the trace (too few per CTA)"]


def test_a_shipped_trace_reads_as_a_ring_the_consumers_set_the_pace_of():
    """Step 9 at 4096^3 (two CTAs decoded): the producer waits for empty stages, the consumers
    find their stages full."""
    s = ring_stats.ring_stats(saved.read_records(TRACE)["records"])
    assert s["ctas"] == 2 and s["ktiles"] > 400
    assert s["producer_wait_ns"] > 5 * s["consumer_wait_ns"]
    assert s["issue_to_ready_ns"] > s["period_ns"] > 0
