"""Attention step A1, the baseline of the attention ladder: the scores S = Q Kᵀ materialized
in memory by the library's GEMM, the softmax in torch (fp32), then O = P V by the GEMM again.

Every score is written to and read back from memory at least three times (the GEMM's output,
the softmax's input and output, the second GEMM's input): at long sequences that traffic,
not the tensor cores, sets the time — the memory wall the fused steps (A2 onwards,
attention_runner.py) remove by keeping S on chip.

The GEMMs run in the inputs' dtype (fp16/bf16) and so do their outputs: S is rounded to that
dtype before the softmax sees it, and P is rounded to it before P V. With large logits the
first rounding is the baseline's main error (bf16 keeps 8 bits of a score in the thousands).

There is no batched GEMM in the library: the loop runs over (batch, kv head), each iteration
one GEMM pair for the group of Hq / Hkv query heads that share the kv head (GQA) — their rows
of Q stacked, (G·Sq) x D.
"""
from __future__ import annotations

import torch

from . import fastpath


def _causal_mask(sq: int, sk: int, device) -> torch.Tensor:
    """True where a score is masked: key j > query i (torch SDPA's is_causal, top-left aligned)."""
    return torch.ones((sq, sk), dtype=torch.bool, device=device).triu_(1)


def run_a1(q, k, v, *, causal: bool, scale: float, return_lse: bool):
    """(o, lse) for validated q (B, Hq, Sq, D), k and v (B, Hkv, Sk, D) on an sm_90 GPU
    (attention_api checks everything first). o is contiguous in q's dtype; lse (B, Hq, Sq)
    fp32, natural log, or None."""
    B, Hq, Sq, D = q.shape
    Hkv, Sk = k.shape[1], k.shape[2]
    G = Hq // Hkv
    o = torch.empty((B, Hq, Sq, D), dtype=q.dtype, device=q.device)
    lse = torch.empty((B, Hq, Sq), dtype=torch.float32, device=q.device) if return_lse else None
    mask = _causal_mask(Sq, Sk, q.device) if causal else None
    for b in range(B):
        for h in range(Hkv):
            heads = slice(h * G, (h + 1) * G)
            qg = q[b, heads].reshape(G * Sq, D)  # a view when q's heads and rows fold, else a copy
            s = fastpath.run("nt", qg, k[b, h]).float().reshape(G, Sq, Sk)  # S = Q Kᵀ in q's dtype, then fp32
            s.mul_(scale)
            if mask is not None:
                s.masked_fill_(mask, float("-inf"))  # key 0 is never masked: no row is all -inf
            row_lse = torch.logsumexp(s, dim=-1, keepdim=True)
            p = s.sub_(row_lse).exp_().to(q.dtype).view(G * Sq, Sk)
            fastpath.run("mm", p, v[b, h], o[b, heads].view(G * Sq, D))  # O = P V, written in place
            if lse is not None:
                lse[b, heads] = row_lse.squeeze(-1)
    return o, lse
