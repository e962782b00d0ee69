"""Property-based tests of the fuzzer's CPU side (hypothesis): any (seed, index, dtype)
gives a valid, reproducible case; any layout of any small matrix holds the same values;
the tolerance is monotone in K and bounded. Skipped where hypothesis is not installed (the
GPU fuzz itself needs only fuzz_support's seeded generator)."""
import math

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402

import torch  # noqa: E402

import fuzz_check as fc  # noqa: E402
import fuzz_support as fs  # noqa: E402

seeds = st.integers(min_value=0, max_value=2**63 - 1)
indices = st.integers(min_value=0, max_value=10**7)
dtypes = st.sampled_from(fs.DTYPES)


@settings(max_examples=300, deadline=None)
@given(seed=seeds, index=indices, dtype=dtypes)
def test_any_case_is_valid_and_round_trips(seed, index, dtype):
    c = fs.generate(seed, index, dtype)
    assert c.dtype == dtype and (c.seed, c.index) == (seed, index)
    assert 1 <= c.N <= fs.MAX_DIM and 1 <= c.K <= fs.MAX_DIM and c.M >= 1
    assert c.M % max(1, math.prod(c.batch)) == 0 and c.rows <= fs.MAX_DIM
    assert c.M * c.N * c.K <= (fs.NAIVE_WORK_CAP if c.step == "1" else fs.WORK_CAP)
    if c.step is not None:
        assert fs.get_step(c.step).accepts(c.M, c.N, c.K)
    assert fs.Case.from_line(c.line()) == c
    assert fs.generate(seed, index, dtype) == c


@settings(max_examples=150, deadline=None)
@given(lead=st.lists(st.integers(1, 3), max_size=2), rows=st.integers(1, 9), cols=st.integers(1, 9),
       layout=st.sampled_from(sorted(set(fs.A_LAYOUTS) | set(fs.B_LAYOUTS))), pad=st.integers(1, 13),
       off=st.sampled_from([1, 3, 5, 7]), dtype=dtypes, seed=st.integers(0, 2**31))
def test_any_layout_holds_the_logical_values(lead, rows, cols, layout, pad, off, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    logical = torch.randn((*lead, rows, cols), generator=g).to(getattr(torch, dtype))
    view, guards = fs.place(logical, layout, pad, off)
    assert view.shape == logical.shape and torch.equal(view, logical)
    assert all(torch.isnan(x).all() for x in guards)
    if layout == "misaligned":
        assert view.data_ptr() % 16 != 0


@settings(max_examples=300, deadline=None)
@given(dtype=dtypes, k=st.integers(1, 10_000), absmax=st.floats(1e-6, 1e4), s=st.floats(1e-6, 1e8),
       cub=st.floats(0, 1e3))
def test_tolerance_is_monotone_in_k_and_bounded(dtype, k, absmax, s, cub):
    tol, basis = fc.tolerance(dtype, k, absmax, s, cub)
    worst = 2 * fc.U32 * k * s
    bound = 0.5 * fc.ulp(dtype, absmax + worst) + worst
    assert 0 < tol <= bound * (1 + 1e-12)
    if basis == "2x-cublas":
        assert tol == 2 * cub
    if basis == "floor":
        assert 2 * cub < tol
    bigger_k, _ = fc.tolerance(dtype, k + 1, absmax, s, cub)
    assert bigger_k >= tol
    assert fc.tolerance(dtype, k, absmax, s, cub, exact=True) == (0.0, "exact")
