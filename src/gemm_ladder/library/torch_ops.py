"""torch integration: the `gemm_ladder::matmul` custom op.

The op lets torch.compile trace a model that calls the kernels (its fake implementation
gives the result's shape and strides without running anything) and lets autograd
differentiate them (the backward products run on the same kernels). Its implementation is
the hot path's raw path (fastpath.run). Eager calls without grad skip the op:
`gemm_ladder.matmul` (api.py) goes straight to the fast path, whose per-call cost is lower
than the dispatcher's.
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from . import fastpath, layout


@torch.library.custom_op("gemm_ladder::matmul", mutates_args=())
def matmul_op(a: torch.Tensor, b: torch.Tensor, step: Optional[str] = None) -> torch.Tensor:
    """a @ b for a (..., M, K) and b (K, N) on the ladder's kernels (step None: the library's choice per shape)."""
    return fastpath.run("mm", a, b, None, step)


@matmul_op.register_fake
def _matmul_fake(a, b, step=None):
    lead, N, _ = fastpath.check_call("mm", a, b)
    shape, strides = layout.result_strides(lead, N)
    return a.new_empty_strided(shape, strides)


def _setup_context(ctx, inputs, output):
    a, b, step = inputs
    ctx.save_for_backward(a, b)
    ctx.step = step


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    grad_a = grad_b = None
    if ctx.needs_input_grad[0]:
        grad_a = matmul_op(grad, b.t(), ctx.step)  # (..., M, N) @ (N, K)
    if ctx.needs_input_grad[1]:
        K, N = b.shape
        M = math.prod(a.shape[:-1])  # a (..., M, K) folded (reshape(-1, K) is undefined when K or N is 0)
        grad_b = matmul_op(a.reshape(M, K).t(), grad.reshape(M, N), ctx.step)  # (K, M) @ (M, N)
    return grad_a, grad_b, None


matmul_op.register_autograd(_backward, setup_context=_setup_context)


def _vmap(info, in_dims, a, b, step=None):
    """torch.func.vmap: a batched `a` over one `b` folds into a's leading dimensions (one
    launch); a batched `b` runs one product per slice."""
    a_dim, b_dim = in_dims[:2]
    if b_dim is None:
        return matmul_op(a.movedim(a_dim, 0), b, step), 0
    slices = [matmul_op(a if a_dim is None else a.select(a_dim, i), b.select(b_dim, i), step)
              for i in range(info.batch_size)]
    return torch.stack(slices), 0


matmul_op.register_vmap(_vmap)
