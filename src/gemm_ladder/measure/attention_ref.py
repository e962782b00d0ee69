"""The attention checks shared by the benchmark, the fuzzer and the sanitizer driver: a
reference of SDPA's forward in fp32 or fp64, the tolerance an output is held to, and outputs
that read NaN where a call leaves them unwritten.

Semantics are SDPA's: scores = scale·QKᵀ (scale 1/√D by default); causal is `is_causal`, the
mask's upper-left corner (query i sees keys 0..i, also when Sq != Sk); grouped-query heads: kv
head j serves query heads j·g .. j·g+g-1 (g = Hq // Hkv); lse = log Σ exp(scores) per query
row, natural log.
"""
from __future__ import annotations

import inspect
import math

import torch


def reference(q, k, v, *, causal: bool = False, scale: float | None = None, rows=None, acc=torch.float64):
    """(o, lse, logit_max) for query rows `rows` (all by default), in `acc`: o (B, Hq, R, D),
    lse and the largest |scale·qk| over the keys each row sees, both (B, Hq, R)."""
    B, Hq, Sq, D = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    if Hq % Hkv:
        raise ValueError(f"Hkv={Hkv} does not divide Hq={Hq}")
    scale = 1.0 / math.sqrt(D) if scale is None else scale
    idx = torch.arange(Sq, device=q.device) if rows is None else torch.as_tensor(rows, device=q.device)
    qq = q[:, :, idx].to(acc)
    kk = k.to(acc).repeat_interleave(Hq // Hkv, dim=1)
    vv = v.to(acc).repeat_interleave(Hq // Hkv, dim=1)
    s = (qq @ kk.transpose(-1, -2)) * scale
    if causal:
        hidden = torch.arange(Sk, device=q.device)[None, :] > idx[:, None]
        s = s.masked_fill(hidden, -math.inf)
    lse = torch.logsumexp(s, dim=-1)
    o = torch.exp(s - lse[..., None]) @ vv
    logit_max = s.masked_fill(torch.isinf(s), 0).abs().amax(dim=-1)
    return o, lse, logit_max


def sample_rows(S: int, n: int = 1024) -> list[int]:
    """About n query rows spread over 0..S-1 (the last one included): every diagonal block of a
    causal mask has rows among them, and the reference stays cheap at 16k."""
    return sorted(set(range(0, S, max(1, S // n))) | {S - 1})


def max_abs_err(out, ref) -> float:
    return float((out.to(ref.dtype) - ref).abs().max()) if ref.numel() else 0.0


def unit(dtype) -> float:
    """One unit of the output's precision: the spacing of floats at 1 (fp16 2^-10, bf16 2^-7)."""
    return float(torch.finfo(dtype).eps)


def tolerance(dtype, ref_max: float, sdpa_err: float | None, *, materializes_s: bool = False,
              logit_max: float = 0.0, v_max: float = 0.0) -> float:
    """What an output's max |error| may be: twice SDPA's on the same inputs plus one unit at the
    output's size. Without an SDPA figure: P and O each rounded once to the dtype move O by at
    most (u/2)·(max|v| + max|o|) (u = one unit), doubled. A step that stores S = QKᵀ in the
    input dtype (A1) also gets the effect of rounding each logit once: |Δlogit| <= (u/2)·max|logit|
    moves every softmax weight by a factor within exp(±u·max|logit|), so O by at most
    expm1(u·max|logit|)·max|v|."""
    u = unit(dtype)
    tol = 2.0 * sdpa_err + u * ref_max if sdpa_err is not None else u * (v_max + ref_max)
    if materializes_s:
        tol += math.expm1(u * logit_max) * v_max
    return tol


def lse_tolerance(dtype, logit_max, *, materializes_s: bool = False):
    """Per row: 1e-3 plus 2^-13 of the largest |logit| (fp32 sums and exp2 of a fused kernel).
    With S stored in the input dtype (A1), rounding the logits moves lse by at most
    (u/2)·max|logit| (u = one unit): twice that instead of the 2^-13."""
    per = unit(dtype) if materializes_s else 2.0 ** -13
    return 1e-3 + per * logit_max


def sdpa(q, k, v, *, causal: bool = False, scale: float | None = None):
    """torch's own SDPA on the same inputs (kv heads repeated for grouped-query calls, as
    enable_gqa does, so torch 2.4 takes it too)."""
    g = q.shape[1] // k.shape[1]
    if g > 1:
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale)


def poison_pool(sizes, device) -> None:
    """Fill a block of each (numel, dtype) with NaN and free it: the caching allocator hands these
    blocks to the next allocations of the same sizes, the call's outputs, so an element the call
    does not write reads NaN. Best effort (a call that allocates other buffers of those sizes
    first takes them); nothing to do on the CPU."""
    if torch.device(device).type != "cuda":
        return
    blocks = [torch.full((n,), math.nan, dtype=dt, device=device) for n, dt in sizes if n]
    del blocks


def takes_out(fn) -> bool:
    """Whether fn accepts out= (then the caller passes a NaN-filled output itself)."""
    try:
        return "out" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def call_poisoned(fn, q, k, v, *, return_lse: bool = False, **kw):
    """fn(q, k, v, return_lse=..., **kw) with its outputs NaN where unwritten: a NaN-filled out=
    when fn takes one, else the allocator's pool poisoned for the output sizes."""
    B, Hq, Sq, D = q.shape
    if takes_out(fn):
        kw["out"] = torch.full((B, Hq, Sq, v.shape[-1]), math.nan, dtype=q.dtype, device=q.device)
    else:
        # several blocks of each size: copies the door makes of q (o's size) may take the first
        poison_pool([(B * Hq * Sq * v.shape[-1], q.dtype)] * 4 + [(B * Hq * Sq, torch.float32)] * 2, q.device)
    if return_lse:
        return fn(q, k, v, return_lse=True, **kw)
    return fn(q, k, v, **kw), None
