"""How each operand of C = A @ B^T reaches a TMA kernel: read in place, or staged by a copy.

Pure functions of shapes, strides and pointer alignment (no torch, no GPU), computed once
per configuration by the fast path (fastpath.py, fastconfig.py) and cached with its launch.

TMA reads a 2-D matrix given a base address and a row stride, both 16-byte aligned; rows
and columns past the matrix's extent are zero-filled on load and clipped on store. So an
operand needs no copy when one of its dimensions is contiguous and the other's stride is
16-byte aligned — a row-strided slice `x[:, :K]`, a K that is not a multiple of 8 inside a
wider buffer, a transposed view. Which major-ness a kernel reads is the step's capability:
K-major always; MN-major (A stored M-contiguous, B stored N-contiguous: `x @ W` with W
row-major) only where `Step.mn_major` (step 9 and its variants), otherwise those take the
copy. Which step runs is select.step_for's rule.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

ALIGN = 16  # bytes: TMA base address and row-stride alignment
ELEM = 2  # bytes per fp16/bf16 element
MAX_STRIDE_BYTES = 1 << 40  # TMA limit on a global stride
MAX_DIM = 1 << 31  # the kernels take M, N, K as int


def round_up(x: int, m: int) -> int:
    return -(-x // m) * m


def fold_rows(shape, strides) -> tuple[int, int | None] | None:
    """(rows, row stride) of a tensor's leading dimensions folded into one, the last
    dimension being the columns; the stride is None with at most one row (any stride
    does); None when the leading dimensions do not form a single strided dimension."""
    rows = math.prod(shape[:-1])
    dims = [(n, s) for n, s in zip(shape[:-1], strides[:-1]) if n != 1]
    if rows <= 1 or not dims:
        return rows, None
    for (_, s_outer), (n_inner, s_inner) in zip(dims, dims[1:]):
        if s_outer != s_inner * n_inner:
            return None
    return rows, dims[-1][1]


@dataclass(frozen=True)
class Operand:
    """One operand as the kernel reads it: the (rows x k) matrix A (rows = M) or B^T
    (rows = N). `major` is how it is stored ("K": k contiguous; "MN": rows contiguous);
    `ld` the stride between its non-contiguous lines, in elements. A staged operand is
    read from a K-major (rows x round_up(k, 8)) copy, or with `stage_mn` from an MN-major
    (k x round_up(rows, 8)) one: a stored-MN-major operand whose strides or address TMA
    cannot take, for a kernel that reads MN-major — a plain copy, where the K-major one is
    a transpose (torch's moved ~0.6 TB/s on the H200, docs/perf-notes.md item 29; item 40)."""
    rows: int
    k: int
    major: str
    ld: int
    direct: bool
    why: str = ""  # why the copy, for `explain` and tests
    stage_mn: bool = False
    # the strides the call gave, in elements: (between lines, along k); the line stride is
    # None for a single line; None when the lines do not form one strided dimension
    strides: tuple[int | None, int] | None = None

    @property
    def staged_ld(self) -> int:
        return round_up(self.rows if self.stage_mn else self.k, ALIGN // ELEM)

    @property
    def read_mn(self) -> bool:
        """The kernel reads this operand MN-major (in place, or from an MN-major copy)."""
        return self.major == "MN" and (self.direct or self.stage_mn)


def _synthetic_ld(extent: int) -> int:
    # a single line: its stride is never used, any aligned value >= the extent does
    return round_up(max(extent, 1), ALIGN // ELEM)


def _stride_problem(ld: int, extent: int) -> str:
    if (ld * ELEM) % ALIGN:
        return f"stride {ld} is not a multiple of {ALIGN // ELEM} elements"
    if ld < extent:
        return f"stride {ld} overlaps lines of {extent} elements"
    if ld * ELEM >= MAX_STRIDE_BYTES:
        return f"stride {ld} is past TMA's limit"
    return ""


def operand(rows: int, k: int, row_stride: int | None, col_stride: int, *, ptr_aligned: bool,
            mn_major_ok: bool) -> Operand:
    """Classify a (rows x k) operand given its strides (row_stride None: a single row)."""
    strides = (row_stride, col_stride)
    candidates = []
    if k == 1 or col_stride == 1:
        candidates.append(("K", row_stride if row_stride is not None else _synthetic_ld(k), k))
    if rows == 1 or row_stride == 1:
        candidates.append(("MN", col_stride if k > 1 else _synthetic_ld(rows), rows))
    if not candidates:
        return Operand(rows, k, "K", round_up(k, 8), False,
                       f"neither dimension is contiguous (strides {row_stride}, {col_stride})", strides=strides)
    why = ""
    for major, ld, extent in candidates:
        problem = _stride_problem(ld, extent)
        if not problem and not ptr_aligned:
            problem = f"base address is not {ALIGN}-byte aligned"
        if not problem and major == "MN" and not mn_major_ok:
            problem = "MN-major and this step reads K-major operands only"
        if not problem:
            return Operand(rows, k, major, ld, True, strides=strides)
        why = why or f"{major}-major, {problem}"
    major, ld, _ = candidates[0]
    return Operand(rows, k, major, ld, False, why, stage_mn=major == "MN" and mn_major_ok and rows > 1,
                   strides=strides)


@dataclass(frozen=True)
class Output:
    """C (M x N) as the kernel writes it: in place with row stride `ld`, or through a
    (M x round_up(N, 8)) buffer copied into the caller's `out`."""
    rows: int
    cols: int
    ld: int
    direct: bool
    why: str = ""


def output(rows: int, cols: int, row_stride: int | None, col_stride: int, *, ptr_aligned: bool) -> Output:
    if cols > 1 and col_stride != 1:
        return Output(rows, cols, round_up(cols, 8), False, f"columns are not contiguous (stride {col_stride})")
    ld = row_stride if row_stride is not None else _synthetic_ld(cols)
    problem = _stride_problem(ld, cols) or ("" if ptr_aligned else f"base address is not {ALIGN}-byte aligned")
    if not problem and cols % (ALIGN // ELEM):
        # Measured on the H200 (fuzz, out= with padded rows): the TMA store writes the last
        # 16-byte granule of a row whole, i.e. up to 8 elements past N into the caller's row
        # padding. Our own results own that padding; a caller's `out` goes through a buffer.
        problem = f"N={cols} is not a multiple of 8 (a TMA store would write past N into the row padding)"
    if problem:
        return Output(rows, cols, round_up(cols, 8), False, problem)
    return Output(rows, cols, ld, True)


def result_strides(lead: tuple, n: int) -> tuple[tuple, tuple]:
    """Shape and strides of a freshly allocated result (*lead, n): row-major with the row
    stride rounded up to 16 bytes, so the kernel writes it in place whatever N is (the
    result is contiguous when N is a multiple of 8)."""
    shape = (*lead, n)
    strides = [1]
    inner = round_up(n, ALIGN // ELEM)
    for size in reversed(lead):
        strides.append(inner)
        inner *= max(size, 1)
    return shape, tuple(reversed(strides))


def problems(M: int, N: int, K: int) -> list[str]:
    """Size limits of the fast path (beyond these the kernels' int arguments overflow)."""
    return [f"{name}={v} must be < 2^31" for name, v in (("M", M), ("N", N), ("K", K)) if v >= MAX_DIM]


def byte_span(t) -> int:
    """Bytes from tensor t's first element to just past its last (0 when empty): the memory a
    kernel reading or writing it in place touches."""
    if t.numel() == 0:
        return 0
    return (1 + sum((n - 1) * st for n, st in zip(t.shape, t.stride()))) * t.element_size()
