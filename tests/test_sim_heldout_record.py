"""The simulator held out, re-derived from the traces the H200 recorded (docs/perf-notes.md item
83): the model fitted once on 7:d4 at 4096³ (benchmarks/results/traces/heldout_9e9c40a) and
predicting every other GEMM step and size must give what the newest held-out record says — a
change to the model that moves a prediction shows here, against measurements it was not fitted
on — and every GEMM prediction must stay within the issue's 15 % of the measured makespan
(worst: step 10 at 2048³, +9.6 %). A stage's release through the cluster costs the producer
164 SM cycles more than a CTA-local one, measured on step 8's trace at 4096³ (that row is marked
fitted, docs/perf-notes.md item 88); tensor-core busy is then within 0.05 on 11 of the 13
predicted runs (step 8 at 8192³ +0.06, step 10 at 2048³ -0.06): guarded at that count. The attention
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
RECORD = RESULTS / "2026-12-04_h200_sim_heldout_037824d.json"
TRACES = RESULTS / "traces" / "heldout_9e9c40a"
ATTN_TRACES = RESULTS / "traces" / "heldout_attn_3724ed0"
MAKESPAN = 0.15
BUSY = 0.05
BUSY_WITHIN_AT_LEAST = 11


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
    assert len(pred) == 13 and {r["step"] for r in pred} == {"7:d4", "8", "9", "9:c1", "10"}
    off = [f"{r['step']} {r['size'][0]}: {r['error']:+.1%}" for r in pred if abs(r["error"]) > MAKESPAN]
    assert not off, off
    assert sum(abs(r["busy_error"]) <= BUSY for r in pred) >= BUSY_WITHIN_AT_LEAST
    fitted = [r for r in rederived["rows"] if r["role"] == "fitted"]
    assert [(r["step"], r["size"][0]) for r in fitted] == [("7:d4", 4096), ("8", 4096), ("A3", 128)]


def test_the_cluster_release_clocks_are_step_8s_against_7d4s():
    """CLUSTER_RELEASE_CLOCKS is step 8's release hand-off at 4096³ less 7:d4's (medians, SM
    cycles); the cluster steps read ~150-215 cycles at every size, 7:d4 30-135."""
    from gemm_ladder.choreography.sim.calibrate import release_handoff
    runs = {r.label: r for r in heldout.read_runs(sorted(TRACES.glob("*_records.json.gz")))}

    def clocks(label):
        return release_handoff(runs[label].timeline) * runs[label].sm_clock_ghz
    assert clocks("8@4096") - clocks("7:d4@4096") == pytest.approx(heldout.CLUSTER_RELEASE_CLOCKS, abs=1.0)
    for size in (2048, 4096, 8192):
        assert clocks(f"8@{size}") > clocks(f"7:d4@{size}") + 50, size


def test_an_attention_page_says_when_its_traced_build_is_not_the_kernel(tmp_path):
    """The page `gemm-ladder trace --attention` draws (and a GEMM page the model cannot fit)
    carries the traced build's time against the kernel's; past 5 % it says so."""
    from gemm_ladder.choreography import sim
    from gemm_ladder.cli.trace import _write_outputs
    res = sim.simulate(sim.params_for_step("7:d4", k_tiles=4, tiles_per_cta=1))
    for traced, verdict in ((1.08, "this timeline is the traced build"), (1.02, "the timeline is the kernel")):
        _write_outputs(tmp_path, "page", {"ms_plain": 1.0, "ms_traced": traced}, res.timeline, res, "t")
        assert verdict in (tmp_path / "page.html").read_text()
