"""A quick look at the fused attention steps (run_attention, kernel level): errors against an
fp32 reference beside SDPA's own, then TFLOP/s against SDPA's cuDNN and flash backends,
interleaved, L2 flushed, medians. 16k tokens per call, hidden 2048.
Usage: PYTHONPATH=src python benchmarks/probes/attention_quick.py [--no-time] [--no-check] [--steps=A2,A3]"""
import math
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from gemm_ladder.families.attention import LIBRARY, STEPS, get
from gemm_ladder.library.attention_runner import run_attention
from gemm_ladder.measure import bench
from gemm_ladder.measure.gpuinfo import Sampler

steps = list(STEPS) + list(LIBRARY)
for a in sys.argv[1:]:
    if a.startswith("--steps"):
        steps = a.split("=", 1)[1].split(",")


def reference(q, k, v, causal, scale):
    g = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(g, 1).float(), v.repeat_interleave(g, 1).float()
    s = (q.float() @ k.transpose(-1, -2)) * scale
    if causal:
        Sq, Sk = s.shape[-2:]
        s = s.masked_fill(torch.ones(Sq, Sk, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v, torch.logsumexp(s, -1)


def make(B, Hq, Hkv, Sq, Sk, D, dtype, layout):
    def t(H, S):
        if layout == "bshd":  # (B, S, H, D) memory, viewed as (B, H, S, D)
            return torch.randn(B, S, H, D, device="cuda", dtype=dtype).transpose(1, 2)
        return torch.randn(B, H, S, D, device="cuda", dtype=dtype)
    return t(Hq, Sq), t(Hkv, Sk), t(Hkv, Sk)


CASES = [] if "--no-check" in sys.argv else [  # B, Hq, Hkv, Sq, Sk, D, causal, layout
    (1, 2, 2, 128, 128, 128, False, "bhsd"), (1, 2, 2, 128, 128, 128, True, "bhsd"),
    (2, 4, 2, 200, 333, 64, False, "bshd"), (2, 4, 2, 200, 333, 64, True, "bshd"),
    (1, 8, 1, 17, 1000, 128, False, "bhsd"), (1, 8, 1, 1000, 17, 128, True, "bhsd"),
    (2, 2, 2, 1, 1, 256, False, "bhsd"), (2, 2, 2, 513, 513, 256, True, "bshd"),
    (1, 4, 4, 1024, 1024, 128, True, "bhsd"), (1, 4, 4, 1024, 1024, 64, False, "bhsd"),
    (4, 16, 4, 1000, 1000, 128, True, "bshd"), (4, 16, 16, 700, 900, 64, False, "bhsd"),  # persistent: several tiles per CTA
]
bad = 0
for B, Hq, Hkv, Sq, Sk, D, causal, layout in CASES:
    for dtype in (torch.float16, torch.bfloat16):
        q, k, v = make(B, Hq, Hkv, Sq, Sk, D, dtype, layout)
        scale = 1 / math.sqrt(D)
        ref, ref_lse = reference(q, k, v, causal, scale)
        sd = F.scaled_dot_product_attention(q, k.repeat_interleave(Hq // Hkv, 1), v.repeat_interleave(Hq // Hkv, 1),
                                            is_causal=causal)
        sdpa_err = float((sd.float() - ref).abs().max())
        line = []
        for st in steps:
            if D not in dict(get(st).blocks):
                continue
            o = torch.full((B, Hq, Sq, D), float("nan"), device="cuda", dtype=dtype)
            try:
                run_attention(q, k, v, causal=causal, scale=scale, return_lse=False, step=st, out=o)
                o2, lse = run_attention(q, k, v, causal=causal, scale=scale, return_lse=True, step=st)
                torch.cuda.synchronize()
                err = float((o.float() - ref).abs().max())
                lerr = float((lse - ref_lse).abs().max())
                same = bool(torch.equal(o, o2))
                ok = err <= 2 * sdpa_err + (1e-3 if dtype == torch.float16 else 8e-3) and lerr < 1e-2 and same
                bad += not ok
                line.append(f"{st} {err:.1e}/{lerr:.0e}{'' if same else ' NOT-SAME'}{'' if ok else ' FAIL'}")
            except Exception as e:  # noqa: BLE001 — a probe reports and goes on
                bad += 1
                line.append(f"{st} ERROR {type(e).__name__}: {str(e).splitlines()[0][:120]}")
                torch.cuda.synchronize()
        print(f"B{B} H{Hq}/{Hkv} {Sq}x{Sk} D{D} causal={causal} {layout} {str(dtype)[6:]}: sdpa {sdpa_err:.1e} | "
              + " | ".join(line), flush=True)
print(f"correctness: {bad} failures", flush=True)

if "--no-time" in sys.argv:
    sys.exit(0)
b = bench.Bench()
for D, S in ((128, 4096), (128, 16384), (64, 4096), (256, 16384), (128, 1024)):
    for causal in (False, True):
        dtype = torch.float16
        B, H = 16384 // S, 2048 // D
        q, k, v = make(B, H, H, S, S, D, dtype, "bhsd")
        fl = 4 * B * H * S * S * D / (2 if causal else 1) / 1e9
        fns, names = [], []
        for st in [s for s in steps if D in dict(get(s).blocks)]:
            fns.append(lambda st=st: run_attention(q, k, v, causal=causal, scale=D ** -0.5, return_lse=False, step=st))
            names.append(st)
        for be, nm in ((SDPBackend.CUDNN_ATTENTION, "cudnn"), (SDPBackend.FLASH_ATTENTION, "flash")):
            def f(be=be):
                with sdpa_kernel(be):
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            fns.append(f)
            names.append(nm)
        b.time_interleaved(fns, 2)
        with Sampler(b.nvml) as smp:
            t = b.time_interleaved(fns, 10)
        med = [statistics.median(x) for x in t]
        g = smp.summary()
        tf = {n: fl / m for n, m in zip(names, med)}
        print(f"D{D} S{S} causal={causal}: " + "  ".join(f"{n} {v:5.0f}" for n, v in tf.items())
              + f"  | best/cudnn {max(v for n, v in tf.items() if n not in ('cudnn', 'flash')) / tf['cudnn']:.3f}  {g.get('sm_clock_mhz')} MHz "
              f"{g.get('power_w')} W", flush=True)
