"""The simulator held out, re-derived from the traces the H200 recorded (docs/perf-notes.md item
83): the model fitted once on 7:d4 at 4096³ (benchmarks/results/traces/heldout_9e9c40a) and
predicting every other GEMM step and size must give what the newest held-out record says — a
change to the model that moves a prediction shows here, against measurements it was not fitted
on — and every GEMM prediction must stay within the issue's 15 % of the measured makespan
(worst at 9e9c40a: step 8 at 8192³, -9.8 %). Tensor-core busy is within 0.05 on 10 of the 14
runs (steps 8 and 10 at 4096³ and 8192³ miss by 0.07-0.10): guarded at that count. The attention
steps A3-A5, traced by the per-block tracer (benchmarks/results/traces/heldout_attn_3724ed0), are
re-derived too: a consumer's CUDA-core cycles per key block are measured on A3's trace (its
row is marked fitted: +3.7 %), and A4 and A5, held out, are predicted within 15 % (-6.5 % and
-11.0 %; they were -33 % and -27 % with the datasheet's softmax rates, docs/perf-notes.md
items 86 and 87); their tensor-core busy still reads ~0.1 above the measured lower bound."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gemm_ladder.choreography import heldout

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
RECORD = RESULTS / "2026-12-03_h200_sim_heldout_3684036.json"
TRACES = RESULTS / "traces" / "heldout_9e9c40a"
ATTN_TRACES = RESULTS / "traces" / "heldout_attn_3724ed0"
MAKESPAN = 0.15
BUSY = 0.05
BUSY_WITHIN_AT_LEAST = 10


def _key(row: dict) -> tuple:
    return row["step"], tuple(row["size"])


@pytest.fixture(scope="module")
def record():
    return json.loads(RECORD.read_text())


@pytest.fixture(scope="module")
def rederived():
    runs = heldout.read_runs(sorted(TRACES.glob("*_records.json.gz")) + [ATTN_TRACES])
    return heldout.held_out(runs, "7:d4@4096")


def test_the_gemm_rows_are_what_the_model_says_now(record, rederived):
    mine = {_key(r): r for r in rederived["rows"] if not r["step"].startswith("A")}
    theirs = [r for r in record["rows"] if not r["step"].startswith("A")]
    assert len(theirs) == len(mine) == 15
    for r in theirs:
        m = mine[_key(r)]
        assert m["role"] == r["role"]
        assert m["predicted_ns"] == pytest.approx(r["predicted_ns"], rel=5e-3), r["step"]
        assert m["measured_ns"] == pytest.approx(r["measured_ns"], rel=1e-4), r["step"]


def test_the_attention_rows_are_what_the_model_says_now(record, rederived):
    mine = {_key(r): r for r in rederived["rows"] if r["step"].startswith("A")}
    theirs = [r for r in record["rows"] if r["step"].startswith("A")]
    assert len(theirs) == len(mine) == 3
    for r in theirs:
        m = mine[_key(r)]
        assert m["predicted_ns"] == pytest.approx(r["predicted_ns"], rel=5e-3), r["step"]
        assert m["measured_ns"] == pytest.approx(r["measured_ns"], rel=1e-4), r["step"]
    assert mine[("A3", (128, 4096))]["role"] == "fitted"
    for step in ("A3", "A4", "A5"):
        assert abs(mine[(step, (128, 4096))]["error"]) <= MAKESPAN, step
    assert [mine[(s, (128, 4096))]["role"] for s in ("A4", "A5")] == ["predicted", "predicted"]


def test_the_cuda_core_cycles_per_block_are_a3s_and_hold_on_a4_and_a5():
    """BLOCK_CUDA_CLOCKS is the median over A3's consumers and blocks; A4 and A5, whose softmax
    overlaps the other warpgroup's far less, read the same within 2 %."""
    import statistics

    from gemm_ladder.choreography import saved
    from gemm_ladder.choreography.attention_trace import block_cuda_clocks
    from gemm_ladder.choreography.sim.attn_params import BLOCK_CUDA_CLOCKS
    for step in ("A3", "A4", "A5"):
        doc = saved.read_records(ATTN_TRACES / f"trace_attention_{step}_d128_s4096_records.json.gz")
        med = statistics.median(block_cuda_clocks(doc["records"]))
        assert med == pytest.approx(BLOCK_CUDA_CLOCKS, abs=0.5 if step == "A3" else 0.02 * BLOCK_CUDA_CLOCKS), step


def test_every_gemm_prediction_within_the_target(rederived):
    pred = [r for r in rederived["rows"] if r["role"] == "predicted" and not r["step"].startswith("A")]
    assert len(pred) == 14 and {r["step"] for r in pred} == {"7:d4", "8", "9", "9:c1", "10"}
    off = [f"{r['step']} {r['size'][0]}: {r['error']:+.1%}" for r in pred if abs(r["error"]) > MAKESPAN]
    assert not off, off
    assert sum(abs(r["busy_error"]) <= BUSY for r in pred) >= BUSY_WITHIN_AT_LEAST
    fitted = [r for r in rederived["rows"] if r["role"] == "fitted"]
    assert [(r["step"], r["size"][0]) for r in fitted] == [("7:d4", 4096), ("A3", 128)]
