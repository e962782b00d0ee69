"""gemm_ladder.matmul: the library entry point, and which kernel it runs.

matmul(a, b) computes a @ b like torch.matmul for fp16/bf16 CUDA tensors on a Hopper GPU;
matmul_nt(a, b) computes a @ b.T, the layout every kernel reads natively (both operands
K-major). The hot path (validate once per configuration, cached launches and tensor maps,
operands read in place where TMA can) is fastpath.py and fastconfig.py. This module holds
the library's choice of kernel per call (`step_for`, the rule below) and the copying path of
the strict teaching steps. Invalid input raises a clear error.

The rule (`step_for`), computed once per configuration:
1. the selection's pick for the shape: `select.pick(M, N, K, dtype, SMs)` (memoized), among
   select.CANDIDATES (ladder steps 9:c1, 7:d4 and the small-M family's entries);
2. the small-M family takes the shapes it accepts with N and K rounded up to 8 (TMA
   zero-fills the K edge and B's rows past N; the result's rows are N rounded up to 8 long,
   and the kernel writes the padding columns as zeros; above 128 rows, K-major rows that are
   not whole 32-byte sectors only with an N-major b: smallm.ALIGNED_K); otherwise the best
   ladder candidate;
3. an operand stored MN-major (an M-major `a`, i.e. a transposed view; an N-major `b`,
   i.e. a row-major (K, N) `b`, the usual `a @ b`) is read MN-major — in place, or from an
   MN-major copy (a plain copy) when TMA cannot take its strides or address — by a kernel
   that reads it so (`steps.reads_mn`: a Step with `mn_major` reads both, the small-M
   family an N-major `b` only). If the pick is a ladder step that does not, the best
   candidate that does (9:c1) runs instead when it accepts the shape; else the operand is
   copied K-major. The small-M family with an M-major `a` keeps the shape, `a` copied, when
   the selection's model (select.score) prices its time plus the copy (COPY_LAUNCH_US for the
   extra torch kernel's host work and launch, plus the operand read and written once at the
   measured rate of a transposing copy, TRANSPOSE_COPY_TBS) below the other candidate's time;
   else that candidate reads it in place. E.g. 16x4096x4096 with a transposed-view a: the
   copy of 128 KB costs ~6.4 us against 9:c1's 58 us -> copy. A row-major `b` at decode
   shapes is read in place by the family (its GL_B_MN build): copying it cost ~10x the GEMM
   (16 x 4096 x 14336: 416 against 42 us for torch.matmul, docs/perf-notes.md item 29).
4. B rows that are not whole 32-byte sectors (`b_misaligned`, from the row stride the
   kernel reads B with: a row-major b of N = 8 mod 16 columns, a K-major b of K = 8 mod 16)
   slow the kernels that fetch B alone, not step 9, whose cluster multicasts it: the
   selection charges them (select.MISALIGNED_B_COST) and considers step 9 too. E.g.
   3000x5000x4000 with a row-major b (rows of 10000 bytes): 9:n192 235 us, step 9 184 us
   (docs/perf-notes.md, item 32).
5. An N-major `b` on a tile width that is not a multiple of 64 (9:n176, 9:n224, 9:n240) travels
   in whole 64-wide blocks that overhang the tile: the selection charges it
   (select.OVERHANG_B_COST; measured 0-14 % slower than the same width reading B K-major, docs/
   perf-notes.md items 35 and 57), so such a width runs only where its waves gain more (512 x
   14336 x 4096: 9:n224 1.10 x cuBLAS against 9:c1's 1.00). A width whose tiles do not start at
   32-byte offsets (9:n232) does not take an N-major `b` (25-45 % slower).
`step=` forces a step; MN-major operands go to it directly when it reads them so
(`steps.reads_mn`), else they are copied.
"""
from __future__ import annotations

import functools

from . import launch, select
from .layout import round_up
from .steps import Step, get_step, reads_mn

SMS_DEFAULT = 132  # the H200's SMs: what best_step assumes without a device
# A model constant, not a measurement: the fixed cost of staging an MN-major operand
# K-major (host work and launch of one more torch kernel, ~6 us per call on the H200's
# host, issue 9); without it a tiny shape would copy rather than read in place.
COPY_LAUNCH_US = 6.0
# Measured: torch's transposing copy of a (K, N) operand into (N, K) moves ~0.6 TB/s of
# read + written bytes on the H200 (4096 x 14336: ~370 us; docs/perf-notes.md item 29).
TRANSPOSE_COPY_TBS = 0.6


def _torch():
    import torch
    return torch


@functools.lru_cache(maxsize=64)
def _pick_among(M: int, N: int, K: int, dtype: str, sms: int, keys: tuple[str, ...],
                b_misaligned: bool = False, b_mn: bool = False) -> str | None:
    """select.choose's pick among `keys`; None when none of them accepts the shape."""
    ch = select.choose(M, N, K, dtype, device=select.Device(sms=sms), candidates=list(keys),
                       b_misaligned=b_misaligned, b_mn=b_mn)
    return ch.pick.key if ch.pick else None


def _candidates(want, b_misaligned: bool = False) -> tuple[str, ...]:
    out = []
    for key in select.candidate_keys(b_misaligned):
        try:
            st = get_step(key)
        except KeyError:
            continue
        if want(st):
            out.append(key)
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def step_for(M: int, N: int, K: int, dtype: str = "float16", sms: int = SMS_DEFAULT, a_mn: bool = False,
             b_mn: bool = False, b_misaligned: bool = False):
    """The kernel `matmul` runs for (M, N, K) >= 1 when `a_mn`/`b_mn` say an operand could be
    read in place only MN-major and `b_misaligned` that B's rows are not whole 32-byte sectors
    (module docstring); a Step or a kernel-family entry."""
    mis = b_misaligned
    try:
        st = get_step(select.pick(M, N, K, dtype, sms, mis, b_mn))
    except LookupError as e:
        raise launch.ShapeError(f"no kernel takes {M}x{N}x{K}: {e}") from None
    if not isinstance(st, Step) and not st.accepts(M, round_up(N, 8), round_up(K, 8), b_mn=b_mn):
        key = _pick_among(M, N, K, dtype, sms, _candidates(lambda s: isinstance(s, Step), mis), mis)
        st = get_step(key) if key else st
    if not _reads(st, a_mn, b_mn):  # (a family entry must take the shape as rule 2 says)
        key = _pick_among(M, N, K, dtype, sms, _candidates(
            lambda s: _reads(s, a_mn, b_mn)
            and (isinstance(s, Step) or s.accepts(M, round_up(N, 8), round_up(K, 8), b_mn=b_mn)), mis), mis, b_mn)
        if key and (isinstance(st, Step) or _copy_loses(st, get_step(key), M, N, K, sms, a_mn, b_mn, mis)):
            st = get_step(key)
    return st


def _reads(st, a_mn: bool, b_mn: bool) -> bool:
    """st reads the operands in place as they are (an MN-major one only if it can)."""
    a_ok, b_ok = reads_mn(st)
    return (a_ok or not a_mn) and (b_ok or not b_mn)


def _copy_loses(st, in_place, M: int, N: int, K: int, sms: int, a_mn: bool, b_mn: bool,
                b_misaligned: bool = False) -> bool:
    """In the selection's model: `st` after copying the MN-major operand(s) K-major is slower
    than `in_place` reading them as they are."""
    dev = select.Device(sms=sms)
    a_ok, b_ok = reads_mn(st)
    a_cp, b_cp = a_mn and not a_ok, b_mn and not b_ok  # the operands st would need copied
    copy_bytes = 2 * select.ELEMENT_BYTES * K * ((M if a_cp else 0) + (N if b_cp else 0))  # read + write
    copy_us = (int(a_cp) + int(b_cp)) * COPY_LAUNCH_US + copy_bytes / (TRANSPOSE_COPY_TBS * 1e12) * 1e6
    b_mis_st = select.rows_misaligned(round_up(K, 8)) if b_cp else b_misaligned  # a copy's rows: K-major
    return (select.score(st, M, N, K, dev, b_mis_st, b_mn and not b_cp).score_us + copy_us
            > select.score(in_place, M, N, K, dev, b_misaligned, b_mn).score_us)


def best_step(M: int = 4096, N: int = 4096, K: int = 4096, dtype: str = "float16", sms: int = SMS_DEFAULT):
    """The kernel `matmul_nt` runs for K-major operands of this shape (default 4096^3, the
    ladder benchmark's size)."""
    return step_for(M, N, K, dtype, sms)


def _aligned_contiguous(t, cols_multiple: int = 8):
    """t as a contiguous, 16-byte aligned row-major matrix whose row length is a multiple
    of `cols_multiple` elements (zero-padded); a copy only when needed."""
    torch = _torch()
    rows, cols = t.shape
    pad = (-cols) % cols_multiple
    if pad == 0 and t.is_contiguous() and t.data_ptr() % 16 == 0:
        return t
    out = torch.zeros((rows, cols + pad), dtype=t.dtype, device=t.device)
    out[:, :cols].copy_(t)
    return out


def matmul_nt_copying(a, b, st: Step):
    """C = a @ b.T with a strict step (e.g. the teaching steps 1-3, which read contiguous
    operands with their own shape rules) on validated 2-D operands: copies into aligned,
    padded buffers as that step needs. Returns a contiguous (M, N) tensor."""
    torch = _torch()
    M, K = a.shape
    N = b.shape[0]
    a2, b2 = _aligned_contiguous(a), _aligned_contiguous(b)
    Kp = a2.shape[1]
    Np = N + (-N) % 8
    if not st.accepts(M, Np, Kp):
        raise launch.ShapeError(f"step {st.key} cannot run {M}x{N}x{K}: "
                                + "; ".join(st.shape_problems(M, Np, Kp)))
    if Np != N:  # C's row stride must be 16-byte aligned: compute into a padded buffer
        b2 = torch.cat([b2, torch.zeros((Np - N, Kp), dtype=b2.dtype, device=b2.device)])
    c = launch.run_step(st, a2, b2)
    return c[:, :N].contiguous() if Np != N else c


def matmul_nt(a, b, out=None, *, step: Step | str | None = None):
    """C = a @ b.T for a (M, K) and b (N, K); see fastpath.matmul_nt."""
    from . import fastpath
    return fastpath.matmul_nt(a, b, out, step=step)


def matmul(a, b, out=None, *, step: Step | str | None = None):
    """a @ b for a (..., M, K) and b (K, N); see fastpath.matmul."""
    from . import fastpath
    return fastpath.matmul(a, b, out, step=step)
