"""A/B in one process: A's TMA box of M rows (rounded up to 8) against the whole 128-row box, on
the entries that take one short tile row (no cluster), each call replayed from a CUDA graph,
interleaved with torch._scaled_mm per tensor, L2 flushed, medians; outputs checked against each
other. The whole-box builds are the same entries with a_box_rows answering bm.
Usage: PYTHONPATH=src python benchmarks/probes/fp8_abox.py [--reps N] [MxNxK:mode:entry ...]"""
import argparse
import statistics

import torch

from gemm_ladder.families import fp8
from gemm_ladder.library import fp8_api
from gemm_ladder.library.fp8_runner import run_fp8
from gemm_ladder.measure import bench
from gemm_ladder.measure.bench import graphed
from gemm_ladder.measure.gpuinfo import Sampler

ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=40)
ap.add_argument("cases", nargs="*", default=["64x7168x2048:block:fp8:128x128pc1", "64x7168x2048:tensor:fp8:128x64pc1",
                                             "64x28672x4096:block:fp8:128x128pc1", "64x4096x7168:tensor:fp8:128x128sk",
                                             "64x7168x2048:tensor:fp8:128x128pc1"])
args = ap.parse_args()
_rows = fp8.Fp8Entry.a_box_rows
fp8.Fp8Entry.a_box_rows = lambda self, M: self.bm if self.name.endswith("-wholebox") else _rows(self, M)
b = bench.Bench()
for case in args.cases:
    shape, mode, key = case.split(":", 2)
    M, N, K = map(int, shape.split("x"))
    x = torch.randn(M, K, device="cuda", generator=b.gen)
    w = torch.randn(N, K, device="cuda", generator=b.gen)
    qa, sa = fp8_api.quantize_fp8(x, mode, operand="a")
    qb, sb = fp8_api.quantize_fp8(w, mode, operand="b")
    if mode == "tensor":
        sa, sb = sa.reshape(1), sb.reshape(1)
    elif mode == "row":
        sa, sb = sa.reshape(M), sb.reshape(N)
    ta, tsa = fp8_api.quantize_fp8(x, "tensor", operand="a")
    tb, tsb = fp8_api.quantize_fp8(w, "tensor", operand="b")
    short, whole = fp8.get(key), fp8.with_fields(fp8.get(key), "wholebox")
    outs, fns = [], []
    for e in (short, whole):
        fn = lambda e=e: run_fp8(qa, qb, sa, sb, mode=mode, out_dtype=torch.bfloat16, entry=e)  # noqa: E731
        outs.append(fn())
        fns.append(graphed(fn).replay)
    fns.append(graphed(lambda: torch._scaled_mm(ta, tb.t(), tsa, tsb, out_dtype=torch.bfloat16)).replay)
    diff = float((outs[0].float() - outs[1].float()).abs().max())
    b.time_interleaved(fns, 3)
    with Sampler(b.nvml) as s:
        t = b.time_interleaved(fns, args.reps)
    us = [1e3 * statistics.median(x) for x in t]
    g = s.summary()
    print(f"{shape} {mode:6} {key:16} box {short.a_box_rows(M):3} rows {us[0]:7.2f} us | 128 rows {us[1]:7.2f} us | "
          f"_scaled_mm {us[2]:7.2f} us | short/whole {us[1] / us[0]:.3f}x | outputs differ by {diff:.1e} | "
          f"{g.get('sm_clock_mhz')} MHz {g.get('power_w')} W", flush=True)
