"""The target for an ncu profile of one of our GEMM kernels beside cuBLAS's at the same shape
(the long-K narrow rows, where the two run the same decomposition at different speeds): each
shape's call of ours (the library's pick, or --key) three times, then cuBLAS's (a @ b.T) three
times, outputs checked against an fp32 reference first.

Usage: ncu --clock-control none --set full -o OUT python benchmarks/probes/gemm_ncu.py \\
           [--shapes 256x2048x4096,128x512x16384] [--key smallm:n64] [--dtype bfloat16]
"""
import argparse

import torch

from gemm_ladder.library import runner
from gemm_ladder.library.select import pick
from gemm_ladder.measure import bench

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="256x2048x4096,128x512x16384")
ap.add_argument("--key")
ap.add_argument("--dtype", default="bfloat16")
args = ap.parse_args()
dtype = getattr(torch, args.dtype)
bn = bench.Bench()
for shape in args.shapes.split(","):
    M, N, K = map(int, shape.split("x"))
    a, b = bn.inputs(M, N, K, dtype)
    ref = a.float() @ b.float().T
    key = args.key or pick(M, N, K, args.dtype)
    p = runner.plan(key, a, b)
    for _ in range(3):
        p.out.fill_(float("nan"))
        p()
    torch.cuda.synchronize()
    err = float((p.out.float() - ref).abs().max() / ref.abs().max())
    for _ in range(3):
        c = a @ b.T
    torch.cuda.synchronize()
    print(f"{shape} {args.dtype} {key}: rel err {err:.2e}, cuBLAS {float((c.float() - ref).abs().max() / ref.abs().max()):.2e}",
          flush=True)
