"""torch integration: the `gemm_ladder::matmul` custom op, `linear` and `Linear`.

The op lets torch.compile trace a model that calls the kernels (its fake implementation
gives the result's shape and strides without running anything) and lets autograd
differentiate them (the backward products run on the same kernels). Eager calls without
grad skip the op: `gemm_ladder.matmul` goes straight to the fast path, whose per-call cost
is lower than the dispatcher's.
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
        grad_b = matmul_op(a.reshape(-1, K).t(), grad.reshape(-1, N), ctx.step)  # (K, M) @ (M, N)
    return grad_a, grad_b, None


matmul_op.register_autograd(_backward, setup_context=_setup_context)


def linear(x, weight):
    """x @ weight.T for x (..., in_features) and weight (out_features, in_features), like
    torch.nn.functional.linear without bias. weight.T is a K-major view: read in place."""
    return fastpath.matmul(x, weight.t())


class Linear(torch.nn.Module):
    """torch.nn.Linear on the ladder's kernels: y = x @ weight.T (+ bias), any leading
    dims, fp16/bf16 on a Hopper GPU. The weight is stored as nn.Linear stores it (state
    dicts are interchangeable). The kernels have no bias epilogue: a bias, if asked for,
    is one more elementwise add."""

    def __init__(self, in_features: int, out_features: int, bias: bool = False, device=None, dtype=None):
        super().__init__()
        factory = {"device": device, "dtype": dtype}
        self.in_features, self.out_features = in_features, out_features
        self.weight = torch.nn.Parameter(torch.empty((out_features, in_features), **factory))
        if bias:
            self.bias = torch.nn.Parameter(torch.empty(out_features, **factory))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        # nn.Linear's initialisation
        torch.nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1 / math.sqrt(self.in_features) if self.in_features > 0 else 0
            torch.nn.init.uniform_(self.bias, -bound, bound)

    @classmethod
    def from_linear(cls, lin: torch.nn.Linear) -> "Linear":
        """A Linear sharing `lin`'s parameters."""
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.in_features, new.out_features = lin.in_features, lin.out_features
        new.weight = lin.weight
        new.bias = lin.bias
        return new

    def forward(self, x):
        y = linear(x, self.weight)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
