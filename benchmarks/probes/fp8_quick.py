"""A quick look at the fp8 kernels against torch._scaled_mm (bf16 out), kernel level (run_fp8,
operands already K-major), interleaved, L2 flushed, medians; errors against an fp32 reference.
Usage: PYTHONPATH=src python benchmarks/probes/fp8_quick.py [MxNxK ...]"""
import statistics
import sys

import torch

from gemm_ladder.library.fp8_runner import run_fp8, scale_shapes
from gemm_ladder.measure import bench
from gemm_ladder.measure.gpuinfo import Sampler

shapes = [tuple(map(int, s.split("x"))) for s in sys.argv[1:]] or [(4096, 4096, 4096), (8192, 8192, 8192),
                                                                   (2048, 28672, 4096), (128, 7168, 2048)]
CASES = (("fp8:128x128p", "tensor", False), ("fp8:128x256p", "tensor", False), ("fp8:128x128p", "block", False),
         ("fp8:128x256p", "block", False), ("fp8:128x256", "tensor", True), ("fp8:128x128sk", "tensor", False))
b = bench.Bench()
for M, N, K in shapes:
    qa = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    qb = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn)
    one = torch.ones(1, device="cuda")
    ref = qa.float() @ qb.float().t()
    for key, mode, fast in CASES:
        sa_shape, sb_shape = scale_shapes(mode, M, N, K)
        sa, sb = torch.ones(sa_shape, device="cuda"), torch.ones(sb_shape, device="cuda")
        ours = lambda: run_fp8(qa, qb, sa, sb, mode=mode, out_dtype=torch.bfloat16, entry=key)  # noqa
        theirs = lambda: torch._scaled_mm(qa, qb.t(), one, one, out_dtype=torch.bfloat16, use_fast_accum=fast)  # noqa
        err = float((ours().float() - ref).abs().max() / ref.abs().max())
        b.time_interleaved([ours, theirs], 3)
        with Sampler(b.nvml) as s:
            t = b.time_interleaved([ours, theirs], 30)
        ms, tms = statistics.median(t[0]), statistics.median(t[1])
        fl = 2 * M * N * K / 1e9
        g = s.summary()
        print(f"{M}x{N}x{K} {key:>13} {mode:>6} fast={fast}: {fl / ms:7.0f} TF vs {fl / tms:7.0f} TF  x{tms / ms:.3f}"
              f"  err {err:.1e}  {g.get('sm_clock_mhz')} MHz {g.get('power_w')} W", flush=True)
