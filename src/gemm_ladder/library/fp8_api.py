"""The fp8 door: `scaled_mm` (torch._scaled_mm's call), `quantize_fp8` / `dequantize_fp8`
and `Fp8Linear`.

scaled_mm(a, b, scale_a, scale_b) computes (a @ b) * scales (+ bias) for a (M, K) row-major
and b (K, N) column-major fp8 operands, the layout torch._scaled_mm takes; b.t() is the
(N, K) K-major operand the kernel reads (fp8_runner.run_fp8). Every rejected call raises one
line naming the argument before anything launches. Eager calls go straight to the runner;
under torch.compile, or when an input requires grad, the call goes through the
`gemm_ladder::scaled_mm` custom op, which traces (its fake gives the result) and refuses a
backward pass.
"""
from __future__ import annotations

import math
from typing import Optional

import torch

from . import plain_tensors, runner

FP8 = (torch.float8_e4m3fn, torch.float8_e5m2)
OUT_DTYPES = (torch.bfloat16, torch.float16, torch.float32)
QUANT_INPUTS = (torch.bfloat16, torch.float16, torch.float32)
MODES = ("tensor", "row", "block")
BLOCK = 128  # the block-wise scales' tile along K (and along N for the weight)
NO_BACKWARD = "gemm_ladder.scaled_mm: backward is not supported (fp8 forward only)"

_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled
_forward_ad_active = plain_tensors.forward_ad_active


def _cdiv(x, y):
    return -(-x // y)


def _scale_mode(M, N, K, scale_a, scale_b) -> str:
    """'tensor', 'row' or 'block' from the scales' shapes (tensors or shape tuples).

    Tried in that order. Where two modes fit the same shapes they compute the same product,
    so the order never changes a result: both scales of one element are per-tensor ones
    (M == N == 1 for row-wise; M == 1, N <= 128, K <= 128 for block-wise), or, for K <= 128
    and N == 1, a block-wise pair is a row-wise one (one K block: the scale of a row of a is
    its row-wise scale)."""
    sa, sb = tuple(getattr(scale_a, "shape", scale_a)), tuple(getattr(scale_b, "shape", scale_b))
    kb, nb = _cdiv(K, BLOCK), _cdiv(N, BLOCK)
    if math.prod(sa) == 1 and math.prod(sb) == 1:
        return "tensor"
    if sa == (M, 1) and sb == (1, N):
        return "row"
    if sa == (M, kb) and sb == (nb, kb):
        return "block"
    raise ValueError(f"scaled_mm: scale_a {sa} and scale_b {sb} fit no scaling mode for M={M}, N={N}, K={K}: "
                     f"per-tensor (1,) and (1,), row-wise ({M}, 1) and (1, {N}), or block-wise "
                     f"({M}, {kb}) and ({nb}, {kb})")


def _check_call(a, b, scale_a, scale_b, out_dtype, bias) -> tuple[int, int, int, str]:
    """Everything about a call that its shapes, dtypes and strides decide (the fake's checks
    too: no data pointers). Returns (M, N, K, mode)."""
    for name, t in (("a", a), ("b", b), ("scale_a", scale_a), ("scale_b", scale_b), ("bias", bias)):
        if not isinstance(t, torch.Tensor) and not (name == "bias" and t is None):
            raise TypeError(f"scaled_mm: {name} must be a torch.Tensor, got {type(t).__name__}")
    if out_dtype not in OUT_DTYPES:
        raise TypeError(f"scaled_mm: out_dtype {out_dtype} is not supported: use torch.bfloat16, torch.float16 "
                        "or torch.float32")
    for name, t in (("a", a), ("b", b)):
        if t.dtype not in FP8:
            raise TypeError(f"scaled_mm: {name} has dtype {t.dtype}; it must be torch.float8_e4m3fn or "
                            "torch.float8_e5m2 (quantize_fp8 makes one)")
    if a.dtype == b.dtype == torch.float8_e5m2:
        raise TypeError("scaled_mm: a and b are both float8_e5m2, which is not supported: make at least one "
                        "of them float8_e4m3fn")
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"scaled_mm: a and b must be 2-D, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    M, K = a.shape
    Kb, N = b.shape
    if K != Kb:
        raise ValueError(f"scaled_mm: inner dimensions differ: a is {M}x{K}, b is {Kb}x{N} (a @ b needs equal K)")
    if not a.is_contiguous():
        raise ValueError(f"scaled_mm: a must be row-major contiguous (M, K), got strides {a.stride()}; "
                         "call .contiguous()")
    if not b.t().is_contiguous():
        raise ValueError(f"scaled_mm: b must be column-major (K, N) (strides {b.stride()}): pass w.t() of a "
                         "row-major (N, K) weight")
    if K % 16:
        raise ValueError(f"scaled_mm: K = {K} must be a multiple of 16")
    align = 4 if out_dtype == torch.float32 else 8
    if N % align:
        raise ValueError(f"scaled_mm: N = {N} must be a multiple of {align} for {out_dtype} output "
                         "(16-byte output rows)")
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if s.dtype != torch.float32:
            raise TypeError(f"scaled_mm: {name} has dtype {s.dtype}; scales must be torch.float32")
    mode = _scale_mode(M, N, K, scale_a, scale_b)
    if bias is not None:
        if tuple(bias.shape) != (N,):
            raise ValueError(f"scaled_mm: bias has shape {tuple(bias.shape)}, expected ({N},)")
        if bias.dtype != out_dtype:
            raise TypeError(f"scaled_mm: bias has dtype {bias.dtype}; it must be out_dtype {out_dtype} "
                            "(cast it with .to)")
    for name, t in (("b", b), ("scale_a", scale_a), ("scale_b", scale_b), ("bias", bias)):
        if t is not None and t.device != a.device:
            raise ValueError(f"scaled_mm: {name} is on {t.device} but a is on {a.device}: all tensors must be "
                             "on one CUDA device")
    return M, N, K, mode


def _check_gpu(device) -> None:
    """A CUDA device of compute capability 9.0 (checked once per device)."""
    runner.check_door_device(device, "scaled_mm", "a", "fp8 kernels")


def _check_memory(a, b) -> None:
    """What only real tensors have: 16-byte aligned operands on an sm_90 GPU."""
    for name, t in (("a", a), ("b", b)):
        if t.numel() and t.data_ptr() % 16:
            raise ValueError(f"scaled_mm: {name} must be 16-byte aligned (data_ptr % 16 = {t.data_ptr() % 16}); "
                             "call .clone()")
    _check_gpu(a.device)


def _packed(t):
    """t as a contiguous, 16-byte aligned tensor (scales and bias are small: a copy is cheap)."""
    t = t.contiguous()
    return t.clone() if t.data_ptr() % 16 else t


_RUN_FP8 = None


def _run_fp8(*args, **kwargs):
    global _RUN_FP8
    if _RUN_FP8 is None:
        from .fp8_runner import run_fp8
        _RUN_FP8 = run_fp8
    return _RUN_FP8(*args, **kwargs)


_CALLS: dict = {}  # a call's key (_call_key) -> fp8_runner.HotCall, for calls that need no copy
_MAX_CALLS = 256


def _call_key(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum):
    """Everything a call's checks and launch depend on but the data: shapes, strides, dtypes,
    devices and whether every pointer is 16-byte aligned."""
    ptrs = a.data_ptr() | b.data_ptr() | scale_a.data_ptr() | scale_b.data_ptr()
    if bias is not None:
        ptrs |= bias.data_ptr()
    return (a.shape, a.stride(), b.shape, b.stride(), a.dtype, b.dtype, a.device, b.device,
            scale_a.shape, scale_a.stride(), scale_a.dtype, scale_a.device,
            scale_b.shape, scale_b.stride(), scale_b.dtype, scale_b.device, out_dtype, bool(use_fast_accum),
            None if bias is None else (bias.shape, bias.stride(), bias.dtype, bias.device), ptrs & 15)


def _scaled_mm_eager(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum):
    """The eager call: a configuration seen before (same shapes, strides, dtypes, devices,
    alignment; scales and bias that need no copy) launches at once; the first call of one is
    checked, run, and remembered."""
    try:
        key = _call_key(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum)
        hot = _CALLS.get(key)
    except (AttributeError, TypeError, RuntimeError):  # not tensors, or none of their own: the checks say which
        key = hot = None
    if _forward_ad_active():  # a dual's tangent would be dropped
        plain_tensors.check_plain("scaled_mm", a=a, b=b, scale_a=scale_a, scale_b=scale_b, bias=bias)
    if hot is not None:
        return hot(a, b, scale_a, scale_b, bias)
    out = _scaled_mm_checked(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum)
    if key is not None and key[-1] == 0 and out.numel() and a.shape[1]:
        _remember(key, a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum)
    return out


def _remember(key, a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum) -> None:
    """Keep the launch of a call whose scales and bias went to the kernel as they are."""
    if not all(t is None or t.is_contiguous() for t in (scale_a, scale_b, bias)):
        return
    M, K = a.shape
    N = b.shape[1]
    mode = _scale_mode(M, N, K, scale_a, scale_b)
    from .fp8_runner import hot_call
    hot = hot_call(M, N, K, mode, bool(use_fast_accum), a.dtype, b.dtype, out_dtype, bias is not None, a.device)
    if hot is not None:
        if len(_CALLS) >= _MAX_CALLS:
            try:  # the oldest; another thread may be evicting too
                _CALLS.pop(next(iter(_CALLS)), None)
            except (RuntimeError, StopIteration):
                pass
        _CALLS[key] = hot


def _scaled_mm_checked(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum):
    M, N, K, mode = _check_call(a, b, scale_a, scale_b, out_dtype, bias)
    plain_tensors.check_plain("scaled_mm", a=a, b=b, scale_a=scale_a, scale_b=scale_b, bias=bias)
    _check_memory(a, b)
    if M == 0 or N == 0:
        return torch.empty((M, N), dtype=out_dtype, device=a.device)
    if K == 0:  # an empty sum: no launch
        out = torch.zeros((M, N), dtype=out_dtype, device=a.device)
        return out if bias is None else out.add_(bias)
    if mode == "row":
        scale_a, scale_b = scale_a.reshape(M), scale_b.reshape(N)
    elif mode == "tensor":
        scale_a, scale_b = scale_a.reshape(1), scale_b.reshape(1)
    return _run_fp8(a, b.t(), _packed(scale_a), _packed(scale_b), mode=mode, out_dtype=out_dtype,
                    bias=None if bias is None else _packed(bias), fast_accum=bool(use_fast_accum), checked=True)


@torch.library.custom_op("gemm_ladder::scaled_mm", mutates_args=())
def scaled_mm_op(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor,
                 out_dtype: torch.dtype, bias: Optional[torch.Tensor] = None,
                 use_fast_accum: bool = False) -> torch.Tensor:
    """(a @ b) * scales (+ bias) on the fp8 kernel: scaled_mm's eager path."""
    return _scaled_mm_eager(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum)


@scaled_mm_op.register_fake
def _scaled_mm_fake(a, b, scale_a, scale_b, out_dtype, bias=None, use_fast_accum=False):
    M, N, _, _ = _check_call(a, b, scale_a, scale_b, out_dtype, bias)
    return a.new_empty((M, N), dtype=out_dtype)


def _no_backward(ctx, grad):
    raise RuntimeError(NO_BACKWARD)


scaled_mm_op.register_autograd(_no_backward, setup_context=lambda ctx, inputs, output: None)


def _wants_grad(a, b, scale_a, scale_b, bias) -> bool:
    """An input requires grad (the caller checks that grad mode is on)."""
    return (getattr(a, "requires_grad", False) or getattr(b, "requires_grad", False)
            or getattr(scale_a, "requires_grad", False) or getattr(scale_b, "requires_grad", False)
            or getattr(bias, "requires_grad", False))


def scaled_mm(a, b, scale_a, scale_b, *, out_dtype=torch.bfloat16, bias=None, use_fast_accum=False):
    """(a @ b) * scale_a * scale_b (+ bias) in out_dtype, like torch._scaled_mm.

    a: (M, K) row-major fp8; b: (K, N) column-major fp8 (w.t() of an (N, K) weight);
    float8_e4m3fn or float8_e5m2, not both e5m2. The scales are fp32 dequantization
    multipliers (x ~ x_fp8 * scale, what quantize_fp8 returns) and their shapes pick the mode:
    per-tensor (numel 1 each), row-wise (scale_a (M, 1), scale_b (1, N)) or block-wise
    (DeepGEMM's: scale_a (M, ceil(K/128)) per 1x128 tile of a, scale_b (ceil(N/128),
    ceil(K/128)) per 128x128 block of the weight); see _scale_mode for shapes that fit two.
    K must be a multiple of 16; N of 8 (of 4 for float32 output). bias: (N,) of out_dtype.
    use_fast_accum keeps the sum in the tensor core's accumulator (faster, less exact).
    Returns a contiguous (M, N) tensor; forward only (a backward pass raises)."""
    if use_fast_accum is not False and use_fast_accum is not True:
        raise TypeError(f"scaled_mm: use_fast_accum must be True or False, got {use_fast_accum!r}")
    if _compiling() or (_grad_enabled() and _wants_grad(a, b, scale_a, scale_b, bias)):
        return torch.ops.gemm_ladder.scaled_mm(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum)
    return _scaled_mm_eager(a, b, scale_a, scale_b, out_dtype, bias, use_fast_accum)


# ---- quantization ----------------------------------------------------------------------------

def _check_quant_args(mode, operand, dtype, what):
    if mode not in MODES:
        raise ValueError(f"{what}: mode must be one of {MODES}, got {mode!r}")
    if operand not in ("a", "b"):
        raise ValueError(f"{what}: operand must be 'a' (activations, (M, K)) or 'b' (an (N, K) weight), "
                         f"got {operand!r}")
    if dtype not in FP8:
        raise TypeError(f"{what}: dtype must be torch.float8_e4m3fn or torch.float8_e5m2, got {dtype}")


def _padded_blocks(x, rows_block: int):
    """x (R, C) zero-padded to whole blocks and viewed as (R/rb, rb, C/128, 128)."""
    R, C = x.shape
    pr, pc = _cdiv(R, rows_block) * rows_block, _cdiv(C, BLOCK) * BLOCK
    if (pr, pc) != (R, C):
        x = torch.nn.functional.pad(x, (0, pc - C, 0, pr - R))
    return x.view(pr // rows_block, rows_block, pc // BLOCK, BLOCK)


def _amax(t, dims):
    """|t|'s maximum over dims among its finite values (an Inf or NaN would set every value of
    its group to NaN); zero where the reduction is empty (no error on empty input)."""
    if t.numel() == 0:
        keep = [s for i, s in enumerate(t.shape) if i not in dims]
        return t.new_zeros(keep)
    return t.abs().nan_to_num(nan=0.0, posinf=0.0).amax(dim=dims)


def quantize_fp8(x, mode: str = "row", *, dtype=torch.float8_e4m3fn, operand: str = "a"):
    """(x_fp8, scale) for a 2-D bf16/fp16/fp32 tensor, on its own device; x ~ x_fp8 * scale.

    scale is the dequantization multiplier scaled_mm takes: amax / fp8_max per 'tensor'
    (shape ()), per 'row' ((rows, 1) for operand 'a'; for operand 'b', x is an (N, K) weight
    and the scale is (1, N), scaled_mm's scale_b) or per 'block' (operand 'a': 1x128 tiles
    along K, (rows, ceil(K/128)); operand 'b': 128x128 blocks, (ceil(N/128), ceil(K/128))).
    An all-zero group gets scale 1. The scales come from the finite values; e4m3 has no
    infinity, so an infinite x becomes NaN in x_fp8 (a NaN stays NaN) and the rest of its group
    keeps its values. For operand 'b' x_fp8 stays (N, K) row-major: pass x_fp8.t() to scaled_mm."""
    _check_quant_args(mode, operand, dtype, "quantize_fp8")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"quantize_fp8: x must be a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in QUANT_INPUTS:
        raise TypeError(f"quantize_fp8: x has dtype {x.dtype}; use bfloat16, float16 or float32")
    if x.dim() != 2:
        raise ValueError(f"quantize_fp8: x must be 2-D, got shape {tuple(x.shape)}")
    fmax = torch.finfo(dtype).max
    xf = x.float()
    R, C = xf.shape
    if mode == "tensor":
        amax = _amax(xf, (0, 1))
    elif mode == "row":
        amax = _amax(xf, (1,))
    else:
        blocks = _padded_blocks(xf, 1 if operand == "a" else BLOCK)
        amax = _amax(blocks, (1, 3))  # (R or ceil(R/128), ceil(C/128))
    scale = torch.where(amax > 0, amax / fmax, torch.ones_like(amax)).clamp(min=torch.finfo(torch.float32).tiny)
    if mode == "block":
        nr, rb, nc, _ = blocks.shape
        q = (blocks / scale[:, None, :, None]).reshape(nr * rb, nc * BLOCK)[:R, :C]
    else:
        q = xf / (scale[:, None] if mode == "row" else scale)
    x_fp8 = q.nan_to_num(nan=math.nan, posinf=math.nan, neginf=math.nan).clamp(-fmax, fmax).to(dtype).contiguous()
    if mode == "row":
        scale = scale.reshape(R, 1) if operand == "a" else scale.reshape(1, R)
    return x_fp8, scale


def dequantize_fp8(x_fp8, scale, mode: str = "row", operand: str = "a"):
    """x_fp8 * scale in fp32, for quantize_fp8's pairs (x_fp8 (rows, K); operand 'b': the (N, K) weight)."""
    if not isinstance(x_fp8, torch.Tensor) or not isinstance(scale, torch.Tensor):
        raise TypeError("dequantize_fp8: x_fp8 and scale must be torch.Tensors")
    _check_quant_args(mode, operand, x_fp8.dtype, "dequantize_fp8")
    if x_fp8.dim() != 2:
        raise ValueError(f"dequantize_fp8: x_fp8 must be 2-D, got shape {tuple(x_fp8.shape)}")
    R, C = x_fp8.shape
    kb, rb = _cdiv(C, BLOCK), (R if operand == "a" else _cdiv(R, BLOCK))
    want = {"tensor": None, "row": (R, 1) if operand == "a" else (1, R), "block": (rb, kb)}[mode]
    if (scale.numel() != 1) if want is None else (tuple(scale.shape) != want):
        raise ValueError(f"dequantize_fp8: scale has shape {tuple(scale.shape)}, expected "
                         f"{'numel 1' if want is None else want} for mode {mode!r}, operand {operand!r}")
    s = scale.float()
    if mode == "tensor":
        s = s.reshape(())
    elif mode == "row":
        s = s.reshape(R, 1)
    else:
        s = s.repeat_interleave(BLOCK, dim=1)[:, :C]
        if operand == "b":
            s = s.repeat_interleave(BLOCK, dim=0)[:R]
    return x_fp8.float() * s


# ---- the layer -------------------------------------------------------------------------------

def _weight_scale_shape(mode: str, out_features: int, in_features: int) -> tuple:
    return {"tensor": (), "row": (1, out_features),
            "block": (_cdiv(out_features, BLOCK), _cdiv(in_features, BLOCK))}[mode]


class Fp8Linear(torch.nn.Module):
    """nn.Linear's forward on fp8 operands: y = x @ W.T (+ bias) for x (..., in_features)
    bf16/fp16, result in x's dtype. The weight is quantized once (buffers weight_fp8
    (out, in) and weight_scale), the input on each call with the matching activation
    scaling: per token ('row'), per 1x128 tile ('block') or per tensor ('tensor').
    Inference only: no parameters, and a backward pass raises."""

    def __init__(self, in_features: int, out_features: int, bias: bool = False, *, mode: str = "row",
                 dtype=torch.float8_e4m3fn, bias_dtype=torch.bfloat16, device=None):
        super().__init__()
        _check_quant_args(mode, "b", dtype, "Fp8Linear")
        if in_features % 16 or out_features % 8:
            raise ValueError(f"Fp8Linear: in_features ({in_features}) must be a multiple of 16 and "
                             f"out_features ({out_features}) a multiple of 8")
        self.in_features, self.out_features, self._mode = in_features, out_features, mode
        self.register_buffer("weight_fp8", torch.zeros((out_features, in_features), dtype=dtype, device=device))
        self.register_buffer("weight_scale", torch.ones(_weight_scale_shape(mode, out_features, in_features),
                                                        device=device))
        self.register_buffer("bias", torch.zeros(out_features, dtype=bias_dtype, device=device) if bias else None)

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, *, mode: str = "row", dtype=torch.float8_e4m3fn) -> "Fp8Linear":
        """An Fp8Linear holding `linear`'s weight quantized (operand 'b') and a copy of its bias."""
        if not isinstance(linear, torch.nn.Linear):
            raise TypeError(f"Fp8Linear.from_linear: expected a torch.nn.Linear, got {type(linear).__name__}")
        w = linear.weight.detach()
        bias = linear.bias
        new = cls(linear.in_features, linear.out_features, bias is not None, mode=mode, dtype=dtype,
                  bias_dtype=bias.dtype if bias is not None else torch.bfloat16, device=w.device)
        new.weight_fp8, new.weight_scale = quantize_fp8(w, mode, dtype=dtype, operand="b")
        if bias is not None:
            new.bias = bias.detach().clone()
        return new

    @property
    def mode(self) -> str:
        return self._mode

    @mode.setter
    def mode(self, value) -> None:
        raise AttributeError(f"Fp8Linear.mode is fixed by its quantized weight ({self._mode!r}): build a new layer, "
                             f"e.g. Fp8Linear.from_linear(linear, mode={value!r})")

    def _apply(self, fn, recurse=True):
        # .half(), .to(torch.bfloat16) cast a model's floating tensors: the fp8 weight and its
        # fp32 scales keep their dtypes (a scale cast to bf16 would lose bits) and only move
        kept = {name: self._buffers[name] for name in ("weight_fp8", "weight_scale")}
        super()._apply(fn, recurse)
        for name, old in kept.items():
            if self._buffers[name].dtype != old.dtype:
                self._buffers[name] = old.to(self._buffers[name].device)
        return self

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        w = state_dict.get(prefix + "weight_fp8")
        if isinstance(w, torch.Tensor) and w.dtype != self.weight_fp8.dtype:  # copy_ would recode it, scales unfit
            error_msgs.append(f"weight_fp8 is {w.dtype} in the state dict and {self.weight_fp8.dtype} in this layer "
                              f"(its scales belong to the format): build the layer with dtype={w.dtype}")
            return
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)

    def forward(self, x):
        K, N = self.in_features, self.out_features
        if not isinstance(x, torch.Tensor) or x.dtype not in (torch.bfloat16, torch.float16):
            got = x.dtype if isinstance(x, torch.Tensor) else type(x).__name__
            raise TypeError(f"Fp8Linear: x must be a bfloat16 or float16 tensor, got {got}")
        if x.dim() == 0 or x.shape[-1] != K:
            raise ValueError(f"Fp8Linear: x has shape {tuple(x.shape)}; its last dimension must be {K}")
        x_fp8, x_scale = quantize_fp8(x.reshape(-1, K), self.mode, operand="a")
        bias = None if self.bias is None else self.bias.to(x.dtype)
        y = scaled_mm(x_fp8, self.weight_fp8.t(), x_scale, self.weight_scale, out_dtype=x.dtype, bias=bias)
        return y.reshape(*x.shape[:-1], N)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, mode={self.mode!r}, "
                f"dtype={self.weight_fp8.dtype}, bias={self.bias is not None}")
