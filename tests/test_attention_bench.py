"""`gemm-ladder bench --attention` and the attention trust scripts without a GPU: the cases and
their FLOPs, which steps run where, the summary and its targets from synthetic rows, one case
assembled into the record's rows on the CPU (torch standing in for the library, timings given),
the CLI's doors, the fuzzer's cases and checker, the sanitizer driver's cases, and the device
session's stages."""
import importlib.util
import json
import math
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from gemm_ladder.cli import commands as cli
from gemm_ladder.cli import doors
from gemm_ladder.measure import attention_ref as ar
from gemm_ladder.measure import attention_report as rep
from gemm_ladder.measure import bench_attention as ba

ROOT = Path(__file__).resolve().parents[1]
HOPPER = doors.hopper_problem() is None


def _script(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


fuzz = _script("fuzz_attention")
san = _script("attention_sanitize_cases")


# ---- cases, FLOPs, steps ----------------------------------------------------------------
@pytest.mark.parametrize("S, D, B, H", [(1024, 128, 16, 16), (4096, 64, 4, 32), (16384, 256, 1, 8),
                                        (1024, 64, 16, 32), (32768, 128, 1, 16)])
def test_sixteen_k_tokens_at_hidden_2048(S, D, B, H):
    assert rep.case_shape(S, D) == (B, H)
    if S <= rep.TOKENS:
        assert B * S == 16384 and H * D == 2048


def test_flops_are_four_b_h_s2_d_halved_when_causal():
    assert rep.flops(2, 3, 5, 7, False) == 4 * 2 * 3 * 25 * 7
    assert rep.flops(2, 3, 5, 7, True) == 2 * 2 * 3 * 25 * 7
    for S in rep.SEQLENS:  # every default case: 4 * tokens * hidden * S, whatever the head dim
        for D in rep.HEAD_DIMS:
            assert rep.flops(*rep.case_shape(S, D), S, D, False) == 4 * 16384 * 2048 * S


def test_a1_runs_at_s_up_to_4k_by_default_and_never_past_8_gb():
    assert rep.a1_skip_reason(*rep.case_shape(4096, 64), 4096, True) is None  # 4.3 GB
    assert "by default" in rep.a1_skip_reason(*rep.case_shape(16384, 256), 16384, True)
    assert rep.a1_skip_reason(*rep.case_shape(16384, 256), 16384, False) is None  # asked for: 4.3 GB
    why = rep.a1_skip_reason(*rep.case_shape(16384, 128), 16384, False)
    assert rep.a1_bytes(1, 16, 16384) == 16 * 16384 ** 2 * 2 and "8.6 GB > 8 GB" in why


def test_steps_asked_for_and_absent_are_skipped_with_a_reason():
    present = {"A2": "fused", "A4": "ping-pong"}
    assert rep.requested_steps(None, present) == (["A1", "A2", "A4", "lib"], [])
    run, missing = rep.requested_steps(["A4", "A3", "A1", "A4"], present)
    assert run == ["A1", "A4"]
    assert [m["step"] for m in missing] == ["A3"] and "not in gemm_ladder.families.attention.STEPS" in \
        missing[0]["reason"] and "A2, A4" in missing[0]["reason"]


# ---- summary and targets from synthetic rows ----------------------------------------------
def _case(dtype, D, S, causal, cudnn=1.0, flash=2.0):
    return {"dtype": dtype, "D": D, "S": S, "causal": causal, "cudnn_tflops": 100 / cudnn if cudnn else None,
            "flash_tflops": 100 / flash, "efficient_tflops": None, "efficient_error": "RuntimeError: refused",
            **({} if cudnn else {"cudnn_error": "RuntimeError: refused"})}


def _row(c, step, ms, ok=True):
    cud, fl = 1.0 / c["cudnn_tflops"] * 100 if c["cudnn_tflops"] else None, 100 / c["flash_tflops"]
    return {"step": step, "dtype": c["dtype"], "D": c["D"], "S": c["S"], "causal": c["causal"], "ok": ok,
            "tflops": 100 / ms if ok else None, "ms": ms if ok else None,
            "ratio_to_cudnn": cud / ms if ok and cud else None, "ratio_to_flash": fl / ms if ok else None}


def test_summary_geomeans_best_step_and_targets():
    # case ms: cuDNN 1.0, flash 2.0 (1.5 at the second case; cuDNN refused at the last); each step's own
    cases = [_case("float16", 128, 4096, False), _case("bfloat16", 128, 16384, True, flash=1.5),
             _case("float16", 256, 4096, True), _case("float16", 64, 1024, False, cudnn=None)]
    ms = {"A2": [2.0, 1.25, 1.0, 1.0], "A4": [0.8, 1.0, 1.2, 0.5]}
    rows = [_row(c, st, ms[st][i]) for st in ms for i, c in enumerate(cases)]
    rows.append(_row(cases[0], "A5", None, ok=False))
    s = rep.summary(rows, cases, {"A4": "ping-pong"})
    assert s["steps"]["A2"]["geomean_to_cudnn"] == pytest.approx((0.5 * 0.8 * 1.0) ** (1 / 3))
    assert s["steps"]["A2"]["worst_to_cudnn"] == 0.5 and s["steps"]["A2"]["ok"] == 4
    assert s["steps"]["A4"]["label"] == "ping-pong"
    assert s["steps"]["A4"]["geomean_to_flash"] == pytest.approx((2.5 * 1.5 * 2 / 1.2 * 4.0) ** 0.25)
    assert s["steps"]["A5"] == {"label": "A5", "rows": 1, "ok": 0, "geomean_to_cudnn": None,
                                "worst_to_cudnn": None, "geomean_to_flash": None}
    assert [(b["step"], b["D"]) for b in s["best"]] == [("A4", 64), ("A4", 128), ("A2", 256), ("A4", 128)]
    by = {(t["D"], t["S"], t["against"]): t for t in s["targets"]}
    # cuDNN targets at S 4k/16k only: D=128 (both cases), D=256 (0.95); flash at every case
    assert set(by) == {(128, 4096, "cudnn"), (128, 16384, "cudnn"), (256, 4096, "cudnn"), (64, 1024, "flash"),
                       (128, 4096, "flash"), (128, 16384, "flash"), (256, 4096, "flash")}
    assert by[(128, 4096, "cudnn")]["met"] and by[(128, 4096, "cudnn")]["got"] == pytest.approx(1.25)
    assert by[(128, 16384, "cudnn")]["met"]  # best: A2 and A4 tie at 1.0 >= 1.00
    assert by[(256, 4096, "cudnn")]["met"] and by[(256, 4096, "cudnn")]["need"] == 0.95
    assert not by[(128, 16384, "flash")]["met"] and by[(128, 16384, "flash")]["got"] == pytest.approx(1.5)
    assert by[(64, 1024, "flash")]["met"] and by[(64, 1024, "flash")]["got"] == pytest.approx(4.0)
    assert (s["targets_met"], s["targets_total"], s["targets_unmeasured"]) == (6, 7, 0) and not s["all_ok"]
    assert rep.summary_lines(s)[-1] == "  missed: bf16 D128 S16k causal x flash >= 1.80: best A4 1.500"


def test_a_refused_backend_leaves_its_targets_unmeasured():
    c = _case("float16", 64, 4096, False, cudnn=None)
    s = rep.summary([_row(c, "A3", 0.5)], [c])
    t = next(t for t in s["targets"] if t["against"] == "cudnn")
    assert t["got"] is None and not t["met"] and s["targets_unmeasured"] == 1 and s["targets_met"] == 1
    lines = rep.summary_lines(s)
    assert lines[-2] == "targets met: 1/2 (1 unmeasured)"
    assert lines[-1] == "  missed: fp16 D64 S4k full x cuDNN >= 1.00: best A3 -"


def test_ladder_table_has_a_line_per_case_and_a_column_per_step_and_backend():
    cases = [_case("float16", 128, 4096, True), _case("bfloat16", 64, 1000, False, cudnn=None)]
    rows = [_row(cases[0], "A1", 4.0), _row(cases[0], "A2", 0.5), _row(cases[1], "A2", 1.0, ok=False)]
    lines = rep.ladder_table(rows, cases)
    assert len(lines) == 2 + len(cases)
    assert lines[0].split() == ["case", "A1", "A2", "cuDNN", "flash", "efficient", "best", "xcuDNN", "xflash"]
    assert lines[2].split() == ["fp16", "D128", "S4k", "causal", "25", "200", "100", "50", "n/a", "A2", "2.00", "4.00"]
    assert lines[3].split() == ["bf16", "D64", "S1000", "full", "-", "fail", "n/a", "50", "n/a", "-", "-", "-"]


# ---- one case on the CPU: the record's rows ------------------------------------------------
ROW_KEYS = {"step", "label", "D", "S", "causal", "dtype", "B", "H", "flops", "ok", "error", "reps", "ms", "ms_p10",
            "ms_p90", "tflops", "max_abs_err", "tolerance", "gpu", *(f"{b}_{k}" for b in rep.BACKENDS for k in
                                                                     ("ms", "tflops", "max_abs_err")),
            "ratio_to_cudnn", "ratio_to_flash", "ratio_to_efficient"}


class CpuBench:
    """bench.Bench's surface on the CPU: every kernel is called, the times are given (fn i: i + 1 ms)."""

    def __init__(self):
        self.torch, self.dev, self.gen = torch, "cpu", torch.Generator().manual_seed(0)
        self.nvml = types.SimpleNamespace(sample=lambda: {}, static=lambda: {})
        self.calls = 0

    def time_interleaved(self, fns, reps, flush=True):
        for _ in range(reps):
            for f in fns:
                f()
                self.calls += 1
        return [[1.0 + i] * reps for i in range(len(fns))]


def test_one_case_on_the_cpu_gives_the_record_rows(monkeypatch):
    monkeypatch.setattr(rep, "TOKENS", 128)
    monkeypatch.setattr(rep, "HIDDEN", 128)

    def attention(q, k, v, *, causal=False, scale=None, return_lse=False, step=None):
        o = ar.sdpa(q, k, v, causal=causal, scale=scale)
        o = ar.sdpa(q, k, v, causal=not causal, scale=scale) if step == "A3" else o  # a wrong mask
        return (o, None) if return_lse else o

    b = CpuBench()
    case, rows, skipped = ba.run_case(b, types.SimpleNamespace(attention=attention), "float16", 64, 64, True,
                                      ["A1", "A2", "A3"], True, labels={"A2": "fused"}, reps=4, budget_s=1.0)
    assert case["B"] == 2 and case["H"] == 2 and case["flops"] == 2 * 2 * 2 * 64 * 64 * 64 and skipped == []
    # on the CPU cuDNN and efficient refuse the case: null with torch's reason; flash runs
    assert case["cudnn_tflops"] is None and case["cudnn_error"].startswith("RuntimeError")
    assert case["efficient_ms"] is None and case["flash_ms"] == 1.0 and case["reps"] == 4
    by = {r["step"]: r for r in rows}
    assert all(ROW_KEYS <= set(r) for r in rows)
    a1, a2, a3 = by["A1"], by["A2"], by["A3"]
    assert a1["ok"] and a2["ok"] and a2["label"] == "fused" and a1["tolerance"] > a2["tolerance"]
    assert (a1["ms"], a2["ms"]) == (2.0, 3.0) and a2["ratio_to_flash"] == pytest.approx(1 / 3)
    assert a2["tflops"] == pytest.approx(case["flops"] / 3.0 / 1e9) and a2["ratio_to_cudnn"] is None
    assert not a3["ok"] and a3["ms"] is None and "max abs error" in a3["error"] and a3["ratio_to_flash"] is None
    assert b.calls == 3 * (1 + 4)  # flash, A1, A2 (A3 failed: not timed): a round to size n, then n = 4
    json.dumps(rows, allow_nan=False)  # no NaN in the record


def test_a1_is_skipped_at_16k_by_default(monkeypatch):
    monkeypatch.setattr(rep, "TOKENS", 1)  # B = 1 sequence
    monkeypatch.setattr(rep, "HIDDEN", 64)  # H = 1 head
    monkeypatch.setattr(rep, "A1_DEFAULT_MAX_S", 32)
    attention = lambda q, k, v, **kw: ar.sdpa(q, k, v, causal=kw["causal"])  # noqa: E731
    case, rows, skipped = ba.run_case(CpuBench(), types.SimpleNamespace(attention=attention), "bfloat16", 64, 64,
                                      False, ["A1", "A2"], True, labels={}, reps=3, budget_s=1.0)
    assert [r["step"] for r in rows] == ["A2"] and skipped[0]["step"] == "A1" and "by default" in skipped[0]["reason"]


def test_the_whole_run_on_the_cpu_writes_the_record_and_prints_the_ladder(monkeypatch, tmp_path):
    """run() and cli_main() end to end, bench.Bench and the GPU replaced by CpuBench and torch."""
    import gemm_ladder
    from gemm_ladder.library import runner
    for name, value in (("TOKENS", 128), ("HIDDEN", 128), ("A1_DEFAULT_MAX_S", 64)):
        monkeypatch.setattr(rep, name, value)
    monkeypatch.setattr(rep, "fused_steps", lambda: {"A2": "fused", "A4": "ping-pong"})
    monkeypatch.setattr(rep, "family_problem", lambda: None)
    monkeypatch.setattr(ba.bench, "Bench", lambda dev: types.SimpleNamespace(**vars(CpuBench()), flush_buf=torch.empty(4),
                                                                             time_interleaved=CpuBench().time_interleaved))
    monkeypatch.setattr(runner, "check_device", lambda dev: None)
    monkeypatch.setattr(torch.cuda, "set_device", lambda dev: None)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda dev: "a CPU standing in")
    monkeypatch.setattr(gemm_ladder, "attention", lambda q, k, v, **kw: ar.sdpa(q, k, v, causal=kw["causal"]),
                        raising=False)
    said = []
    console = types.SimpleNamespace(print=lambda m, **kw: said.append(m))
    args = types.SimpleNamespace(dtype="float16", head_dims=[64], seqlens=[64, 128], attn_steps=None, reps=50,
                                 budget=2.0)
    path = tmp_path / "attention.json"
    assert ba.cli_main(args, console, tmp_path, path) == 0
    rec = json.loads(path.read_text())
    assert rec["kind"] == "gemm-ladder bench --attention" and {"commit", "date", "gpu", "torch", "command"} <= set(rec)
    assert rec["method"]["reps"] == 20 and rec["method"]["budget_s_per_kernel"] == 0.3  # the caps
    assert [(c["S"], c["causal"]) for c in rec["cases"]] == [(64, False), (64, True), (128, False), (128, True)]
    # A1 only at S <= 64 here; "lib": the library's own choice of build, named in the row
    assert [r["step"] for r in rec["rows"]] == ["A1", "A2", "A4", "lib"] * 2 + ["A2", "A4", "lib"] * 2
    assert {r["build"] for r in rec["rows"] if r["step"] == "lib"} == {"A5:d", "A5:c3p"}
    assert [(s["step"], s["S"]) for s in rec["skipped"]] == [("A1", 128)] * 2
    assert all(ROW_KEYS <= set(r) and r["ok"] for r in rec["rows"])
    assert rec["summary"]["targets_total"] == 4 and set(rec["summary"]["steps"]) == {"A1", "A2", "A4", "lib"}
    text = "\n".join(said)
    assert text.count("skipped: A1 at S 128: A1 runs at S <= 64 by default") == 1
    assert "fp16 D64 S128 causal" in text and f"results: {path}" in text and "targets met: " in text
    table = said[said.index(next(m for m in said if m.startswith("case"))):][:6]
    assert len(table) == 6 and table[0].split()[:5] == ["case", "A1", "A2", "A4", "lib"]


# ---- the reference ------------------------------------------------------------------------
@pytest.mark.parametrize("Hq, Hkv, Sq, Sk, causal", [(4, 2, 17, 33, True), (2, 2, 40, 9, True), (8, 1, 5, 5, False)])
def test_reference_matches_torch_sdpa_in_float64(Hq, Hkv, Sq, Sk, causal):
    g = torch.Generator().manual_seed(1)
    q, k, v = (torch.randn(2, h, s, 64, generator=g, dtype=torch.float64) for h, s in ((Hq, Sq), (Hkv, Sk), (Hkv, Sk)))
    o, lse, logit_max = ar.reference(q, k, v, causal=causal, scale=0.3)
    torch.testing.assert_close(o, ar.sdpa(q, k, v, causal=causal, scale=0.3))
    s = (q @ k.repeat_interleave(Hq // Hkv, 1).transpose(-1, -2)) * 0.3
    if causal:
        s = s.masked_fill(torch.ones(Sq, Sk, dtype=torch.bool).triu(1), -math.inf)
    torch.testing.assert_close(lse, torch.logsumexp(s, -1))
    rows = [0, Sq - 1]
    o2, lse2, _ = ar.reference(q, k, v, causal=causal, scale=0.3, rows=rows)
    torch.testing.assert_close(o2, o[:, :, rows])
    torch.testing.assert_close(lse2, lse[:, :, rows])
    assert float(logit_max.max()) == pytest.approx(float(s[torch.isfinite(s)].abs().max()))


def test_sample_rows_spread_over_s_and_include_the_last():
    r = ar.sample_rows(16384)
    assert r[0] == 0 and r[-1] == 16383 and 1024 <= len(r) <= 1025 and max(b - a for a, b in zip(r, r[1:])) == 16
    assert ar.sample_rows(17) == list(range(17))


# ---- the CLI's doors ----------------------------------------------------------------------
def _main(capsys, *args):
    try:
        code = cli.main(list(args))
    except SystemExit as e:  # argparse's usage errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("args, needles", [
    (("--attention", "--api"), ("--attention is its own benchmark", "without --api")),
    (("--attention", "--fp8"), ("without --fp8",)),
    (("--attention", "--suite", "llm"), ("without --suite",)),
    (("--attention", "--steps", "7", "--library"), ("without --library, --steps",)),
    (("--attention", "--sizes", "4096"), ("without --sizes",)),
    (("--attention", "--call", "matmul"), ("without --call",)),
    (("--attention", "--dry-run"), ("without --dry-run",)),
    (("--head-dims", "128"), ("--head-dims narrows the attention benchmark", "add --attention")),
    (("--fp8", "--seqlens", "4k", "--attn-steps", "A2"), ("--seqlens, --attn-steps narrow",)),
    (("--attention", "--head-dims", "96"), ("bad head dim '96'", "64, 128, 256")),
    (("--attention", "--seqlens", "0"), ("bad sequence length '0'",)),
    (("--attention", "--seqlens", "4q"), ("bad sequence length '4q'",)),
    (("--attention", "--attn-steps", "A9"), ("unknown attention step 'A9'",)),
    (("--attention", "--dtype", "fp32"), ("unknown dtype",)),
])
def test_bench_attention_is_given_alone_in_one_line(capsys, tmp_path, monkeypatch, args, needles):
    monkeypatch.chdir(tmp_path)
    code, out, err = _main(capsys, "bench", *args)
    assert code == 2 and "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and all(n in lines[0] for n in needles), err
    assert not (tmp_path / "out").exists()  # refused before any work


def test_attention_flags_parse():
    args = cli.build_parser().parse_args(["bench", "--attention", "--head-dims", "256,64,64", "--seqlens", "1k,4096,16K",
                                          "--attn-steps", "a1,A4", "--dtype", "bf16"])
    assert args.attention and args.head_dims == [256, 64] and args.seqlens == [1024, 4096, 16384]
    assert args.attn_steps == ["A1", "A4"] and args.dtype == "bfloat16"
    assert cli.build_parser().parse_args(["bench", "--attention", "--attn-steps", "all"]).attn_steps == \
        ["A1", "A2", "A3", "A4", "A5"]


@pytest.mark.skipif(HOPPER, reason="checks the machine without a Hopper GPU")
def test_bench_attention_without_hopper_is_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = _main(capsys, "bench", "--attention", "--seqlens", "1k")
    assert code == 2 and err.count("\n") == 1 and "needs a Hopper GPU" in err


def test_default_record_name():
    result = {"date": "2026-12-04T10:00:00+00:00", "commit": "0123456789abcdef", "gpu": {"torch_name": "NVIDIA H200"}}
    assert ba.default_json_path(Path("out"), result) == Path("out/2026-12-04_h200_attention_0123456.json")
    result["gpu"] = {"torch_name": "NVIDIA H100 80GB HBM3"}  # named by the card that ran it
    assert ba.default_json_path(Path("out"), result) == Path("out/2026-12-04_h100_attention_0123456.json")


def test_results_index_files_the_attention_records():
    spec = importlib.util.spec_from_file_location("results_index_attention", ROOT / "scripts" / "results_index.py")
    ri = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = ri
    spec.loader.exec_module(ri)
    name = ba.default_json_path(Path("."), {"date": "2026-12-04T10", "commit": "abc1234"}).name
    assert ri.parse(name) == ("2026-12-04", "attention", "abc1234", "json")
    assert ri.classify("attention")[:2] == ("Attention", "The attention steps against torch SDPA's backends "
                                                         "(`gemm-ladder bench --attention`)")
    assert ri.classify("fuzz_attention")[:2] == ("Trust checks", "Fuzzer, the attention door "
                                                                 "(`scripts/fuzz_attention.py`)")
    for tool in ("memcheck", "racecheck", "synccheck"):
        assert ri.classify(f"sanitizer_attention_{tool}")[1].startswith("compute-sanitizer, the attention steps")
    assert ri.classify("attention_fwd")[0] == ri.OTHER


# ---- the fuzzer -----------------------------------------------------------------------------
STEPS = [None, "A1", "A2", "A3", "A4", "A5"]


def test_fuzz_cases_are_reproducible_and_independent():
    a = [fuzz.gen_case(7, i, STEPS) for i in range(60)]
    assert a == [fuzz.gen_case(7, i, STEPS) for i in range(60)]
    assert a != [fuzz.gen_case(8, i, STEPS) for i in range(60)]
    assert fuzz.gen_case(7, 41, STEPS) == a[41]  # no state carried from case to case
    json.dumps(a, allow_nan=False)


def test_fuzz_cases_cover_the_kinds_asked_for():
    cs = [fuzz.gen_case(0, i, STEPS) for i in range(300)]  # the default run
    seq = [c["Sq"] for c in cs] + [c["Sk"] for c in cs]
    assert {1, 17} <= set(seq) and any(s % 64 and s > 64 for s in seq) and any(s % 128 == 64 for s in seq)
    assert any(c["Sq"] != c["Sk"] for c in cs) and any(c["Sq"] == c["Sk"] for c in cs)
    assert {c["Hq"] // c["Hkv"] for c in cs} >= {1, 2, 4, 8} and any(c["Hkv"] == 1 and c["Hq"] > 1 for c in cs)
    assert {c["D"] for c in cs} == {64, 128, 256} and {c["dtype"] for c in cs} == {"float16", "bfloat16"}
    assert {L for c in cs for L in c["layouts"].values()} == set(fuzz.LAYOUTS)
    assert {c["scale_kind"] for c in cs} == set(fuzz.SCALES) and {c["causal"] for c in cs} == {False, True}
    assert {c["return_lse"] for c in cs} == {False, True} and {c["step"] for c in cs} == set(STEPS)
    assert min(c["scale"] for c in cs if c["scale"]) == 1e-4 and max(c["scale"] for c in cs if c["scale"]) == 2.0
    assert all(c["B"] * c["Hq"] * c["Sq"] * c["Sk"] <= fuzz.SCORE_CAP and c["Hq"] % c["Hkv"] == 0 for c in cs)


def test_fuzz_layouts_are_the_views_asked_for():
    g = torch.Generator().manual_seed(0)
    shape = (2, 3, 5, 64)
    c = fuzz.make(shape, "contiguous", torch.float16, g, "cpu")
    t = fuzz.make(shape, "bshd", torch.float16, g, "cpu")
    s = fuzz.make(shape, "strided-d", torch.float16, g, "cpu")
    o = fuzz.make(shape, "offset-d", torch.float16, g, "cpu")
    assert c.is_contiguous() and t.stride() == (3 * 5 * 64, 64, 3 * 64, 1)
    assert s.stride()[-1] == 2 and torch.isnan(s._base).sum() == s.numel()  # the gaps hold NaN
    assert o.storage_offset() % 8 == 1 and o.stride(-2) == 65
    assert all(tuple(x.shape) == shape and bool(torch.isfinite(x).all()) for x in (c, t, s, o))


def _broken(kind):
    def impl(q, k, v, *, causal=False, scale=None, return_lse=False, step=None):
        o, lse = fuzz.torch_stand_in(q, k, v, causal=causal, scale=scale, return_lse=True)
        if kind == "bottom-right causal" and causal:
            Sq, Sk = q.shape[2], k.shape[2]
            mask = torch.ones(Sq, Sk, dtype=torch.bool).tril(Sk - Sq)
            g = q.shape[1] // k.shape[1]
            o = torch.nn.functional.scaled_dot_product_attention(
                q, k.repeat_interleave(g, 1), v.repeat_interleave(g, 1), attn_mask=mask, scale=scale)
        elif kind == "last row unwritten":
            o = o.clone()
            o[:, :, -1] = math.nan
        elif kind == "lse in base 2":
            lse = lse / math.log(2)
        elif kind == "refuses":
            raise ValueError("attention: not this shape")
        return (o, lse) if return_lse else o
    return impl


@pytest.mark.parametrize("kind, case", [
    ("bottom-right causal", dict(Sq=5, Sk=40, causal=True, return_lse=False)),
    ("last row unwritten", dict(Sq=17, Sk=17, causal=False, return_lse=False)),
    ("lse in base 2", dict(Sq=17, Sk=33, causal=False, return_lse=True)),
    ("refuses", dict(Sq=1, Sk=9, causal=False, return_lse=False)),
])
def test_fuzz_check_catches_wrong_results(kind, case):
    base = {"index": 0, "dtype": "float16", "B": 1, "Hq": 4, "Hkv": 2, "D": 64, "scale_kind": "default",
            "scale": None, "step": "A2", "layouts": {"q": "bshd", "k": "offset-d", "v": "strided-d"}, "data_seed": 5}
    c = {**base, **case}
    assert fuzz.run_case(c, "cpu", fuzz.torch_stand_in)["ok"]  # the same case, done right, passes
    bad = fuzz.run_case(c, "cpu", _broken(kind))
    assert not bad["ok"]
    if kind == "refuses":
        assert bad["error"] == "ValueError: attention: not this shape"
    elif kind == "lse in base 2":
        assert bad["max_abs_err"] <= bad["tolerance"] and not bad["lse_ok"] and bad["lse_excess"] > 0
    else:
        assert kind != "last row unwritten" or not bad["finite"]


def test_fuzz_script_writes_its_record_on_the_cpu(tmp_path):
    out = tmp_path / "fuzz_attention.json"
    p = subprocess.run([sys.executable, str(ROOT / "scripts" / "fuzz_attention.py"), "--device", "cpu", "--impl",
                        "torch", "--cases", "12", "--score-cap", str(1 << 14), "--json", str(out)],
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    assert "fuzz attention: 12 cases, 0 failures" in p.stdout
    rec = json.loads(out.read_text())
    assert rec["kind"] == "fuzz attention" and rec["failures"] == 0 and rec["failed"] == [] and len(rec["cases"]) == 12
    assert rec["impl"] == "torch" and rec["steps"][:2] == [None, "A1"]
    assert all(c["ok"] and c["max_abs_err"] <= c["tolerance"] for c in rec["cases"])


# ---- the sanitizer driver and the device session ---------------------------------------------
def test_sanitizer_cases_cover_every_step_head_dim_mask_and_ragged_gqa_shape():
    cs = list(san.cases(["A1", "A2", "A5"]))
    assert {c[0] for c in cs} == {"A1", "A2", "A5"} and {c[1] for c in cs} == {"float16", "bfloat16"}
    assert {c[2] for c in cs} == {64, 128, 256} and {c[3] for c in cs} == {False, True}
    shapes = {c[4] for c in cs}
    assert {17, 200} <= {s for sh in shapes for s in sh[3:]} and any(sh[1] > sh[2] for sh in shapes)
    assert any(sh[2] == 1 and sh[1] > 1 for sh in shapes)  # MQA
    assert any(c[5] for c in cs)  # return_lse
    assert any(sh[0] * sh[1] * -(-sh[3] // 128) > 132 for sh in shapes)  # persistent CTAs walk several tiles
    assert san.library_builds()["A5:c3d"] == (64,) and san.library_builds()["A5:d"] == (64, 128, 256)
    first = list(san.cases(["A2"], san.SHAPES[:1], ["float16"]))  # racecheck's run
    assert len(first) == 3 * 2 * 2 and first[0][4] == (1, 4, 2, 200, 200)


def test_device_session_names_its_attention_stages():
    text = (ROOT / "scripts" / "device_session.sh").read_text()
    assert subprocess.run(["bash", "-n", str(ROOT / "scripts" / "device_session.sh")]).returncode == 0
    lines = text.splitlines(keepends=True)
    header = "".join(lines[:next(i for i, line in enumerate(lines) if not line.startswith("#"))])  # the opening comment
    stages = set(re.findall(r"\bhas (\w+)", text)) | set(re.findall(r"for stage in ([\w ]+); do", text)[0].split())
    assert {"attention", "attnfuzz", "attnsan"} <= stages
    assert all(re.search(rf"\b{s}\b", header) for s in stages), [s for s in stages if s not in header]
    assert "bench --attention" in text and "scripts/fuzz_attention.py" in text
    for tool in ("memcheck", "racecheck", "synccheck"):
        assert tool in text.split("if has attnsan")[1].split("\nfi\n")[0]
