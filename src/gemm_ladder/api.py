"""gemm_ladder.matmul: the library entry point.

matmul(a, b) computes a @ b like torch.matmul, with the best kernel of the ladder, for
fp16/bf16 CUDA tensors on a Hopper GPU. matmul_nt(a, b) computes a @ b.T, the layout the
kernels read natively (both operands K-major). The hot path (validate once per
configuration, cached launches and tensor maps, operands read in place where TMA can) is
fastpath.py; this module keeps the step choice and the copying path of strict steps.
Invalid input raises a clear error.
"""
from __future__ import annotations

from . import launch
from .steps import Step, get_step

BEST = "7:d4"  # measured best step (see benchmarks/results and docs/perf-notes.md)


def best_step() -> Step:
    return get_step(BEST)


def _torch():
    import torch
    return torch


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
