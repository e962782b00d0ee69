"""The attention door: `attention`, torch's scaled_dot_product_attention (forward) on the
attention ladder's kernels.

attention(q, k, v) computes softmax(scale · Q Kᵀ (+ causal mask)) V for q (B, Hq, Sq, D) and
k, v (B, Hkv, Sk, D) in fp16/bf16 on an sm_90 GPU, Hkv dividing Hq (GQA/MQA), D in 64, 128,
256. Every rejected call raises one line naming the argument before anything launches.
Operands are read in place where TMA can read them (unit stride along D, other strides
multiples of 8 elements, 16-byte aligned: e.g. the (B, S, H, D).transpose(1, 2) views);
otherwise the door hands the kernel a contiguous copy. Step "A1" (attention_a1.py) is the
ladder's unfused baseline; the fused steps A2.. and the default choice are
attention_runner.py's. Eager calls without grad go straight to the kernels; under
torch.compile, or when an input requires grad, the call goes through the
`gemm_ladder::attention` custom op, which traces (its fake gives the shapes) and refuses a
backward pass.
"""
from __future__ import annotations

import math
from numbers import Real
from typing import Optional

import torch

from ..families.attention import HEAD_DIMS, LIBRARY, MAX_TILES, STEPS as FUSED, WG_ROWS
from . import plain_tensors, runner
from .attention_runner import tma_readable

DTYPES = (torch.float16, torch.bfloat16)
STEPS = ("A1", *FUSED, *LIBRARY)  # A1: attention_a1.py; the ladder's fused steps and the library's builds
NO_BACKWARD = "gemm_ladder.attention: backward is not supported (forward only)"

_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled


def _check_call(q, k, v, causal, scale, return_lse, step) -> tuple[int, int, int, int, int, int]:
    """Everything about a call that shapes, dtypes and arguments decide (the fake's checks
    too: no data pointers, no GPU). scale is a number here. Returns (B, Hq, Hkv, Sq, Sk, D)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"attention: {name} must be a torch.Tensor, got {type(t).__name__}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dtype not in DTYPES:
            raise TypeError(f"attention: {name} has dtype {t.dtype}; use torch.float16 or torch.bfloat16")
    if not q.dtype == k.dtype == v.dtype:
        raise TypeError(f"attention: q, k and v must have one dtype, got {q.dtype}, {k.dtype} and {v.dtype}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if t.dim() != 4:
            raise ValueError(f"attention: {name} must be 4-D (batch, heads, seq, head_dim), got shape "
                             f"{tuple(t.shape)}")
    B, Hq, Sq, D = q.shape
    if tuple(k.shape) != tuple(v.shape):
        raise ValueError(f"attention: k and v must have one shape, got {tuple(k.shape)} and {tuple(v.shape)}")
    Bk, Hkv, Sk, Dk = k.shape
    if Bk != B:
        raise ValueError(f"attention: batch sizes differ: q has {B}, k and v have {Bk}")
    if D != Dk:
        raise ValueError(f"attention: head dims differ: q has {D}, k and v have {Dk}; they must be equal")
    if D not in HEAD_DIMS:
        raise ValueError(f"attention: head dim {D} is not supported; supported: {', '.join(map(str, HEAD_DIMS))}")
    if Hkv == 0 or Hq % Hkv:
        raise ValueError(f"attention: q has {Hq} heads, k and v {Hkv}: Hq must be a multiple of Hkv >= 1 (GQA)")
    if Sk == 0:
        raise ValueError("attention: k and v have sequence length 0: no keys to attend to")
    if isinstance(scale, torch.Tensor):
        raise TypeError("attention: scale must be a Python number, got a tensor (use float(scale))")
    if isinstance(scale, bool) or not isinstance(scale, Real) or not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"attention: scale must be a finite positive number, got {scale!r}")
    for name, flag in (("causal", causal), ("return_lse", return_lse)):
        if not isinstance(flag, bool):
            kind = type(flag).__name__ if type(flag).__module__ == "builtins" else f"{type(flag).__module__}.{type(flag).__name__}"
            raise TypeError(f"attention: {name} must be a bool, got {kind}")
    if step is not None and step not in STEPS:
        raise ValueError(f"attention: unknown step {step!r}; use None (the library's choice) or one of "
                         f"{', '.join(STEPS)}")
    if step != "A1" and -(-Sq // WG_ROWS) * Hq * B > MAX_TILES:
        raise ValueError(f"attention: B={B} x Hq={Hq} x Sq={Sq} is more tiles than the fused kernels count "
                         f"({MAX_TILES:,} of {WG_ROWS} query rows); step 'A1' takes any")
    for name, t in (("k", k), ("v", v)):
        if t.device != q.device:
            raise ValueError(f"attention: {name} is on {t.device} but q is on {q.device}: q, k and v must be on "
                             "one CUDA device")
    return B, Hq, Hkv, Sq, Sk, D


def _check_gpu(device) -> None:
    """A CUDA device of compute capability 9.0 (checked once per device)."""
    runner.check_door_device(device, "attention", "q", "attention kernels")


def _readable(t):
    """t itself when TMA can read it, else a contiguous copy (the slower, correct path)."""
    if tma_readable(t):
        return t
    c = t.contiguous()
    # .contiguous() returns t itself when only a size-1 dimension's stride or the address is off
    return c if c is not t and tma_readable(c) else t.clone(memory_format=torch.contiguous_format)


_RUN_ATTENTION = None


def _run_attention(*args, **kwargs):
    global _RUN_ATTENTION
    if _RUN_ATTENTION is None:
        from .attention_runner import run_attention
        _RUN_ATTENTION = run_attention
    return _RUN_ATTENTION(*args, **kwargs)


def _run_a1(*args, **kwargs):
    from .attention_a1 import run_a1
    return run_a1(*args, **kwargs)


def _attention_eager(q, k, v, causal, scale, return_lse, step):
    """(o, lse or None): the checks, then the kernels."""
    B, Hq, _, Sq, _, D = _check_call(q, k, v, causal, scale, return_lse, step)
    plain_tensors.check_plain("attention", q=q, k=k, v=v)
    _check_gpu(q.device)
    if B == 0 or Hq == 0 or Sq == 0:  # nothing to compute: no launch
        o = torch.empty((B, Hq, Sq, D), dtype=q.dtype, device=q.device)
        return o, (torch.empty((B, Hq, Sq), dtype=torch.float32, device=q.device) if return_lse else None)
    q, k, v = _readable(q), _readable(k), _readable(v)
    if step == "A1":
        return _run_a1(q, k, v, causal=causal, scale=float(scale), return_lse=return_lse)
    return _run_attention(q, k, v, causal=causal, scale=float(scale), return_lse=return_lse, step=step, checked=True)


def _no_lse(q):
    return q.new_empty((0,), dtype=torch.float32)


@torch.library.custom_op("gemm_ladder::attention", mutates_args=())
def attention_op(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float, return_lse: bool,
                 step: Optional[str] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(o, lse) on the attention kernels; lse is an empty (0,) tensor unless return_lse."""
    o, lse = _attention_eager(q, k, v, causal, scale, return_lse, step)
    return o, (_no_lse(q) if lse is None else lse)


@attention_op.register_fake
def _attention_fake(q, k, v, causal, scale, return_lse, step=None):
    B, Hq, _, Sq, _, D = _check_call(q, k, v, causal, scale, return_lse, step)
    lse = q.new_empty((B, Hq, Sq), dtype=torch.float32) if return_lse else _no_lse(q)
    return q.new_empty((B, Hq, Sq, D)), lse


def _no_backward(ctx, grad_o, grad_lse):
    raise RuntimeError(NO_BACKWARD)


attention_op.register_autograd(_no_backward, setup_context=lambda ctx, inputs, output: None)


def _check_unsupported(attn_mask, dropout_p, enable_gqa, q, k) -> None:
    """The arguments of torch's scaled_dot_product_attention this door does not take."""
    if attn_mask is not None:
        raise NotImplementedError("attention: attn_mask is not supported (use causal=True for a causal mask)")
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, Real):
        raise TypeError(f"attention: dropout_p must be a number, got {type(dropout_p).__name__}")
    if dropout_p != 0:
        raise NotImplementedError(f"attention: dropout_p={dropout_p} is not supported (forward inference only: "
                                  "dropout_p must be 0)")
    if enable_gqa is not None and not isinstance(enable_gqa, bool):
        raise TypeError(f"attention: enable_gqa must be None or a bool, got {type(enable_gqa).__name__}")
    if enable_gqa is False and all(isinstance(t, torch.Tensor) and t.dim() == 4 for t in (q, k)) \
            and q.shape[1] != k.shape[1]:
        raise ValueError(f"attention: q has {q.shape[1]} heads and k {k.shape[1]}, but enable_gqa=False: pass "
                         "enable_gqa=True (or None) for grouped-query attention")


def attention(q, k, v, *, causal=False, scale=None, return_lse=False, step=None, attn_mask=None, dropout_p=0.0,
              enable_gqa=None):
    """softmax(scale · q kᵀ) v, like torch.nn.functional.scaled_dot_product_attention
    (forward), for q (B, Hq, Sq, D), k and v (B, Hkv, Sk, D): fp16 or bf16, one CUDA device
    (sm_90), D in 64, 128, 256, Hkv dividing Hq (grouped-query attention; enable_gqa=False
    insists on Hq == Hkv, as torch does).

    causal: SDPA's is_causal (query i sees keys j <= i, top-left aligned). scale: a finite
    positive number (SDPA also takes 0 and negative ones), default 1/sqrt(D). return_lse: also return the (B, Hq, Sq) fp32 natural-log log-sum-exp of each
    query's scaled scores. step: None (the library's choice) or one of "A1" (the unfused
    baseline) .. "A5". attn_mask and dropout_p exist for SDPA's signature; only None and 0
    are accepted. Returns o (B, Hq, Sq, D), contiguous in q's dtype, or (o, lse). Forward
    only: a backward pass raises."""
    _check_unsupported(attn_mask, dropout_p, enable_gqa, q, k)
    if scale is None and isinstance(q, torch.Tensor) and q.dim() == 4:
        D = int(q.shape[-1])  # a number, also under torch.compile's dynamic shapes (D is one of three)
        scale = 1.0 / math.sqrt(D) if D else None
    if _compiling() or (_grad_enabled() and any(getattr(t, "requires_grad", False) for t in (q, k, v))):
        _check_call(q, k, v, causal, scale, return_lse, step)  # one clear line before the dispatcher sees it
        o, lse = torch.ops.gemm_ladder.attention(q, k, v, causal, float(scale), return_lse, step)
    else:
        o, lse = _attention_eager(q, k, v, causal, scale, return_lse, step)
    return (o, lse) if return_lse else o
