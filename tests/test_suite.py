"""The shape suites, their summaries, file names and figures, from synthetic rows (no GPU)."""
import dataclasses
import json
import math
import os
import subprocess
import sys

import pytest

from gemm_ladder.cuda import device as cuda_device
from gemm_ladder.families import cost_model
from gemm_ladder.library import api
from gemm_ladder.measure import plots, suite, suites

# ---- synthetic results in the recorded formats ------------------------------------------
LADDER_STEPS = ["1", "2", "3", "4", "5", "6", "7", "7:d3", "7:d4"]


def ladder_result(failed=("7:d3",)):
    rows = []
    for i, key in enumerate(LADDER_STEPS):
        ok = key not in failed
        ms = 0.2 * 1.5 ** (len(LADDER_STEPS) - i) if ok else math.nan
        rows.append({"step": key, "label": key, "forced_move": "", "M": 4096, "N": 4096, "K": 4096,
                     "dtype": "float16", "ok": ok, "error": "" if ok else "synthetic failure", "ms": ms,
                     "cublas_ms": 0.183, "ratio_to_cublas": 0.183 / ms,
                     "tflops": 137.4 / ms if ok else math.nan, "cublas_tflops": 751.0})
    return {"kind": "gemm-ladder bench", "commit": "abc1234def", "date": "2026-12-01T10:00:00+00:00",
            "gpu": {"torch_name": "NVIDIA H200"}, "rows": rows,
            "memory": {"hbm_copy_gbs": 4000.0, "l2_copy_gbs": 9000.0}}


def suite_row(M, N, K, dtype, ms, cublas_ms, group="llm", kernel="7:d4", ok=True):
    r = dataclasses.asdict(suite.SuiteRow(M, N, K, dtype, group, f"{M}x{N}x{K}", kernel=kernel, ok=ok))
    r.update(ms=ms, cublas_ms=cublas_ms)
    row = suite.SuiteRow(**{k: v for k, v in r.items()})
    if ok:
        suite.fill_rates(row, 4000.0)
    return dataclasses.asdict(row)


def suite_result():
    rows = [suite_row(1, 4096, 4096, "float16", 0.010, 0.011),
            suite_row(16, 4096, 4096, "float16", 0.012, 0.010),
            suite_row(4096, 4096, 4096, "float16", 0.19, 0.19, group="squares", kernel="9"),
            suite_row(1000, 1000, 1000, "float16", 0.02, 0.01, group="odd", ok=False),
            suite_row(1, 4096, 4096, "bfloat16", 0.010, 0.012),
            suite_row(4096, 4096, 4096, "bfloat16", 0.20, 0.18, group="squares")]
    return {"kind": "gemm-ladder suite", "suite": "all", "commit": "abc1234def-dirty",
            "date": "2026-12-01T11:00:00+00:00", "gpu": {"torch_name": "NVIDIA H200"},
            "memory": {"hbm_copy_gbs": 4100.0}, "rows": rows, "summary": suite.summarize(rows)}


# ---- suites ------------------------------------------------------------------------------
def test_squares_span_256_to_8192():
    sq = suites.get_suite("squares")
    assert all(s.M == s.N == s.K for s in sq)
    assert (sq[0].M, sq[-1].M) == (256, 8192)


def test_llm_has_both_directions_and_attention_at_every_m():
    shapes = {s.mnk for s in suites.get_suite("llm")}
    for hidden, width in suites.LLM_PAIRS:
        for m in (1, 16, 64, 128, 512, 2048, 8192):
            assert (m, width, hidden) in shapes  # up
            assert (m, hidden, width) in shapes  # down
            assert (m, hidden, hidden) in shapes  # attention projection
    assert len(shapes) == len(suites.get_suite("llm"))


def test_odd_and_all():
    odd = {s.mnk for s in suites.get_suite("odd")}
    assert {(1000, 1000, 1000), (3000, 5000, 4000), (4097, 4095, 4096), (127, 8191, 255)} <= odd
    every = suites.get_suite("all")
    assert len({s.mnk for s in every}) == len(every)
    assert odd <= {s.mnk for s in every}
    with pytest.raises(KeyError, match="unknown suite"):
        suites.get_suite("nope")


def test_reps_scale_with_flop():
    r = [suite.reps_for(2.0 * n ** 3) for n in (256, 2048, 4096, 8192)]
    assert r == sorted(r, reverse=True)
    assert r[0] == suite.MAX_REPS
    assert suite.reps_for(2.0 * 8192 * 28672 * 8192) < 20  # the suite's biggest: few reps
    assert suite.reps_for(2.0 * 16384 ** 3) == suite.MIN_REPS


# ---- rows, summary, file name ------------------------------------------------------------
def test_rates_from_medians():
    r = suite_row(16, 4096, 4096, "float16", ms=0.02, cublas_ms=0.03)
    nbytes = 2 * (16 * 4096 + 4096 * 4096 + 16 * 4096)
    assert r["ratio_to_cublas"] == pytest.approx(1.5)
    assert r["gbs"] == pytest.approx(nbytes / 0.02 / 1e6)
    assert r["tflops"] == pytest.approx(2 * 16 * 4096 * 4096 / 0.02 / 1e9)
    assert r["hbm_copy_fraction"] == pytest.approx(r["gbs"] / 4000.0)
    for key in ("M", "N", "K", "dtype", "ms", "cublas_ms", "ratio_to_cublas", "ok", "kernel"):
        assert key in r


def test_summary_per_dtype():
    s = suite_result()["summary"]
    fp16 = s["float16"]
    assert (fp16["shapes"], fp16["ok"], fp16["failed"]) == (4, 3, ["1000x1000x1000"])
    assert fp16["geomean_ratio"] == pytest.approx((1.1 * (10 / 12) * 1.0) ** (1 / 3))
    assert fp16["worst"]["shape"] == "16x4096x4096"
    assert fp16["small_m"]["shapes"] == 2 and fp16["small_m"]["min_ratio"] == pytest.approx(10 / 12)
    assert fp16["kernels"] == {"7:d4": 2, "9": 1}
    assert s["bfloat16"]["worst"]["ratio_to_cublas"] == pytest.approx(0.9)


def test_suite_file_name():
    res = suite_result()
    assert suite.suite_json_path("benchmarks/results", res).name == "2026-12-01_h200_suite_all_abc1234-dirty.json"
    res["commit"] = "0123456789ab"
    res["gpu"] = {"torch_name": "NVIDIA H100 80GB HBM3"}
    assert suite.suite_json_path("x", res).name == "2026-12-01_h100_suite_all_0123456.json"


def test_plan_lists_every_shape_with_a_pick():
    plan = suite.plan_suite("odd", ["float16", "bfloat16"])
    assert len(plan) == 2 * len(suites.get_suite("odd"))
    assert all(p["kernel"] for p in plan)
    assert [p["padded"] for p in plan if (p["M"], p["N"], p["K"]) == (4097, 4095, 4096)] == [True, True]


# ---- figures -----------------------------------------------------------------------------
def test_roofline_plots_one_point_per_measured_step(tmp_path):
    lad = ladder_result()
    measured = [r for r in lad["rows"] if r["ok"]]
    fig, ax, info = plots.roofline_figure([lad, suite_result()])
    (ladder,) = [c for c in ax.collections if c.get_gid() == "ladder"]
    assert len(ladder.get_offsets()) == len(measured) == info["ladder_points"] == 8
    ours = [c for c in ax.collections if (c.get_gid() or "").startswith("suite-ours")]
    assert sum(len(c.get_offsets()) for c in ours) == info["suite_points"] == 5
    labels = [line.get_label() for line in ax.get_lines()]
    assert any(lab.startswith("HBM copy 4.10 TB/s") for lab in labels)  # the larger of two runs
    assert any(lab.startswith("L2 copy 9.00 TB/s") for lab in labels)
    assert any(lab.startswith("datasheet peak 989") for lab in labels)
    peak = max(r["cublas_tflops"] for res in (lad, suite_result()) for r in res["rows"] if r["ok"])
    assert any(lab.startswith(f"cuBLAS measured peak {peak:.0f}") for lab in labels)
    # each step sits at its modelled operand intensity
    xs = {round(float(x), 3) for x, _ in ladder.get_offsets()}
    assert round(4096 / 65, 3) in xs
    paths = plots.write_images([lad, suite_result()], tmp_path / "run")
    assert [p.name for p in paths] == ["run_roofline.png", "run_bars.png"]
    assert all(p.stat().st_size > 10_000 for p in paths)


def test_bars_one_per_measured_step():
    lad = ladder_result(failed=())
    fig, ax, info = plots.ladder_bars_figure([lad])
    assert info["bars"] == len(ax.patches) == len(LADDER_STEPS)
    assert [t.get_text() for t in ax.get_xticklabels()] == LADDER_STEPS
    ratios = [p.get_height() for p in ax.patches]
    assert ratios == pytest.approx([r["ratio_to_cublas"] for r in lad["rows"]])


def test_suite_alone_has_no_bar_chart(tmp_path):
    paths = plots.write_images([suite_result()], tmp_path / "s")
    assert [p.name for p in paths] == ["s_roofline.png"]


# ---- CLI (no GPU) ------------------------------------------------------------------------
def _cli(*args):
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([sys.executable, "-m", "gemm_ladder", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def test_cli_explain():
    r = _cli("explain", "3000", "5000", "4000", "--dtype", "bf16")
    assert r.returncode == 0, r.stderr
    assert "pick:" in r.stdout and "gemm:128x128" in r.stdout
    # a row-major b: the 232-wide tile (K-major pick) takes no N-major B; the call's kernel is named
    r = _cli("explain", "2048", "11008", "4096")
    assert r.returncode == 0 and "pick: gemm:128x232" in r.stdout and "matmul_nt(a, b) with b (N, K) runs: gemm:128x232" in r.stdout
    r = _cli("explain", "2048", "11008", "4096", "--b-row-major")
    assert r.returncode == 0, r.stderr
    assert "off a 32-byte sector" in r.stdout and "matmul(a, b) with b row-major (K, N) runs: gemm:128x256" in r.stdout
    r = _cli("explain", "127", "8191", "255", "--json")
    d = json.loads(r.stdout)
    assert d["pick"] and [c["padded"] for c in d["candidates"] if c["key"] == d["pick"]] == [True]


def test_cli_suite_dry_run_and_plot(tmp_path):
    r = _cli("bench", "--suite", "odd", "--dry-run")
    assert r.returncode == 0, r.stderr
    assert "4097x4095x4096" in r.stdout and "float16" in r.stdout and "bfloat16" in r.stdout
    assert _cli("bench", "--suite", "nope", "--dry-run").returncode == 2
    f = tmp_path / "ladder.json"
    f.write_text(json.dumps(ladder_result()))
    r = _cli("--out-dir", str(tmp_path / "out"), "plot", str(f))
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "out" / "ladder_roofline.png").exists() and (tmp_path / "out" / "ladder_bars.png").exists()


def test_cli_bad_input_is_one_line():
    r = _cli("plot", "/nonexistent.json")
    assert r.returncode == 2 and "cannot read" in r.stderr and "Traceback" not in r.stderr
    r = _cli("explain", "0", "5", "5")
    assert r.returncode == 2 and "not a positive integer" in r.stderr


# ---- the per-shape runner with the GPU parts replaced (CPU tensors, given timings) -------
class FakeBench:
    """bench.Bench's interface on the CPU: inputs from a generator, fixed timings."""

    def __init__(self, ours_ms=0.5, cublas_ms=0.25):
        import torch
        self.torch, self.dev = torch, 0
        self.gen = torch.Generator().manual_seed(0)
        self.nvml = type("N", (), {"sample": staticmethod(lambda: {"sm_clock_mhz": 1980})})()
        self.times = (ours_ms, cublas_ms)
        self.calls = []
        self.leads = []  # lead_us of each time_interleaved call

    def inputs(self, M, N, K, dtype):
        t = self.torch
        return (t.randn((M, K), generator=self.gen).to(dtype), t.randn((N, K), generator=self.gen).to(dtype))

    def time_interleaved(self, fns, reps, flush=True, lead_us=0.0):
        self.calls.append((len(fns), reps, flush))
        self.leads.append(lead_us)
        for f in fns:
            f()
        return [[self.times[i]] * reps for i in range(len(fns))]


class FakePlan:
    planned = []

    def __init__(self, step, a, b, out, broken=False):
        self.args, self.broken = (a, b, out), broken
        FakePlan.planned.append((step.key, tuple(a.shape), tuple(b.shape), a, b))

    def __call__(self):
        a, b, out = self.args
        out.copy_((a.float() @ b.float().T).to(out.dtype))
        if self.broken:
            out[:, -1] = float("nan")  # a column never written
        return out

    def synchronize(self):
        pass


@pytest.fixture
def cpu_launch(monkeypatch):
    from gemm_ladder.library import runner
    FakePlan.planned.clear()
    monkeypatch.setattr(runner, "plan", lambda st, a, b, out: FakePlan(st, a, b, out))
    return monkeypatch


def test_measure_shape_aligned(cpu_launch):
    from gemm_ladder.library import select
    bench = FakeBench()
    shape = suites.Shape(64, 96, 40, "test", "aligned")
    row = suite.measure_shape(bench, shape, "float16", cost_model.Device(), hbm_gbs=4000.0)
    assert row.ok, row.error
    assert row.kernel == select.pick(64, 96, 40) and not row.padded
    assert row.reps == suite.reps_for(shape.flop) and bench.calls == [(2, row.reps, True)]
    assert bench.leads == [0.0]  # the kernel path: the flush alone before each start event
    assert row.ratio_to_cublas == pytest.approx(0.5) and row.gpu == {"sm_clock_mhz": 1980}
    assert "lowest modelled time" in row.selection


def test_measure_shape_pads_n_and_k(cpu_launch):
    from gemm_ladder.library import select
    row = suite.measure_shape(FakeBench(), suites.Shape(5, 13, 11, "test", "odd"), "bfloat16",
                              cost_model.Device(), hbm_gbs=None)
    assert row.ok, row.error
    assert row.padded and row.kernel_shape == [5, 16, 16]
    _, a_shape, b_shape, a, b = FakePlan.planned[-1]
    assert (a_shape, b_shape) == ((5, 16), (16, 16))
    assert not a[:, 11:].any() and not b[13:].any() and not b[:, 11:].any()  # zero padding
    assert math.isnan(row.hbm_copy_fraction)


def test_measure_shape_records_a_wrong_kernel_untimed(monkeypatch):
    from gemm_ladder.library import runner, select
    monkeypatch.setattr(runner, "plan", lambda st, a, b, out: FakePlan(st, a, b, out, broken=True))
    bench = FakeBench()
    row = suite.measure_shape(bench, suites.Shape(32, 64, 64, "test", "x"), "float16", cost_model.Device(), None)
    assert not row.ok and "non-finite" in row.error
    assert math.isnan(row.ms) and bench.calls == []


def test_autotune_runs_the_fastest_correct_candidate_and_caches_it(cpu_launch, tmp_path):
    from gemm_ladder.library import select
    from gemm_ladder.measure import autotune
    cpu_launch.setenv("GEMM_LADDER_CACHE_DIR", str(tmp_path))
    cpu_launch.setattr(select, "CANDIDATES", ["7:d4", "7:d3", "6"])
    cpu_launch.setattr(select, "ONE_WAVE_CANDIDATES", [])
    shape = suites.Shape(256, 256, 256, "test", "tuned")
    bench = FakeBench(0.5, 0.3)
    bench.times = (0.5, 0.3, 0.4, 0.2)  # tuning: 7:d4, 7:d3, 6; then the pick and cuBLAS
    row = suite.measure_shape(bench, shape, "float16", cost_model.Device(), None, autotune=True, gpu="NVIDIA H200")
    assert row.ok, row.error
    assert row.autotune_ms == {"7:d4": 0.5, "7:d3": 0.3, "6": 0.4}
    # the three share one tile, so the model ties them and takes the first; measurement differs
    assert row.heuristic == select.choose(256, 256, 256).pick.key == "7:d4"
    assert row.kernel == "7:d3"
    assert bench.calls[0] == (3, autotune.TUNE_REPS, True)
    cached = autotune.load()
    assert [v["pick"] for v in cached.values()] == ["7:d3"]
    again = FakeBench()
    row2 = suite.measure_shape(again, shape, "float16", cost_model.Device(), None, autotune=True, gpu="NVIDIA H200")
    assert row2.autotune_cached and row2.kernel == "7:d3"
    assert [c[0] for c in again.calls] == [2]  # only ours vs cuBLAS: nothing re-tuned
    summary = suite.summarize([dataclasses.asdict(row)])
    assert summary["float16"]["autotune_agrees_with_model"] == 0.0


def test_autotune_fingerprint_follows_the_build():
    from gemm_ladder.measure import autotune
    fp = autotune.fingerprint(["7:d4"])
    assert fp == autotune.fingerprint(["7:d4"])
    assert fp != autotune.fingerprint(["7:d3"])  # other defines
    assert autotune.best({"a": float("nan"), "b": 0.2, "c": 0.3}) == "b"
    assert autotune.best({"a": float("nan")}) is None


def test_run_suite_end_to_end_with_the_gpu_replaced(cpu_launch, tmp_path):
    import torch
    from gemm_ladder.library import runner
    fake = FakeBench()
    fake.flush_buf = torch.empty(16)
    fake.nvml.static = lambda: {"name": "NVIDIA H200"}
    cpu_launch.setattr(suite, "Bench", lambda dev: fake)
    cpu_launch.setattr(suite, "_memory", lambda bench: {"hbm_copy_gbs": 4000.0, "l2_copy_gbs": 9000.0})
    cpu_launch.setattr(runner, "check_device", lambda dev: None)
    cpu_launch.setattr(cuda_device, "num_sms", lambda dev: 132)
    cpu_launch.setattr(torch.cuda, "set_device", lambda dev: None)
    cpu_launch.setattr(torch.cuda, "get_device_name", lambda dev: "NVIDIA H200")
    cpu_launch.setattr(torch.cuda, "empty_cache", lambda: None)
    shapes = [suites.Shape(64, 96, 40, "test", "a"), suites.Shape(5, 13, 11, "test", "padded")]
    seen = []
    res = suite.run_suite("test", ["float16", "bfloat16"], shapes=shapes,
                          checkpoint=lambda r: seen.append((len(r["rows"]), r["complete"])))
    assert seen == [(1, False), (2, False), (3, False), (4, False)] and res["complete"]
    assert [(r["dtype"], r["ok"], r["padded"]) for r in res["rows"]] == [
        ("float16", True, False), ("float16", True, True), ("bfloat16", True, False), ("bfloat16", True, True)]
    assert res["summary"]["bfloat16"]["geomean_ratio"] == pytest.approx(0.5)
    assert res["memory"]["hbm_copy_gbs"] == 4000.0
    assert (res["method"]["lead_us"], res["method"]["timer"]) == (0.0, "CUDA events per call")
    assert all(r["hbm_copy_fraction"] == pytest.approx(r["gbs"] / 4000.0) for r in res["rows"])
    json.dumps(res)  # JSON-able as recorded
    paths = plots.write_images([res, ladder_result()], tmp_path / "suite")
    assert all(p.exists() for p in paths)


# ---- the suite through the library's call (fake GPU: CPU tensors, emulated driver) --------
@pytest.mark.parametrize("call", ["matmul", "matmul_nt"])
def test_measure_call_times_the_library_against_torch(monkeypatch, call):
    from fake_gpu import FakeGpu
    from gemm_ladder.library import fastpath, select
    FakeGpu(monkeypatch)
    api.cache_clear()
    bench = FakeBench()
    for shape, staged in ((suites.Shape(192, 96, 40, "test", "ladder"), ""),
                          (suites.Shape(16, 4096, 4096, "test", "small M"), ""),  # a row-major b read in place
                          (suites.Shape(5, 13, 11, "test", "odd"), "a,b")):  # K = 11: 16-byte rows need copies
        row = suite.measure_shape(bench, shape, "float16", cost_model.Device(), None, call=call)
        assert row.ok, row.error
        assert row.call == call and row.heuristic == select.pick(*shape.mnk)
        # the kernel the library ran; the small-M family reads a row-major b only as a copy
        assert row.kernel == fastpath.config_for("mm" if call == "matmul" else "nt", *_operands(shape, call)).step.key
        assert row.staged == staged and row.ratio_to_cublas == pytest.approx(0.5)
    assert [c[:2] for c in bench.calls] == [(2, suite.reps_for(2.0 * m * n * k)) for m, n, k in
                                            ((192, 96, 40), (16, 4096, 4096), (5, 13, 11))]
    assert bench.leads == [suite.CALL_LEAD_US] * 3  # a GPU spin before each start event


def test_call_rows_state_the_spin_in_the_method():
    assert suite.CALL_LEAD_US > 0
    for call in ("matmul", "matmul_nt"):
        assert f"GPU spin of >= {suite.CALL_LEAD_US:g} us" in suite._timer(call)


class FakeCudaTorch:
    """The torch calls Bench.time_interleaved makes, logged in order (no GPU)."""

    def __init__(self):
        self.log = []
        log = self.log

        class Event:
            def __init__(self, enable_timing=False):
                self.name = "start" if sum(x[0] == "event" for x in log) % 2 == 0 else "end"
                log.append(("event", self.name))

            def record(self):
                log.append(("record", self.name))

            def elapsed_time(self, other):
                return 0.25

        self.cuda = type("cuda", (), {"Event": Event, "_sleep": staticmethod(lambda n: log.append(("sleep", n))),
                                      "synchronize": staticmethod(lambda dev=None: log.append(("sync",)))})


def _cpu_bench(mhz):
    from gemm_ladder.measure.bench import Bench
    b = Bench.__new__(Bench)  # no GPU: the attributes time_interleaved reads
    b.torch, b.dev = FakeCudaTorch(), 0
    b.flush_buf = type("F", (), {"zero_": lambda self: b.torch.log.append(("flush",))})()
    b.nvml = type("N", (), {"static": staticmethod(lambda: {"max_sm_clock_mhz": mhz} if mhz else {})})()
    return b


@pytest.mark.parametrize("lead_us, mhz, cycles", [(0.0, 1980, None), (200.0, 1980, 396000),
                                                  (200.0, 1755, 351000), (50.0, None, 99000)])
def test_time_interleaved_spins_between_flush_and_start_event_when_asked(lead_us, mhz, cycles):
    b = _cpu_bench(mhz)
    log = b.torch.log
    fns = [lambda: log.append(("ours",)), lambda: log.append(("theirs",))]
    times = b.time_interleaved(fns, 2, lead_us=lead_us) if lead_us else b.time_interleaved(fns, 2)
    assert times == [[0.25, 0.25], [0.25, 0.25]]
    calls = [x for x in log if x[0] in ("ours", "theirs")]
    assert calls == [("ours",), ("theirs",), ("theirs",), ("ours",)]  # the order flips per repetition
    spin = [("sleep", cycles)] if cycles else []  # at least lead_us at the highest SM clock
    one = [("flush",), *spin, ("event", "start"), ("event", "end"), ("record", "start")]
    per_call = len(one) + 2  # ... the call, the end event's record
    for k in range(4):
        assert log[k * per_call:k * per_call + len(one)] == one
        assert log[k * per_call + len(one) + 1] == ("record", "end")
    assert log[-1] == ("sync",) and sum(x[0] == "sleep" for x in log) == (4 if cycles else 0)


def _operands(shape, call):
    """Operands of the layout the call times (values do not matter for the configuration)."""
    import torch
    a, b = torch.zeros(shape.M, shape.K, dtype=torch.float16), torch.zeros(shape.N, shape.K, dtype=torch.float16)
    return (a, b.T.contiguous()) if call == "matmul" else (a, b)


def test_call_flag_needs_a_suite_and_no_autotune():
    r = _cli("bench", "--call", "matmul")
    assert r.returncode == 2 and "--suite" in r.stderr and "Traceback" not in r.stderr
    r = _cli("bench", "--suite", "squares", "--call", "matmul", "--autotune")
    assert r.returncode == 2 and "--autotune" in r.stderr and "Traceback" not in r.stderr
    with pytest.raises(ValueError, match="call must be"):
        suite.run_suite("squares", ["float16"], call="kernel_nt")


def test_every_record_is_named_by_the_card_that_ran_it():
    """The suite's, the API's, the decode chain's, fp8's and attention's records share one naming
    (gpuinfo.record_path): an H100's run is never filed as an H200's."""
    from gemm_ladder.measure import bench_api, bench_attention, bench_fp8, decode_chain
    res = {"date": "2026-12-05T10:00:00+00:00", "commit": "0123456789ab", "suite": "all",
           "gpu": {"torch_name": "NVIDIA H100 80GB HBM3"}}
    names = [suite.suite_json_path("x", res).name] + [m.default_json_path("x", res).name for m in
                                                      (bench_api, bench_attention, bench_fp8, decode_chain)]
    assert names == ["2026-12-05_h100_suite_all_0123456.json", "2026-12-05_h100_api_0123456.json",
                     "2026-12-05_h100_attention_0123456.json", "2026-12-05_h100_fp8_0123456.json",
                     "2026-12-05_h100_decode_chain_0123456.json"]
    res["gpu"] = {"name": "NVIDIA H200"}
    assert decode_chain.default_json_path("x", res).name == "2026-12-05_h200_decode_chain_0123456.json"
