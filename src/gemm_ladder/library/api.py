"""What users call: `matmul`, `matmul_nt`, `linear`, `Linear`, `warmup`, `cache_info`,
`cache_clear` and `best_step` (the names `gemm_ladder` exports).

matmul(a, b) computes a @ b like torch.matmul for fp16/bf16 CUDA tensors on a Hopper GPU;
matmul_nt(a, b) computes a @ b.T, the layout every kernel reads natively (both operands
K-major). A call runs the hot path (fastpath.py: validated once per configuration, then only
launched), or, under torch.compile or when an input requires grad, the `gemm_ladder::matmul`
custom op (torch_ops.py), which traces and differentiates. Which kernel runs is select.py's
choice (`select.step_for`). Invalid input raises a clear error.
"""
from __future__ import annotations

import math

import torch

from ..families.common import reads_mn
from ..families.keys import get_step
from ..families.ladder_step import Step
from . import fastconfig, fastpath, runner, select, torch_ops  # noqa: F401  (torch_ops registers the op)
from .fastpath import call as _call
from .select import best_step  # noqa: F401  (a public name of the library)

_compiling = torch.compiler.is_compiling
_tracing = torch._C._get_tracing_state  # torch.jit.trace: the op is recorded, a raw launch would not be
_grad_enabled = torch.is_grad_enabled


def _via_op(kind: str, a, b, out, step):
    """The call through the custom op (torch_ops.py): traced by torch.compile, differentiated by autograd."""
    st = fastpath.named_step(step, "matmul" if kind == "mm" else "matmul_nt")
    key = None if st is None else st.key
    res = torch.ops.gemm_ladder.matmul(a, b.t() if kind == "nt" else b, key)
    if out is None:
        return res
    if _grad_enabled() and (a.requires_grad or b.requires_grad):
        raise RuntimeError("matmul: out= does not support automatic differentiation (an input requires grad)")
    return out.copy_(res)


def matmul(a, b, out=None, *, step: Step | str | None = None, static_b: bool = False):
    """a @ b for a (..., M, K) and b (K, N), fp16/bf16 CUDA tensors; like torch.matmul.

    Leading dimensions of `a` fold into M. Operands are read in place when the kernel can
    (TMA: one contiguous dimension, 16-byte aligned pointer and stride; MN-major ones — a
    row-major b, a transposed-view a — by a step with `mn_major`); `out` is written in
    place when its row stride allows. The kernel is chosen per shape (select.step_for) unless
    `step` names one. The result is row-major with its row stride rounded up to 8 elements
    (contiguous when N is a multiple of 8).

    static_b=True promises that no kernel queued before this call on its stream writes `b`
    (model weights at inference): the small-M kernels, which may start while the previous
    kernel still runs, then load b's first stages before waiting for it. A `b` computed by
    the call just before must not be passed so. Ignored under torch.compile and autograd."""
    if static_b is not False and static_b is not True:
        _not_bool("matmul", "static_b", static_b)
    if _compiling() or _tracing():
        return _via_op("mm", a, b, out, step)
    return _call("mm", a, b, out, step, _via_op, static_b)


def matmul_nt(a, b, out=None, *, step: Step | str | None = None, static_b: bool = False):
    """C = a @ b.T for a (M, K) and b (N, K): both operands K-major, the kernels' native
    layout. `out`, if given, is an (M, N) tensor of the same dtype (any strides). static_b:
    as for matmul."""
    if static_b is not False and static_b is not True:
        _not_bool("matmul_nt", "static_b", static_b)
    if _compiling() or _tracing():
        return _via_op("nt", a, b, out, step)
    return _call("nt", a, b, out, step, _via_op, static_b)


def _not_bool(what: str, name: str, value):
    """A flag given as something else than a bool (a promise such as static_b must be meant).
    The per-call doors test `x is not False and x is not True` inline before calling this (a
    call costs host time on every matmul); the others use _check_bool."""
    raise TypeError(f"{what}: {name} must be True or False, got {value!r}")


def _check_bool(what: str, name: str, value) -> None:
    if value is not False and value is not True:
        _not_bool(what, name, value)


def warmup(device=None, dtypes=(torch.float16, torch.bfloat16), step: Step | str | None = None,
           mn_major: bool = True) -> None:
    """Compile and load the kernels `matmul` may choose (every selection candidate, or `step`),
    for each dtype, and the MN-major builds of steps that read them (unless mn_major=False),
    so that a later first call — e.g. inside CUDA graph capture — does no JIT work."""
    _check_bool("warmup", "mn_major", mn_major)
    dtypes = (dtypes,) if isinstance(dtypes, torch.dtype) else tuple(dtypes) if isinstance(dtypes, (list, tuple)) else dtypes
    if not isinstance(dtypes, tuple) or not all(dt in (torch.float16, torch.bfloat16) for dt in dtypes):
        raise TypeError(f"warmup: dtypes must be torch.float16 and/or torch.bfloat16, got {dtypes!r}")
    if device is not None and not isinstance(device, (int, str, torch.device)) or isinstance(device, bool):
        raise TypeError(f"warmup: device must be a CUDA device (an index, 'cuda:0' or a torch.device), got {device!r}")
    step = fastpath.step_arg(step, "warmup")
    device = torch.device("cuda", device) if isinstance(device, int) else torch.device(device or "cuda")
    if device.type != "cuda":
        raise ValueError(f"warmup builds kernels for a CUDA device, not {device}")
    runner.check_device(device)  # before the device's index: without CUDA that is torch's AssertionError
    dev = fastconfig.device_index(device)
    if step is not None:
        kernels = [fastpath.named_step(step, "warmup")]
    else:
        kernels = [get_step(k) for k in select.candidate_keys(b_misaligned=True)]
    with fastconfig.building(dev):
        for st in kernels:
            a_ok, b_ok = reads_mn(st) if mn_major else (False, False)
            layouts = [(a_mn, b_mn) for a_mn in (False, True) for b_mn in (False, True)
                       if (a_ok or not a_mn) and (b_ok or not b_mn)]
            for dt in dtypes:
                for a_mn, b_mn in layouts:
                    defines = st.layout_defines(a_mn, b_mn)
                    fastconfig.prepare_kernel(st, dev, dt == torch.bfloat16, defines)


def cache_info() -> dict:
    """Sizes of the caches, and how many configurations / tensor maps were built."""
    maps, configs = fastconfig.TENSOR_MAPS, fastpath.CONFIGS
    return {"configs": len(configs), "configs_max": configs.maxsize, "configs_built": configs.misses,
            "tensor_maps": len(maps), "tensor_maps_max": maps.maxsize, "tensor_maps_encoded": maps.misses}


def cache_clear() -> None:
    fastpath.CONFIGS.clear()
    fastconfig.TENSOR_MAPS.clear()


def linear(x, weight, *, static_weight: bool = False):
    """x @ weight.T for x (..., in_features) and weight (out_features, in_features), like
    torch.nn.functional.linear without bias. weight.T is a K-major view: read in place.
    static_weight: matmul's static_b (no kernel queued before the call writes the weight)."""
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        got = f"shape {tuple(weight.shape)}" if isinstance(weight, torch.Tensor) else type(weight).__name__
        raise ValueError(f"linear: weight must be a 2-D (out_features, in_features) tensor, got {got}")
    if static_weight is not False and static_weight is not True:
        _not_bool("linear", "static_weight", static_weight)
    if isinstance(x, torch.Tensor) and x.dim() == 1:  # as nn.functional.linear: one row, returned 1-D
        return matmul(x.unsqueeze(0), weight.t(), static_b=static_weight).squeeze(0)
    return matmul(x, weight.t(), static_b=static_weight)


class Linear(torch.nn.Module):
    """torch.nn.Linear on the ladder's kernels: y = x @ weight.T (+ bias), any leading
    dims, fp16/bf16 on a Hopper GPU. The weight is stored as nn.Linear stores it (state
    dicts are interchangeable). The kernels have no bias epilogue: a bias, if asked for,
    is one more elementwise add. static_weight=True: linear's promise that no kernel queued
    before a call writes the weight — for inference; an optimizer step, load_state_dict or any
    in-place edit of the weight breaks it (set the attribute back to False first)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = False, device=None, dtype=None,
                 static_weight: bool = False):
        super().__init__()
        _check_bool("Linear", "static_weight", static_weight)
        factory = {"device": device, "dtype": dtype}
        self.in_features, self.out_features = in_features, out_features
        self.static_weight = static_weight
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
    def from_linear(cls, lin: torch.nn.Linear, static_weight: bool = False) -> "Linear":
        """A Linear sharing `lin`'s parameters."""
        if not isinstance(lin, torch.nn.Linear):
            raise TypeError(f"Linear.from_linear takes a torch.nn.Linear, got {type(lin).__name__}")
        _check_bool("Linear.from_linear", "static_weight", static_weight)
        new = cls.__new__(cls)
        torch.nn.Module.__init__(new)
        new.in_features, new.out_features = lin.in_features, lin.out_features
        new.static_weight = static_weight
        new.weight = lin.weight
        new.bias = lin.bias
        return new

    def forward(self, x):
        y = linear(x, self.weight, static_weight=self.static_weight)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"
                + (", static_weight=True" if self.static_weight else ""))
