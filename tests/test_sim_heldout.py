"""The simulator held out, on the CPU: traces of runs whose timings are known (simulated, then
written as the kernels' tracer records them and decoded) and saved as `gemm-ladder trace`
saves them; the model is fitted on one (7:d4) and predicts the others without refitting. Also:
a prediction uses nothing of the run it predicts but its step, size, grid and SM clock; the
page and `calibrate` tell the same account of a trace (fitted, predicted, from what)."""
from __future__ import annotations

import dataclasses
import html
import json
import re
from pathlib import Path

import pytest
from test_trace_decode import SAMPLES, records_from

from gemm_ladder.choreography import heldout, saved, story, trace
from gemm_ladder.choreography.sim import params_for_step, simulate
from gemm_ladder.choreography.sim.calibrate import busiest_makespan, check_calibration
from gemm_ladder.choreography.sim.params import busiest_cta_tiles
from gemm_ladder.families.keys import get_step

# The "hardware" of these runs: timings at a 1.5 GHz SM clock (not the model's defaults).
TRUE = dict(mma_ns=341.0, consumer_gap_ns=500.0, mma_issue_ns=150.0, mma_wait_ns=140.0, load_latency_ns=950.0,
            first_load_latency_ns=1800.0, setup_ns=300.0, epilogue_ns=230.0, store_latency_ns=600.0)
CLOCK = 1.5


def traced_run(tmp: Path, key: str, n: int, clock: float = CLOCK, ms_plain: float = 0.2,
               ms_traced: float = 0.21) -> Path:
    """A run of `key` at n³ with the TRUE timings at `clock` (the SM side scaled from CLOCK),
    recorded and decoded as a trace, saved as trace_one saves its summary."""
    st = get_step(key)
    timings = {k: v * (CLOCK / clock if k in heldout.SM_TIMINGS else 1.0) for k, v in TRUE.items()}
    p = params_for_step(st, size=(n, n, n), num_sms=132, **timings)
    res = simulate(p)
    ns_per_clock = 1.0 / clock
    shown = list(range(max(2, st.cluster_m)))
    meta = {"M": n, "N": n, "K": n, "ms_plain": ms_plain, "ms_traced": ms_traced, "sm_clock_ghz": clock,
            "shown_ctas": shown}
    tl = trace.to_timeline(records_from(res.timeline, st, ns_per_clock), st, ctas=shown, meta=meta)
    summary = {"step": key, "size": [n, n, n], "ms_plain": ms_plain, "ms_traced": ms_traced, "num_sms": 132,
               "ctas": None, "sm_clock_ghz": clock}
    path = tmp / f"trace_step{key.replace(':', '_')}_{n}x{n}x{n}.json"
    path.write_text(json.dumps({"summary": summary, "timeline": tl.to_dict()}, default=float))
    return path


@pytest.fixture(scope="module")
def traces(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("heldout")
    traced_run(tmp, "7:d4", 4096)
    for key in ("8", "9", "10"):
        for n in (2048, 4096):
            traced_run(tmp, key, n)
    traced_run(tmp, "9:c1", 2048, clock=1.35, ms_traced=0.25)  # a lower clock, a slow traced build
    return tmp


def test_fitted_once_it_predicts_every_other_step_and_size(traces, capsys, tmp_path, monkeypatch):
    from gemm_ladder.choreography import heldout
    from gemm_ladder.cli.commands import main
    # these runs were simulated with the model's CTA-local release in the clusters too
    monkeypatch.setattr(heldout, "CLUSTER_RELEASE_CLOCKS", 0.0)
    monkeypatch.setattr(heldout, "CLUSTER_FIT_ON", None)
    rc = main(["calibrate", "--held-out", str(traces), "--fit-on", "7:d4@4096", "--json", str(tmp_path / "h.json")])
    out = capsys.readouterr().out
    rec = json.loads((tmp_path / "h.json").read_text())
    rows = {(r["step"], r["size"][0]): r for r in rec["rows"]}
    assert rows[("7:d4", 4096)]["role"] == "fitted" and rec["fitted_on"]["run"] == "7:d4@4096"
    pred = [r for r in rec["rows"] if r["role"] == "predicted"]
    assert len(pred) == 7 and rec["summary"]["predicted"] == 7
    for r in pred:  # the same timings made every run: the one fit predicts them all
        assert set(r) >= {"step", "size", "fitted_on", "predicted_ns", "measured_ns", "error"}
        assert abs(r["error"]) < 0.05 and abs(r["busy_error"]) < 0.03, r
    # the record keeps the traced build's time beside the kernel's, and counts those over 5 %
    assert rows[("9:c1", 2048)]["trace_overhead"] == pytest.approx(0.25)
    assert rec["summary"]["traced"] == 8 and rec["summary"]["traced_within"] == 7
    assert rc == 0 and "fitted on 7:d4@4096" in out and "7 of 7 predictions within 15%" in out


def test_the_clock_is_the_mechanism_a_lower_clock_needs(traces):
    """9:c1 ran at 1.35 GHz: with its SM-side timings rescaled from the fit's clock the model
    predicts it; at the fit's clock it would be off by about the clocks' ratio."""
    runs = heldout.read_runs([traces])
    rec = heldout.held_out(runs)
    r = next(r for r in rec["rows"] if r["step"] == "9:c1")
    assert abs(r["error"]) < 0.05
    assert r["error_at_fit_clock"] < -0.05  # too fast: the run's clock was lower


def test_a_prediction_uses_nothing_of_the_run_it_predicts(traces):
    """Change what was measured of a predicted run (its timeline) and the prediction stays;
    only the measured figure moves. Change the fit's trace and it moves."""
    runs = heldout.read_runs([traces])
    f = heldout.fit(heldout.find_run(runs, "7:d4@4096"))
    target = heldout.find_run(runs, "10@4096")
    before = heldout.row(target, f)
    slower = dataclasses.replace(target, timeline=dataclasses.replace(
        target.timeline, spans=[dataclasses.replace(s, start=s.start * 1.3, end=s.end * 1.3)
                                for s in target.timeline.spans]))
    after = heldout.row(slower, f)
    assert after["predicted_ns"] == before["predicted_ns"] and after["predicted_busy"] == before["predicted_busy"]
    assert after["measured_ns"] == pytest.approx(1.3 * before["measured_ns"])
    other = heldout.fit(heldout.find_run(runs, "9@4096"))  # fitted elsewhere: another prediction
    assert heldout.row(target, other)["predicted_ns"] != before["predicted_ns"]


def test_the_prediction_takes_the_grid_of_the_run():
    st = get_step("9")
    run = heldout.TracedRun("x", "9", (8192, 8192, 8192), num_sms=132, ctas=120)
    p = heldout._gemm_params(run)
    assert p.tiles_per_cta == busiest_cta_tiles(st, 8192, 8192, 132, 120) and p.k_tiles == 128


def test_held_out_refuses_inputs_without_the_fit(tmp_path, capsys):
    from gemm_ladder.cli.commands import main
    traced_run(tmp_path, "9", 2048)
    assert main(["calibrate", "--held-out", str(tmp_path)]) == 2
    assert "no traced run '7:d4@4096'" in capsys.readouterr().err
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["calibrate", "--held-out", str(empty)]) == 2


# ---- one account: the page and calibrate ----------------------------------------------------

def page_timelines(path: Path) -> tuple[dict, str]:
    text = path.read_text()
    data = json.loads(re.search(r'id="gl-data">(.*?)</script>', text, re.S).group(1).replace("<\\/", "</"))
    subtitle = re.search(r'<div class="subtitle">(.*?)</div>', text, re.S).group(1)
    return data, subtitle


@pytest.mark.parametrize("name", ["trace_step7_d4_measured_vs_sim.html", "trace_step5_measured_vs_sim.html"])
def test_the_shipped_pages_say_what_calibrate_says(name, capsys):
    """The figure the page labels "fitted to this trace" is the one calibrate fits on the same
    file, and the page's subtitle is calibrate's account word for word (a page drawn by an
    older model would fail here: redraw it with `gemm-ladder calibrate PAGE --page PAGE`)."""
    from gemm_ladder.cli.commands import main
    path = SAMPLES / name
    data, subtitle = page_timelines(path)
    fitted = [t for t in data["timelines"] if t["title"].endswith("(simulated, fitted to this trace)")]
    predicted = [t for t in data["timelines"] if "(simulated, predicted from the model's defaults)" in t["title"]]
    assert len(fitted) == 1 and len(predicted) == 1
    [measured] = saved.measured_timelines(path)
    c = check_calibration(measured)
    per_cta = max(x["makespan_ns"] for x in fitted[0]["kpis"]["per_cta"])
    assert per_cta == pytest.approx(c["simulated_makespan_ns"], abs=1.0)
    assert main(["calibrate", str(path)]) == 0
    lines = [ln.strip() for ln in capsys.readouterr().out.splitlines()[1:]]
    assert subtitle == html.escape(" | ".join(lines))
    assert lines[1].startswith("fitted to this trace: ") and lines[2].startswith("predicted from the model's defaults")


def test_story_names_the_fit_it_predicts_from(traces):
    runs = heldout.read_runs([traces])
    f = heldout.fit(heldout.find_run(runs, "7:d4@4096"))
    target = heldout.find_run(runs, "9:c1@2048")
    told = story.tell(target.timeline, f)
    assert told["lines"][2].startswith("predicted from the timings fitted on 7:d4@4096")
    assert "(simulated, predicted from the fit on 7:d4@4096)" in told["predicted"].timeline.title
    # the measured line says the traced build is not the kernel past 5 %
    assert "+25.0%" in told["lines"][0] and "not the kernel's" in told["lines"][0]
    # and the prediction is the held-out row's (the same clock rescaling, the same configuration)
    row = heldout.row(target, f)
    assert told["prediction"]["makespan_ns"] == pytest.approx(row["predicted_ns"], rel=1e-9)
    assert busiest_makespan(told["fitted"].timeline) == pytest.approx(told["calibration"]["simulated_makespan_ns"])


def test_device_session_runs_the_held_out_stage():
    import subprocess
    script = Path(__file__).resolve().parents[1] / "scripts" / "device_session.sh"
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    text = script.read_text()
    stage = text.split("if has simheldout; then")[1].split("\nfi\n")[0]
    assert text.index("if has simheldout; then") > text.index("if has attntrace; then")
    assert "7:d4 8 9 9:c1 10" in stage and "2048,4096,8192" in stage and "A3 A4 A5" in stage
    assert "calibrate --held-out" in stage and "--fit-on 7:d4@4096" in stage and "_h200_sim_heldout_" in stage
    assert "simheldout" in "".join(text.splitlines(keepends=True)[:30])  # named in the header


def test_calibrate_predicts_from_another_trace_and_draws_the_page(tmp_path, capsys):
    from gemm_ladder.cli.commands import main
    page7, page5 = SAMPLES / "trace_step7_d4_measured_vs_sim.html", SAMPLES / "trace_step5_measured_vs_sim.html"
    out_page = tmp_path / "p.html"
    assert main(["calibrate", str(page5), "--fit-on", str(page7), "--page", str(out_page)]) == 0
    out = capsys.readouterr().out
    assert f"predicted from the timings fitted on 7:d4@4096 ({page7.name})" in out
    data, subtitle = page_timelines(out_page)
    assert [t["source"] for t in data["timelines"]] == ["sim", "measured", "sim"] and data["defaults"] == [0, 1]
    assert "predicted from the fit on 7:d4@4096" in data["timelines"][2]["title"]
    assert main(["calibrate", str(page5), str(page7), "--page", str(out_page)]) == 2   # one trace per page
    assert "--page draws one measured trace" in capsys.readouterr().err


def test_attention_runs_are_predicted_from_the_gemm_fit(traces, tmp_path):
    """An attention trace's summary: the attention model with the GEMM fit's loop latencies and
    its tensor-core rate (at the run's clock), beside the measured median SM's makespan."""
    from gemm_ladder.choreography.sim.attention import simulate_attention
    from gemm_ladder.choreography.sim.attn_params import BLOCK_CUDA_CLOCKS
    summary = {"step": "A4", "D": 128, "S": 4096, "causal": False, "makespan_measured_ns": 50_000.0,
               "kpis_measured": {"tensor_core_busy": 0.7}, "ms_plain": 0.5, "ms_traced": 0.52, "sm_clock_ghz": CLOCK}
    (tmp_path / "trace_attention_A4_d128_s4096.json").write_text(json.dumps({"summary": summary}))
    runs = heldout.read_runs([traces, tmp_path])
    assert runs[-1].attention and runs[-1].label == "A4 D128 S4096"
    rec = heldout.held_out(runs)
    [r] = [r for r in rec["rows"] if r["step"] == "A4"]
    f = heldout.fit(heldout.find_run(runs, "7:d4@4096"))
    assert r["role"] == "predicted" and r["measured_ns"] == 50_000.0 and r["measured_busy"] == 0.7
    # at the fit's own clock, its wgmma time sets the tensor core's rate
    fitted_rate = 2 * 128 * 128 * 64 / f.timings["mma_ns"]
    # and the consumers' CUDA-core work per block is the cycles measured on A3's trace
    res = simulate_attention("A4", head_dim=128, seq_len=4096, tc_flop_per_ns=fitted_rate,
                             mma_issue_ns=f.timings["mma_issue_ns"], mma_wait_ns=f.timings["mma_wait_ns"],
                             load_latency_ns=f.timings["load_latency_ns"], epilogue_ns=f.timings["epilogue_ns"],
                             block_cuda_ns=BLOCK_CUDA_CLOCKS / f.clock_ghz)
    assert res.kpis["tensor_core_busy"] == pytest.approx(r["predicted_busy"], abs=0.05)
