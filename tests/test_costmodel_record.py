"""The cost model held to the suite's measurements (docs/perf-notes.md item 78): the newest
cost-model record (benchmarks/results/*_costmodel_*.json, scripts/costmodel_record.py) holds,
for every suite shape, the time the model predicts for its pick beside the measured time.

Tolerance: every shape within 30 %, the geomean error within 15 %. The prediction's two
constants were fitted on the 16 squares (worst +12 % there); the 122 held-out rows land within
30 % (worst -29.6 %, 12 of them beyond 25 %: the small-M family's memory-bound shapes at M = 64
-128 on 4096-wide weights and 1000^3, which run below the copy rate the model streams at). The
issue's targets (25 % per shape, 10 % geomean) are not met yet; this guards what holds: a model
or kernel change that moves a shape past 30 % fails here, and a record whose predictions are not
the current model's is stale."""
from __future__ import annotations

import json
import math

import pytest

from gemm_ladder.families import cost_model
from gemm_ladder.library import select
from gemm_ladder.measure import costmodel

TOLERANCE = 0.30
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


def test_the_record_is_the_current_models(record):
    """The predictions and picks in the record are what the model says now (else: rewrite it)."""
    assert record["constants"]["LAUNCH_US"] == cost_model.LAUNCH_US
    assert record["constants"]["TENSOR_EFFICIENCY"] == cost_model.TENSOR_EFFICIENCY
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
