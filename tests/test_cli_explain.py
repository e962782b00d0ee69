"""`gemm-ladder explain` agrees with the library's call (no GPU: the call runs under
fake_gpu.FakeGpu with emulate=False, which records the kernel it prepares), and the
simulate command's refusals of --step variants and attention what-ifs say the real reason."""
import json
import re

import pytest
import torch

import gemm_ladder
from fake_gpu import FakeGpu
from gemm_ladder.cli import commands as cli
from gemm_ladder.library import fastpath

SHAPES = [(1, 1, 1), (7, 9, 13), (127, 8191, 255), (16, 4096, 4096), (3000, 5000, 4000)]


def explain(capsys, *args) -> tuple[int, str, str]:
    try:
        code = cli.main(["explain", *map(str, args), "--sms", "132"])
    except SystemExit as e:  # argparse's usage errors
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def library_call(M: int, N: int, K: int, row_major: bool, ldb: int | None = None):
    """The library's configuration for a (M, K) @ b, b row-major (K, N) or (N, K), with row
    stride ldb (default contiguous); zeros on the CPU."""
    a = torch.zeros(M, K, dtype=torch.float16)
    rows, cols = (K, N) if row_major else (N, K)
    b = torch.zeros(rows, ldb or cols, dtype=torch.float16)[:, :cols]
    (gemm_ladder.matmul if row_major else gemm_ladder.matmul_nt)(a, b)
    return list(fastpath.CONFIGS.entries.values())[-1]


CASES = [(*s, row_major, None) for s in SHAPES for row_major in (False, True)] + [
    (16, 4096, 4096, False, 4100),  # not a multiple of 8: b copied
    (16, 4096, 4096, False, 4104),  # rows of 8208 bytes: not whole 32-byte sectors
    (3000, 5000, 4000, True, 5008),  # row-major, aligned rows
    (7, 9, 13, True, 16)]


@pytest.mark.parametrize("M,N,K,row_major,ldb", CASES)
def test_explain_names_the_kernel_and_copies_the_library_prepares(monkeypatch, capsys, M, N, K, row_major, ldb):
    gpu = FakeGpu(monkeypatch, emulate=False)
    cfg = library_call(M, N, K, row_major, ldb)
    ran = gpu.prepared[-1][0]
    monkeypatch.setenv("COLUMNS", "300")  # one line per statement
    flags = (["--b-row-major"] if row_major else []) + (["--ldb", ldb] if ldb else [])
    code, out, err = explain(capsys, M, N, K, *flags, "--json")
    assert code == 0, err
    assert json.loads(out)["runs"] == ran
    code, out, err = explain(capsys, M, N, K, *flags)
    assert code == 0, err
    assert re.search(r" runs: ([\w:]+)", out).group(1) == ran
    assert re.search(r"predicted: [\d.]+ us for ([\w:]+)", out).group(1) == ran  # one kernel in the explanation
    for name, op in (("a", cfg.a), ("b", cfg.b)):
        assert (f"the call copies {name} first" in out) == (not op.direct), (name, op)


@pytest.mark.parametrize("args,row", [((4096, 4096, 4096, "--ldb", 3), "K = 4096"),
                                      ((4096, 4096, 4096, "--ldb", 4000), "K = 4096"),
                                      ((64, 5000, 128, "--b-row-major", "--ldb", 4096), "N = 5000")])
def test_explain_refuses_an_ldb_shorter_than_the_rows(capsys, args, row):
    code, out, err = explain(capsys, *args)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and "--ldb" in err and row in err and "Traceback" not in err


def test_explain_says_why_the_call_runs_another_kernel_than_the_pick(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    code, out, _ = explain(capsys, 7, 9, 13, "--b-row-major")
    assert code == 0 and "pick: smallm:n32 " in out
    # the next in the ranking that reads an N-major b (at K = 13 the 128-wide n64s and n64 pad K to 128)
    assert "runs: smallm:n128, not the pick (smallm:n32 does not read an N-major b" in out
    assert "predicted:" in out and "for smallm:n32" not in out


# ---- simulate ----------------------------------------------------------------------------

def simulate(capsys, tmp_path, *args) -> tuple[int, str, str]:
    try:
        code = cli.main(["--out-dir", str(tmp_path), "simulate", *args])
    except SystemExit as e:
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("variant", ["7:d17", "7:d99", "7:d100000"])
def test_simulate_refuses_a_step_variant_deeper_than_the_depth_cap(capsys, tmp_path, variant):
    code, out, err = simulate(capsys, tmp_path, "--step", variant)
    assert code == 2 and out == "" and not list(tmp_path.iterdir())
    assert len(err.strip().splitlines()) == 1 and f"{variant}: depth" in err and "over 16" in err


def test_simulate_names_the_attention_what_if_as_the_reason(capsys, tmp_path):
    code, out, err = simulate(capsys, tmp_path, "--step", "10", "--what-if", "pingpong-order-swapped")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert "pingpong-order-swapped breaks an attention step (default A4" in err and "--step is for the GEMM" in err
    assert "not for --attention" not in err
    code, _, err = simulate(capsys, tmp_path, "--attention", "A4", "--step", "10")  # --attention given: as before
    assert code == 2 and "--step is for the GEMM steps, not for --attention" in err


def test_explain_agrees_with_the_library_on_random_calls(monkeypatch):
    """The plan `explain` prints (explain_call.plan_call: the call's own fastpath.kernel_for and
    layouts) against what the library prepares, on 150 random shapes, b layouts, row strides
    and dtypes: the same kernel and the same copies."""
    import random
    from gemm_ladder.cli import explain_call
    gpu = FakeGpu(monkeypatch, emulate=False)
    rng = random.Random(2026)
    dims = [1, 2, 7, 8, 16, 17, 63, 64, 100, 127, 128, 129, 255, 256, 511, 1000, 1024, 2047, 3000, 4096, 5000]
    for _ in range(150):
        M, N, K = (rng.choice(dims) for _ in range(3))
        row_major = rng.random() < 0.5
        ldb = rng.choice([None, None, (N if row_major else K) + rng.choice([1, 3, 8, 16, 24])])
        dtype = rng.choice(["float16", "bfloat16"])
        fastpath.CONFIGS.clear()
        a = torch.zeros(M, K, dtype=getattr(torch, dtype))
        rows, cols = (K, N) if row_major else (N, K)
        b = torch.zeros(rows, ldb or cols, dtype=a.dtype)[:, :cols]
        (gemm_ladder.matmul if row_major else gemm_ladder.matmul_nt)(a, b)
        cfg = list(fastpath.CONFIGS.entries.values())[-1]
        plan = explain_call.plan_call(M, N, K, dtype, 132, row_major, ldb)
        what = (M, N, K, row_major, ldb, dtype)
        assert plan.run.key == gpu.prepared[-1][0] == cfg.step.key, what
        assert (plan.a_op.direct, plan.b_op.direct) == (cfg.a.direct, cfg.b.direct), what
