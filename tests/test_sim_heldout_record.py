"""The simulator held out, re-derived from the traces the H200 recorded (docs/perf-notes.md item
83): the model fitted once on 7:d4 at 4096³ (benchmarks/results/traces/heldout_9e9c40a) and
predicting every other GEMM step and size must give what the newest held-out record says — a
change to the model that moves a prediction shows here, against measurements it was not fitted
on — and every GEMM prediction must stay within the issue's 15 % of the measured makespan
(worst at 9e9c40a: step 8 at 8192³, -9.8 %). Tensor-core busy is within 0.05 on 10 of the 14
runs (steps 8 and 10 at 4096³ and 8192³ miss by 0.07-0.10): guarded at that count. The attention
steps A3-A5, traced by the per-block tracer (benchmarks/results/traces/heldout_attn_3724ed0), are
re-derived too; A3 is predicted within 15 % (-12.9 %), A4 and A5 are not (-33 % and -27 %):
their rows must match the record, and the miss stays on the record until the model has the
mechanism (docs/perf-notes.md item 86)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from gemm_ladder.choreography import heldout

RESULTS = Path(__file__).resolve().parents[1] / "benchmarks" / "results"
RECORD = RESULTS / "2026-12-03_h200_sim_heldout_3724ed0.json"
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
    assert abs(mine[("A3", (128, 4096))]["error"]) <= MAKESPAN


def test_every_gemm_prediction_within_the_target(rederived):
    pred = [r for r in rederived["rows"] if r["role"] == "predicted" and not r["step"].startswith("A")]
    assert len(pred) == 14 and {r["step"] for r in pred} == {"7:d4", "8", "9", "9:c1", "10"}
    off = [f"{r['step']} {r['size'][0]}: {r['error']:+.1%}" for r in pred if abs(r["error"]) > MAKESPAN]
    assert not off, off
    assert sum(abs(r["busy_error"]) <= BUSY for r in pred) >= BUSY_WITHIN_AT_LEAST
    fitted = [r for r in rederived["rows"] if r["role"] == "fitted"]
    assert [(r["step"], r["size"][0]) for r in fitted] == [("7:d4", 4096)]
