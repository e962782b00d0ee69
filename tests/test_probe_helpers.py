"""The probes' shared check-and-time loop (measure/probe.py), on the CPU with stand-in plans."""
import types

import pytest
import torch

from gemm_ladder.measure import probe


def _inputs():
    g = torch.Generator().manual_seed(3)
    return torch.randn(16, 64, generator=g).half(), torch.randn(32, 64, generator=g).half()


def _plan(kind):
    def make(st, a, b, out):
        if kind == "fails":
            raise ValueError("does not take this shape")
        calls = []

        def run():
            calls.append(1)
            r = (a.float() @ b.float().T).to(out.dtype)
            if kind == "wrong":
                r = r + 1
            if kind == "moving" and len(calls) > 1:
                r[0, 0] += 1
            out.copy_(r)
        return run
    return make


def test_checked_plans_check_repeat_and_leave_out_what_cannot_run(capsys):
    a, b = _inputs()
    rows = {}
    for kind in ("good", "wrong", "moving", "fails"):
        got = probe.checked_plans({kind: None}, a, b, _plan(kind), "16x32x64", repeats=2)
        rows[kind] = got[0][2:4] if got else None
    assert rows == {"good": (True, True), "wrong": (False, True), "moving": (True, False), "fails": None}
    assert "16x32x64 fails: ValueError: does not take this shape" in capsys.readouterr().out


def test_deal_text():
    d = types.SimpleNamespace(deal=types.SimpleNamespace(ctas=128, units=64, planes=2, dsmem=True, fixup=True))
    assert probe.deal_text(d) == "c128 u64 p2 dsmem fixup"
    assert probe.deal_text(object()) is None


def test_time_against_cublas_rows_per_candidate_and_flush(capsys):
    a, b = _inputs()
    checked = probe.checked_plans({"good": None}, a, b, _plan("good"), "s")

    class Bench:
        flush_l2 = None

        def time_interleaved(self, fns, reps):
            assert len(fns) == 2 and reps == 3
            return [[0.002] * reps, [0.001] * reps]  # ours 2 us, cuBLAS 1 us
    rows = probe.time_against_cublas(Bench(), checked, a, b, 3, "s", dict(M=16), flush_fns={"zero": None, "read": None})
    assert [(r["flush"], r["kernel"], r["M"]) for r in rows] == [("zero", "good", 16), ("read", "good", 16)]
    assert all(abs(r["ratio_to_cublas"] - 0.5) < 1e-9 and r["ok"] and r["repeat_identical"] for r in rows)
    assert "s zero: cuBLAS 1.0 us\n  good [None] 2.0 (0.500)" in capsys.readouterr().out


def test_sweep_rows_per_pass_dtype_shape_and_candidate(capsys):
    seen = []

    class Bench:
        flush_l2 = None

        def inputs(self, M, N, K, dtype):
            g = torch.Generator().manual_seed(M + N + K)
            return (torch.randn(M, K, generator=g).to(dtype), torch.randn(N, K, generator=g).to(dtype))

        def time_interleaved(self, fns, reps):
            return [[0.002] * reps for _ in fns[:-1]] + [[0.001] * reps]

    def candidates(M, N, K, dt):
        seen.append((M, N, K, dt))
        return {"good": None, "fails": None}

    rows = probe.sweep(Bench(), "16x32x64,8x16x32", "float16", 2,
                       lambda *k: {n: n for n in candidates(*k)},
                       lambda n, a, b, out: _plan(n)(n, a, b, out), 3, flush_fns={"zero": None})
    assert seen == [(16, 32, 64, "float16"), (8, 16, 32, "float16")] * 2
    assert [(r["pass_"], r["M"], r["kernel"]) for r in rows] == [(0, 16, "good"), (0, 8, "good"), (1, 16, "good"), (1, 8, "good")]
    assert all(r["ok"] and r["dtype"] == "float16" for r in rows)
    assert "16x32x64 float16 fails: ValueError" in capsys.readouterr().out


def test_add_sweep_args_defaults_and_overrides():
    import argparse
    ap = argparse.ArgumentParser()
    probe.add_sweep_args(ap, shapes="16x32x64", reps=50)
    a = ap.parse_args([])
    assert (a.shapes, a.dtypes, a.reps, a.passes, a.json) == ("16x32x64", "float16,bfloat16", 50, 2, None)
    a = ap.parse_args(["--dtypes", "bfloat16", "--passes", "1", "--json", "x.json"])
    assert (a.dtypes, a.passes, a.json) == ("bfloat16", 1, "x.json")


def test_kernels_from_builds_the_other_tree_inside_the_block_only(monkeypatch, tmp_path):
    from gemm_ladder.cuda import jit
    seen = []
    monkeypatch.setattr(jit, "compile_kernel", lambda src, name, defines=None, **kw: seen.append(
        (name, kw.get("kernel_dir"))))
    with probe.kernels_from(tmp_path):
        jit.compile_kernel("a.cu", "k", {"X": 1})
    jit.compile_kernel("a.cu", "k", {"X": 1})
    with probe.kernels_from(tmp_path, when=lambda d: d.get("EXP")):
        jit.compile_kernel("a.cu", "plain", {"X": 1})
        jit.compile_kernel("a.cu", "exp", defines={"EXP": 1})
    assert seen == [("k", tmp_path), ("k", None), ("plain", None), ("exp", tmp_path)]


def test_parse_switches():
    assert probe.parse_switches([]) is None
    assert probe.parse_switches(["GL_ABLATE_NO_MMA=1", "GL_ABLATE_SKEW_NS=-5"]) == {"GL_ABLATE_NO_MMA": 1,
                                                                                   "GL_ABLATE_SKEW_NS": -5}
    for bad in ("GL_ABLATE_NO_MMA", "NO_MMA=1", "GL_X=one"):
        with pytest.raises(SystemExit, match="GL_NAME=INTEGER"):
            probe.parse_switches([bad])


def test_add_flush_arg_names_the_two_flushes():
    import argparse
    ap = argparse.ArgumentParser()
    probe.add_flush_arg(ap)
    assert ap.parse_args([]).flush == "zero" and ap.parse_args(["--flush", "read"]).flush == "read"
    with pytest.raises(SystemExit):
        ap.parse_args(["--flush", "none"])
    bench = types.SimpleNamespace(flush_buf=torch.ones(4))
    assert set(probe.flushes(bench)) == {"zero", "read"}  # the choices are the flushes there are
