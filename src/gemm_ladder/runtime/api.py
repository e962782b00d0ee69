"""gemm_ladder.matmul: the library entry point.

matmul(a, b) computes a @ b like torch.matmul, with the best kernel of the ladder, for
fp16/bf16 CUDA tensors on a Hopper GPU. matmul_nt(a, b) computes a @ b.T, the layout the
kernels read natively (both operands K-major). Anything the kernel cannot take directly
(non-contiguous or misaligned tensors, K or N not a multiple of 8) goes through a correct,
slower path: a copy into an aligned, padded buffer. Invalid input raises a clear error.
"""
from __future__ import annotations

import math

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


def _validate_pair(a, b, what: str) -> None:
    launch.check_types(a, b, what=what)
    if a.device.type != "cuda" or b.device.type != "cuda":
        raise ValueError(f"{what}: a is on {a.device} and b on {b.device}; both must be CUDA tensors")
    if a.device != b.device:
        raise ValueError(f"{what}: a and b are on different devices ({a.device}, {b.device})")


def matmul_nt(a, b, out=None, *, step: Step | str | None = None):
    """C = a @ b.T for a (M, K) and b (N, K). `out`, if given, must be a contiguous (M, N)
    tensor of the same dtype. `step` picks a ladder step (default: the best)."""
    torch = _torch()
    _validate_pair(a, b, "matmul_nt")
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"matmul_nt: a and b must be 2-D, got {tuple(a.shape)} and {tuple(b.shape)}")
    M, K = a.shape
    N, Kb = b.shape
    if K != Kb:
        raise ValueError(f"matmul_nt: a is {M}x{K} and b is {N}x{Kb}: a @ b.T needs equal K")
    if out is not None:
        if not isinstance(out, torch.Tensor) or out.dtype != a.dtype or tuple(out.shape) != (M, N) \
                or out.device != a.device:
            raise ValueError(f"matmul_nt: out must be a {(M, N)} {a.dtype} tensor on {a.device}")
    launch.check_device(a.device)
    st = best_step() if step is None else (step if isinstance(step, Step) else get_step(step))
    if M == 0 or N == 0:
        return out if out is not None else torch.empty((M, N), dtype=a.dtype, device=a.device)
    if K == 0:
        res = out if out is not None else torch.empty((M, N), dtype=a.dtype, device=a.device)
        return res.zero_()

    a2, b2 = _aligned_contiguous(a), _aligned_contiguous(b)
    Kp = a2.shape[1]
    direct_out = (out is not None and out.is_contiguous() and out.data_ptr() % 16 == 0 and N % 8 == 0)
    Np = N + (-N) % 8
    if not st.accepts(M, Np, Kp):
        raise launch.ShapeError(f"step {st.key} cannot run {M}x{N}x{K}: "
                                + "; ".join(st.shape_problems(M, Np, Kp)))
    if direct_out:
        return launch.run_step(st, a2, b2, out)
    if Np != N:  # C's row stride must be 16-byte aligned: compute into a padded buffer
        b2 = torch.cat([b2, torch.zeros((Np - N, Kp), dtype=b2.dtype, device=b2.device)])
    c = launch.run_step(st, a2, b2)
    if Np != N:
        c = c[:, :N]
    if out is not None:
        return out.copy_(c)
    return c.contiguous() if Np != N else c


def matmul(a, b, out=None, *, step: Step | str | None = None):
    """a @ b for a (..., M, K) and b (K, N), fp16/bf16 CUDA tensors; like torch.matmul.

    Leading dimensions of `a` are batch dimensions folded into M. b.T is read in place when
    b is the transpose of a contiguous (N, K) tensor; otherwise it is copied once."""
    torch = _torch()
    _validate_pair(a, b, "matmul")
    if a.dim() < 2 or b.dim() != 2:
        raise ValueError(f"matmul: expects a with >= 2 dims and 2-D b, got {tuple(a.shape)} and {tuple(b.shape)}")
    K, N = b.shape
    if a.shape[-1] != K:
        raise ValueError(f"matmul: a is {'x'.join(map(str, a.shape))} and b is {K}x{N}: inner dimensions differ")
    lead = a.shape[:-1]
    a2 = a.reshape(math.prod(lead), K)  # explicit rows: reshape(-1, 0) is ambiguous
    bt = b.t()  # (N, K); contiguous iff b was a transposed view of a row-major (N, K) tensor
    if out is not None:
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != (*lead, N) or out.dtype != a.dtype:
            raise ValueError(f"matmul: out must be a {(*lead, N)} {a.dtype} tensor")
        c = matmul_nt(a2, bt, out.view(-1, N) if out.is_contiguous() else None, step=step)
        if not out.is_contiguous():
            out.copy_(c.view(*lead, N))
        return out
    return matmul_nt(a2, bt, step=step).view(*lead, N)
