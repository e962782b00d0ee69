"""The fuzzer's CPU side (runs in CI): case generation, layouts on CPU tensors, the
tolerance, reproducer lines, and the checker catching deliberately broken results."""
import math
import random
from collections import Counter

import pytest
import torch

import fuzz_check as fc
import fuzz_support as fs

SMALL = dict(max_dim=96, work_cap=1 << 17)  # CPU-sized cases, same families


@pytest.fixture(scope="module")
def many():
    return list(fs.cases(2026, 2000))


def test_cases_are_reproducible_and_independent():
    a = list(fs.cases(5, 50))
    assert a == list(fs.cases(5, 50))
    assert a != list(fs.cases(6, 50))
    # case i does not depend on the cases before it
    assert fs.generate(5, 37, a[37].dtype) == a[37]
    assert list(fs.cases(5, 10, start=20)) == a[20:40]


def test_reproducer_is_one_line_that_rebuilds_the_case(many):
    for c in many:
        line = c.repro()
        assert "\n" not in line and f"seed={c.seed} index={c.index}" in line
        for field in (f"M={c.M}", f"N={c.N}", f"K={c.K}", f"dtype={c.dtype}", f"a={c.a}", f"b={c.b}",
                      f"out={c.out}", f"target={c.target}"):
            assert field in line
        assert fs.Case.from_line(line.split("'")[1]) == c
    assert fs.Case.from_line("seed=1 index=2 target=matmul dtype=float16 M=3 N=4 K=5 batch=2x3").batch == (2, 3)


def test_shapes_stay_in_range_and_lean_on_edges(many):
    dims = [d for c in many for d in (c.M, c.N, c.K)]
    assert min(dims) >= 1 and max(dims) <= 10_000 * 25  # M may hold batch dims
    assert max(c.N for c in many) <= fs.MAX_DIM and max(c.K for c in many) <= fs.MAX_DIM
    for c in many:
        cap = fs.NAIVE_WORK_CAP if c.step == "1" else fs.WORK_CAP
        assert c.M * c.N * c.K <= cap, c.line()
    near_edge = sum(any(d % t in (0, 1, t - 1) for t in fs.TILES) and d > 2 for d in dims) / len(dims)
    assert near_edge > 0.3  # uniform draws would land there ~5% of the time
    seen = Counter(dims)
    for special in (1, 8191, 8192, 8193, 127, 129, 255, 257, 9973):
        assert seen[special] > 0, special
    assert sum(seen[p] for p in fs.PRIMES) > len(dims) * 0.05


def test_every_family_is_covered(many):
    per = {k: Counter() for k in ("a", "b", "out", "values", "target", "step", "dtype", "batch")}
    for c in many:
        for k, v in fc.coverage(c).items():
            if k in per:
                per[k][v] += 1
    assert per["dtype"] == Counter({"float16": 2000, "bfloat16": 2000})
    assert set(fs.A_LAYOUTS) <= set(per["a"]) and set(fs.B_LAYOUTS) <= set(per["b"])
    assert set(fs.OUT_KINDS) <= set(per["out"]) and set(fs.VALUES) <= set(per["values"])
    assert set(per["target"]) == {"matmul", "matmul@step", "run_step"}
    assert set(fs.step_keys()) <= set(per["step"]) and per["batch"]["batched"] > 100
    run_steps = Counter(c.step for c in many if c.kind == "run_step")
    # each step key draws ~1/len(keys) of the run_step cases (~55 of ~1,150 with 21 keys): a floor
    # three standard deviations under that mean
    mean = sum(run_steps.values()) / len(fs.step_keys())
    assert set(run_steps) == set(fs.step_keys()) and min(run_steps.values()) >= mean - 3 * mean ** 0.5


def test_step_cases_are_shapes_the_step_accepts(many):
    for c in many:
        if c.step is not None:
            assert fs.get_step(c.step).accepts(c.M, c.N, c.K), c.line()
        if c.kind == "run_step":
            assert (c.a, c.b, c.batch) == ("row-major", fs.RUN_STEP_B, ()) and c.out in ("none", "contiguous")
    c = fs.for_step(many[0], "2")
    assert c.M % 128 == 0 and c.N % 128 == 0 and c.K % 64 == 0 and c.target == "run_step:2"


@pytest.mark.parametrize("layout", sorted(set(fs.A_LAYOUTS) | set(fs.B_LAYOUTS)))
@pytest.mark.parametrize("lead", [(), (3,), (2, 2)])
def test_layouts_hold_the_same_values(layout, lead):
    g = torch.Generator().manual_seed(1)
    logical = torch.randn((*lead, 7, 13), generator=g).half()
    view, guards = fs.place(logical, layout, pad=3, off=5)
    assert view.shape == logical.shape and torch.equal(view, logical)
    assert all(torch.isnan(x).all() for x in guards)
    if layout == "row-major":
        assert view.is_contiguous() and view.data_ptr() != logical.data_ptr()
    elif layout in ("transposed", "transposed-padded"):
        assert view.stride(-2) == 1 and not view.is_contiguous()
    elif layout == "padded-rows":
        assert view.stride(-2) == 13 + 3
    elif layout == "every-other-row":
        assert view.stride(-2) == 2 * 13
    elif layout == "misaligned":
        assert view.is_contiguous() and view.data_ptr() % 16 != 0


def test_built_case_matches_its_description():
    for c in fs.cases(11, 300, **SMALL):
        b = fs.build(c, "cpu")
        assert b.a_logical.shape == (*c.batch, c.rows, c.K) and b.b_logical.shape == (c.K, c.N)
        assert str(b.a_logical.dtype) == f"torch.{c.dtype}"
        if c.kind == "run_step":
            assert b.b.shape == (c.N, c.K) and b.b.is_contiguous() and b.a.is_contiguous()
        else:
            assert b.b.shape == (c.K, c.N)
        if c.out != "none":
            assert b.out.shape == ((c.M, c.N) if c.kind == "run_step" else (*c.batch, c.rows, c.N))
            assert torch.isnan(b.out).all()  # poisoned: every element must be written
        if c.values == "exact-int":
            assert torch.equal(b.a_logical, b.a_logical.round()) and b.a_logical.abs().max() <= 4
        assert torch.equal(fs.build(c, "cpu").a_logical, b.a_logical)  # data is reproducible


def test_large_values_cannot_overflow_fp16():
    c = fs.Case(seed=0, index=0, target="matmul", dtype="float16", M=64, N=64, K=9973, values="large",
                data_seed=3)
    b = fs.build(c, "cpu")
    ref = b.a_logical.double() @ b.b_logical.double()
    assert b.a_logical.abs().max() > 300  # large inputs, products beyond fp16's range ...
    assert ref.abs().max() < 65504 / 2  # ... but a result that fits


def test_ulp():
    assert fc.ulp("float16", 1.0) == 2 ** -10 and fc.ulp("float16", 1.99) == 2 ** -10
    assert fc.ulp("float16", 2.0) == 2 ** -9 and fc.ulp("bfloat16", 1.0) == 2 ** -7
    assert fc.ulp("float16", 1e-7) == 2 ** -24 and fc.ulp("float16", 0.0) == 2 ** -24  # subnormal spacing
    assert fc.ulp("float16", 65504) == 32


def test_tolerance_terms():
    assert fc.tolerance("float16", 4096, 100.0, 4096.0, 0.03, exact=True) == (0.0, "exact")
    tol, basis = fc.tolerance("float16", 4096, 100.0, 4096.0, 0.03)
    assert basis == "2x-cublas" and tol == pytest.approx(0.06)
    tol, basis = fc.tolerance("float16", 4096, 100.0, 4096.0, 1e-9)  # cuBLAS luckily exact
    assert basis == "floor" and 0.5 * fc.ulp("float16", 100.0) < tol < 0.06
    tol, basis = fc.tolerance("float16", 4096, 100.0, 4096.0, 50.0)  # cuBLAS itself far off
    assert basis == "bound" and tol < 100
    # grows with K, never beyond the worst-case bound
    tols = [fc.tolerance("bfloat16", k, 10.0, 50.0 * k, 0.0)[0] for k in (1, 8, 64, 512, 4096, 10_000)]
    assert tols == sorted(tols)
    for k in (1, 100, 10_000):
        for cub in (0.0, 1e-4, 1e-2, 1.0, 1e3):
            tol, _ = fc.tolerance("float16", k, 50.0, 3.0 * k, cub)
            bound = 0.5 * fc.ulp("float16", 50.0 + 2 * fc.U32 * k * 3.0 * k) + 2 * fc.U32 * k * 3.0 * k
            assert tol <= bound * (1 + 1e-12)
            assert tol <= 2 * cub or tol <= bound and tol <= 0.5 * fc.ulp("float16", 50.0 + 2 * fc.U32 * k * 3.0 * k) \
                + fc.U32 * math.sqrt(k) * 3.0 * k * (1 + 1e-12)


# ---- the checker against a correct and against broken "kernels" ----------------------------
def _emit(case, built, r2d):
    """Return a 2-D (M, N) product the way the target would: shaped, and in out= if given."""
    r = r2d.to(built.a_logical.dtype)
    r = r if case.kind == "run_step" else r.reshape(*case.batch, case.rows, case.N)
    if built.out is not None:
        return built.out.copy_(r)
    return r


def _product(built, k=None):
    a, b = built.a_logical.reshape(-1, built.a_logical.shape[-1]), built.b_logical
    if k is not None:
        a, b = a[:, :k], b[:k]
    return a.float() @ b.float()


def _correct(case, built):
    return _emit(case, built, _product(built))


def _drop_last_k(case, built):
    return _emit(case, built, _product(built, case.K - 1))


def _largest_element_off(case, built):
    r = _product(built)
    i = int(r.abs().argmax())
    r.view(-1)[i] = r.view(-1)[i] * 1.1 + 1.0
    return _emit(case, built, r)


def _last_row_unwritten(case, built):
    r = _correct(case, built)
    r[..., -1, :] = float("nan")
    return r


def _scribbles_on_padding(case, built):
    r = _correct(case, built)
    for g in built.guards:
        g.fill_(0)
    return r


def _ignores_out(case, built):
    return _emit(case, fs.Built(built.a, built.b, None, built.a_logical, built.b_logical, []), _product(built))


def _accumulates_in_16_bits(case, built):
    a, b = built.a_logical.reshape(-1, case.K), built.b_logical
    acc = torch.zeros((a.shape[0], case.N), dtype=a.dtype)
    for k in range(case.K):
        acc = (acc.float() + a[:, k, None].float() * b[None, k, :].float()).to(a.dtype)
    return _emit(case, built, acc.float())


def _truncates(case, built):
    r = _product(built)
    rounded = r.to(built.a_logical.dtype).float()
    toward_zero = torch.where(rounded.abs() > r.abs(),
                              torch.nextafter(rounded.to(built.a_logical.dtype), torch.zeros((), dtype=built.a_logical.dtype)).float(),
                              rounded)
    return _emit(case, built, toward_zero)


def test_checker_passes_a_correct_gemm():
    rec = fc.run(fs.cases(3, 100, **SMALL), "cpu", call=_correct, log=lambda s: None)
    assert rec["n_failures"] == 0, rec["failures"][:3]
    assert rec["cases_per_dtype"] == {"float16": 100, "bfloat16": 100}
    assert set(rec["families"]["values"]) == set(fs.VALUES)


@pytest.mark.parametrize("broken,select", [
    (_drop_last_k, lambda c: True),
    (_largest_element_off, lambda c: True),
    (_last_row_unwritten, lambda c: True),
    (_scribbles_on_padding, lambda c: c.a in ("padded-rows", "every-other-row", "misaligned")),
    (_ignores_out, lambda c: c.out != "none"),
    (_accumulates_in_16_bits, lambda c: c.K >= 48 and c.values != "exact-int"),
    (_truncates, lambda c: c.M * c.N >= 64 and c.values != "exact-int"),
], ids=["drop-last-k", "largest-element-off", "last-row-unwritten", "scribbles-on-padding", "ignores-out",
        "accumulates-in-16-bits", "truncates"])
def test_checker_catches_broken_results(broken, select):
    chosen = [c for c in fs.cases(4, 150, **SMALL) if select(c)][:40]
    assert len(chosen) >= 10
    lines = []
    rec = fc.run(chosen, "cpu", call=broken, log=lines.append)
    caught = rec["n_failures"] / len(chosen)
    assert caught >= 0.9, (caught, rec["failures"][:2])
    assert len(lines) == rec["n_failures"]
    for line in lines:
        assert line.startswith("GEMM-FUZZ REPRO: ") and "\n" not in line
        assert fs.Case.from_line(line.split("'")[1]) in chosen


def test_exceptions_are_failures_and_stop_a_lost_context():
    def raises(case, built):
        raise RuntimeError("CUDA error: an illegal memory access was encountered\nmore")
    rec = fc.run(fs.cases(1, 20, **SMALL), "cpu", call=raises, log=lambda s: None, max_consecutive_errors=5)
    assert rec["n_failures"] == 5 and rec["aborted"]
    assert rec["failures"][0]["problems"] == ["RuntimeError: CUDA error: an illegal memory access was encountered"]


def test_generator_has_no_hidden_state():
    random.seed(123)
    a = fs.generate(9, 4, "bfloat16")
    random.seed(456)
    torch.manual_seed(0)
    assert fs.generate(9, 4, "bfloat16") == a


@pytest.mark.parametrize("key", fs.step_keys())
def test_cases_aimed_at_each_step(key):
    st = fs.get_step(key)
    base = list(fs.cases(12, 6, **SMALL))
    aimed = [fs.for_step(c, key, kind) for c in base for kind in ("run_step", "matmul@step")]
    for c in aimed:
        assert st.accepts(c.M, c.N, c.K) and c.step == st.key and c.batch == ()
        assert c.M * c.N * c.K <= (fs.NAIVE_WORK_CAP if st.number == 1 else fs.WORK_CAP)
    rec = fc.run([c for c in aimed if c.M * c.N * c.K <= 1 << 22], "cpu", call=_correct, log=lambda s: None)
    assert rec["n_failures"] == 0 and rec["cases"] >= 4, rec["failures"][:2]
    big = fs.for_step(fs.Case(0, 0, "matmul", "float16", 9999, 9998, 9997), key)
    assert st.accepts(big.M, big.N, big.K) and big.M * big.N * big.K <= fs.WORK_CAP


def test_an_overflow_shared_with_cublas_is_a_match():
    """K=1, -1474 x 47.8 = -70476: past fp16's range, -inf in ours and in cuBLAS's (seen in a
    soak on the H200); the same infinity matches, an infinity cuBLAS does not have fails."""
    import torch
    from fuzz_check import check_product
    a = torch.tensor([[-1474.0], [1.0]], dtype=torch.float16)
    b = torch.tensor([[47.8125, 2.0]], dtype=torch.float16)
    ours = torch.matmul(a.float(), b.float()).to(torch.float16)  # [[-inf, -2948], [47.8, 2]]
    assert torch.isinf(ours[0, 0]) and check_product(a, b, ours)["ok"]
    wrong = ours.clone()
    wrong[1, 1] = float("inf")
    assert not check_product(a, b, wrong)["ok"]


def test_library_calls_on_the_fake_gpu(monkeypatch):
    """The fuzzer's matmul cases (every layout, alignment, out= form, N and K off the multiples
    of 8, batched a, forced steps) through the library's fast path on CPU tensors, the kernels
    emulated by fake_gpu (the staging copy, the small-M family, the ladder's TMA maps):
    every result within tolerance, no guard or padding element written, inputs unchanged."""
    from collections import Counter
    from fake_gpu import FakeGpu
    gpu = FakeGpu(monkeypatch)
    cases = [c for c in fs.cases(78, 400, max_dim=200, work_cap=1 << 20) if c.kind != "run_step"]
    rec = fc.run(iter(cases), device="cpu", log=lambda m: None)
    assert rec["cases"] == len(cases) > 500 and rec["aborted"] is None
    assert rec["n_failures"] == 0, rec["failures"][:5]
    launched = Counter(r.name for r in gpu.launches)
    assert launched["gl_stage_copy"] and launched["gemm_smallm_splitk"] and launched["gemm_step9_multi_consumer"]
