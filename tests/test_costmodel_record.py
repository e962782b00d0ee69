"""The cost model held to the suite's measurements (docs/perf-notes.md items 78 and 81): the newest
cost-model record (benchmarks/results/*_costmodel_*.json, scripts/costmodel_record.py) holds,
for every suite shape, the time the model predicts for its pick beside the measured time and,
from a suite run that timed every candidate (`--autotune`), how far the pick is from the
fastest candidate.

Tolerance: every shape within 40 %, the geomean error within 15 %; the pick within 3 % of the
fastest candidate on at least 85 % of the shapes, and a geomean loss to it of at most 2 %. The
prediction's two constants were fitted on the 16 squares (worst +11 % there); of the 218 held-out
rows at d073294, 17 are beyond 25 % (worst -39.7 %): the small-M family's memory-bound shapes on
32-134 MB of weights (smallm:n64, and 1000^3 on smallm:n128m2), which stream below the copy rate
the model assumes. The picks: 89 % within 3 %, geomean loss 0.9 %, worst 128 x 2048 x 16384 (1.15x).
The issue's targets (25 % per shape, 10 % geomean, 90 % of picks) are not met yet; this guards
what holds: a model or kernel change that moves a shape past these fails here, and a record
whose predictions are not the current model's is stale."""
from __future__ import annotations

import json
import math

import pytest

from gemm_ladder.families import cost_model
from gemm_ladder.library import select
from gemm_ladder.measure import costmodel

TOLERANCE = 0.40
PICK_WITHIN_3PCT = 0.85
PICK_GEOMEAN_LOSS = 1.02
GEOMEAN_TOLERANCE = 0.15
PATH = costmodel.newest("costmodel")


@pytest.fixture(scope="module")
def record():
    if PATH is None:
        pytest.skip("no cost-model record in this checkout")
    return json.loads(PATH.read_text())


def test_every_shape_within_the_tolerance(record):
    rows = record["rows"]
    assert len(rows) >= 100
    off = [f"{r['shape']} {r['dtype']} {r['kernel']}: {r['error']:+.1%}" for r in rows if abs(r["error"]) > TOLERANCE]
    assert not off, off
    geo = math.exp(sum(abs(math.log1p(r["error"])) for r in rows) / len(rows)) - 1
    assert geo <= GEOMEAN_TOLERANCE, geo
    assert {r["fitted_on"] for r in rows if r["group"] == costmodel.FITTED_ON} == {"fitted"}
    assert any(r["fitted_on"] == "held out" for r in rows)


def test_the_picks_against_the_fastest_candidate(record):
    rows = [r for r in record["rows"] if "pick_loss" in r]
    assert len(rows) >= 100, "the record must come from a suite run that timed every candidate (--autotune)"
    within = sum(r["pick_loss"] <= 1.03 for r in rows) / len(rows)
    loss = math.exp(sum(math.log(r["pick_loss"]) for r in rows) / len(rows))
    assert within >= PICK_WITHIN_3PCT and loss <= PICK_GEOMEAN_LOSS, (within, loss)
    for r in rows:  # the fastest is one of the candidates, each with the model's time beside its own
        assert r["best_kernel"] in r["candidates"] and r["kernel"] in r["candidates"]
        assert r["best_us"] == min(c["measured_us"] for c in r["candidates"].values())


def test_the_record_is_the_current_models(record):
    """The predictions and picks in the record are what the model says now (else: rewrite it)."""
    assert record["constants"]["LAUNCH_US"] == cost_model.LAUNCH_US
    assert record["constants"]["TENSOR_EFFICIENCY"] == cost_model.TENSOR_EFFICIENCY
    assert record["constants"]["L2_SM_GBS"] == cost_model.L2_SM_GBS
    for r in record["rows"][::7]:
        M, N, K = map(int, r["shape"].split("x"))
        ch = select.choose(M, N, K, r["dtype"], b_misaligned=cost_model.contiguous_b_misaligned(N, K))
        assert ch.pick.key == r["kernel"] == r["measured_kernel"], r
        assert ch.pick.predicted_us == pytest.approx(r["predicted_us"], abs=1e-3), r


def test_explain_measured_shows_both_columns(capsys):
    from gemm_ladder.cli.commands import main
    if PATH is None:
        pytest.skip("no cost-model record in this checkout")
    assert main(["explain", "4096", "4096", "4096", "--measured"]) == 0
    out = capsys.readouterr().out
    assert "predicted:" in out and "measured: gemm:128x256" in out and PATH.name in out
