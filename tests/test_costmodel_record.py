"""The cost model held to the suite's measurements (docs/perf-notes.md items 78, 81 and 85): the
newest cost-model record (benchmarks/results/*_costmodel_*.json, scripts/costmodel_record.py)
holds, for every suite shape, the time the model predicts for its pick beside the measured time
and, from a suite run that timed every candidate (`--autotune`), how far the pick is from the
fastest candidate.

Tolerance: every shape within 25 %, the geomean error within 8 %, and within 7 % on half B of the
shapes (`costmodel.half`), on which item 85's two streaming constants were not fitted; the pick
within 3 % of the fastest candidate on at least 90 % of the shapes, and a geomean loss to it of at
most 1 %. At d073294 (226 rows, item 90's model): worst -23.9 % (1000^3 bf16 on smallm:n128m2),
geomean 4.9 %, half B 4.4 %; the launch and tensor-core constants' 16 squares within +11 %; picks
94 % within 3 %, geomean loss 0.4 %, worst 1023^3 (1.10x). A model or kernel change that moves a
shape past these fails here, and a record whose predictions are not the current model's is stale.
A pick that moved after the run that timed every candidate is listed apart (`moved_picks`, its
time from a later kernel-path run), checked to be the current pick and held to the same 25 %
(it has no fastest candidate to be compared with): the eight long-K rows on smallm:c2n64d
(item 89) are predicted -7.7 ... +9.3 % (9-29 % short before item 90 priced the cluster's
exchange and the second pass)."""
from __future__ import annotations

import json
import math

import pytest

from gemm_ladder.families import cost_model
from gemm_ladder.library import select
from gemm_ladder.measure import costmodel

TOLERANCE = 0.25
PICK_WITHIN_3PCT = 0.90
PICK_GEOMEAN_LOSS = 1.01
GEOMEAN_TOLERANCE = 0.08
HALF_B_GEOMEAN_TOLERANCE = 0.07
PATH = costmodel.newest("costmodel")


@pytest.fixture(scope="module")
def record():
    if PATH is None:
        pytest.skip("no cost-model record in this checkout")
    return json.loads(PATH.read_text())


def test_every_shape_within_the_tolerance(record):
    moved = [f"{r['shape']} {r['dtype']} {r['kernel']}: {r['error']:+.1%}" for r in record.get("moved_picks", [])
             if abs(r["error"]) > TOLERANCE]
    assert not moved, moved
    rows = record["rows"]
    assert len(rows) >= 100
    off = [f"{r['shape']} {r['dtype']} {r['kernel']}: {r['error']:+.1%}" for r in rows if abs(r["error"]) > TOLERANCE]
    assert not off, off
    geo = math.exp(sum(abs(math.log1p(r["error"])) for r in rows) / len(rows)) - 1
    assert geo <= GEOMEAN_TOLERANCE, geo
    half_b = [r for r in rows if costmodel.half(r["shape"]) == "B"]
    assert len(half_b) >= 80
    geo_b = math.exp(sum(abs(math.log1p(r["error"])) for r in half_b) / len(half_b)) - 1
    assert geo_b <= HALF_B_GEOMEAN_TOLERANCE, geo_b
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
    assert record["constants"]["L2_STREAM_BYTES"] == cost_model.L2_STREAM_BYTES
    assert record["constants"]["DSMEM_L2_SHARE"] == cost_model.DSMEM_L2_SHARE
    assert record["constants"]["CLUSTER_REDUCE_US_PER_KIB"] == cost_model.CLUSTER_REDUCE_US_PER_KIB
    assert record["constants"]["REDUCE_PASS_US"] == cost_model.REDUCE_PASS_US
    for r in record["rows"][::7] + record.get("moved_picks", []):
        M, N, K = map(int, r["shape"].split("x"))
        ch = select.choose(M, N, K, r["dtype"], b_misaligned=cost_model.contiguous_b_misaligned(N, K))
        assert ch.pick.key == r["kernel"] == r["measured_kernel"], r
        assert ch.pick.predicted_us == pytest.approx(r["predicted_us"], abs=1e-3), r


def test_the_reduction_is_a_fixed_time_in_the_prediction():
    """Item 90: a cluster's exchange grows with its peers and its piece; the second pass is one
    fixed time; neither changes the score (the ranking); clusters count only those resident."""
    from gemm_ladder.families import smallm
    n64, c2n64d = smallm.get_family("smallm:n64"), smallm.get_family("smallm:c2n64d")
    pairs, octets = n64.fixed_deal(16, 512, 4096, 2), n64.fixed_deal(16, 512, 4096, 8)
    assert 0 < cost_model.reduce_us(pairs, 64 * 64) < cost_model.reduce_us(octets, 64 * 64)
    quad = c2n64d.fixed_deal(128, 1024, 4096, 4)
    assert cost_model.reduce_us(quad, 128 * 64) == pytest.approx(cost_model.CLUSTER_REDUCE_US_PER_KIB * 24)
    planes = smallm.get_family("smallm:c2n64").fixed_deal(128, 1024, 4096, 8)
    assert planes.planes and cost_model.reduce_us(planes, 128 * 64) == cost_model.REDUCE_PASS_US
    s = cost_model.score(smallm.get_family("smallm:c2n64"), 128, 1024, 4096)
    assert s.pass_charge_us > 0 and s.t_reduce_us == cost_model.REDUCE_PASS_US
    # 128 CTAs in clusters of 4: 120 resident at once, two waves
    wide = n64.fixed_deal(128, 1024, 4096, 4)
    assert wide.ctas == 128 and n64.resident_cluster_ctas(4, 132) == 120

    class Forced:  # n64 with that deal
        def __getattr__(self, k):
            return getattr(n64, k)

        def deal(self, *a):
            return wide
    assert cost_model.score(Forced(), 128, 1024, 4096).waves == 2


def test_explain_measured_shows_both_columns(capsys):
    from gemm_ladder.cli.commands import main
    if PATH is None:
        pytest.skip("no cost-model record in this checkout")
    assert main(["explain", "4096", "4096", "4096", "--measured"]) == 0
    out = capsys.readouterr().out
    assert "predicted:" in out and "measured: gemm:128x256" in out and PATH.name in out


def _card_records():
    """The newest cost-model record of each card other than the H200 (scripts/costmodel_record.py on
    a suite that ran there)."""
    newest = {}
    for p in sorted(costmodel.RESULTS.glob("*_costmodel_*.json")) if costmodel.RESULTS.is_dir() else []:
        token = p.name[11:].split("_")[0]
        if token != "h200":
            newest[token] = p  # names sort by date
    return sorted(newest.values())


@pytest.mark.parametrize("path", _card_records(), ids=lambda p: p.name)
def test_another_card_is_predicted_with_its_own_facts(path):
    """Every constant was fitted on the H200; on another card (its datasheet HBM, tensor peak and the
    copy rate its suite measured: cuda/device.CARDS) every row is held out. The H200's bars: geomean
    within 8 %, every row within 25 % but the padded ones (their copies are outside the prediction and
    weigh more on slower HBM: 1537^3 -26 % on the H100 at ec01370, -17 / -19 % on the H200), and the
    predictions are what the model says now with that card's facts."""
    from gemm_ladder.cuda.device import CARDS
    rec = json.loads(path.read_text())
    rows, card = rec["rows"], rec["card"]
    assert len(rows) >= 100 and card["token"] in CARDS
    geo = math.exp(sum(abs(math.log1p(r["error"])) for r in rows) / len(rows)) - 1
    assert geo <= GEOMEAN_TOLERANCE, geo
    suite = json.loads((costmodel.RESULTS / rec["suite"]).read_text())
    padded = {(f"{r['M']}x{r['N']}x{r['K']}", r["dtype"]) for r in suite["rows"] if r.get("padded")}
    off = [f"{r['shape']} {r['dtype']}: {r['error']:+.1%}" for r in rows
           if abs(r["error"]) > TOLERANCE and (r["shape"], r["dtype"]) not in padded]
    assert not off, off
    dev = costmodel.card_device(card["token"], card["copy_tbs"])
    assert dev.hbm_tbs == card["hbm_tbs"] and dev.peak_tflops == card["peak_tflops"]
    for r in rows[::9]:
        M, N, K = map(int, r["shape"].split("x"))
        ch = select.choose(M, N, K, r["dtype"], device=dev, b_misaligned=cost_model.contiguous_b_misaligned(N, K))
        s = next(s for s in ch.scores if s.key == r["kernel"])
        assert s.predicted_us == pytest.approx(r["predicted_us"], rel=2e-3), r
