"""The target for an ncu profile of block scales against per tensor on the same fp8 kernel
(fp8:128x256p, the block-wise pick at 4096^3): each mode's call three times, per tensor first,
then block-wise (ncu takes them by order: --launch-skip 2 --launch-count 4 profiles the last
per-tensor call and the three block-wise ones). Outputs checked against the dequantized fp32
product before anything is profiled.

Usage: ncu --clock-control none -k regex:fp8 --launch-skip 2 --launch-count 4 --set full \\
           -o OUT python benchmarks/probes/fp8_ncu.py [--size 4096] [--entry fp8:128x256p]
"""
import argparse

import torch

from fp8_block_variants import quantized
from gemm_ladder.families import fp8
from gemm_ladder.library.fp8_runner import run_fp8

ap = argparse.ArgumentParser()
ap.add_argument("--size", type=int, default=4096)
ap.add_argument("--entry", default="fp8:128x256p")
args = ap.parse_args()
n = args.size
g = torch.Generator(device="cuda").manual_seed(0)
x = torch.randn(n, n, device="cuda", generator=g)
w = torch.randn(n, n, device="cuda", generator=g)
e = fp8.get(args.entry)
for mode in ("tensor", "block"):
    qa, sa, qb, sb, ref = quantized(x, w, mode)
    for _ in range(3):
        c = torch.full((n, n), float("nan"), dtype=torch.bfloat16, device="cuda")
        run_fp8(qa, qb, sa, sb, mode=mode, out_dtype=torch.bfloat16, entry=e, out=c)
    torch.cuda.synchronize()
    err = float((c.float() - ref).abs().max() / ref.abs().max())
    print(f"{args.entry} {mode} {n}^3: rel err {err:.2e}", flush=True)
