"""Where an fp8 call's time goes: each kernel's device time (torch profiler, CUPTI) for our
call (the family's choice, or --entries) and torch._scaled_mm's, per tensor and row-wise scales,
each call after an L2 flush; the kernels' names say how cuBLAS tiles and splits the shape.
Usage: PYTHONPATH=src python benchmarks/probes/fp8_kernel_times.py [--entries fp8:128x128sk,...] [MxNxK ...]"""
import argparse
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from gemm_ladder.library.fp8_runner import choose_key, run_fp8, scale_shapes
from gemm_ladder.measure import bench

ap = argparse.ArgumentParser()
ap.add_argument("--entries", help="these entries beside the family's choice")
ap.add_argument("--reps", type=int, default=20)
ap.add_argument("shapes", nargs="*", default=["64x4096x7168", "128x4096x7168", "64x7168x2048", "1024x1024x1024",
                                              "512x7168x2048"])
args = ap.parse_args()
b = bench.Bench()
for shape in args.shapes:
    M, N, K = map(int, shape.split("x"))
    qa = torch.randn(M, K, device="cuda").to(torch.float8_e4m3fn)
    qb = torch.randn(N, K, device="cuda").to(torch.float8_e4m3fn)
    for mode in ("tensor", "row"):
        sa_shape, sb_shape = scale_shapes(mode, M, N, K)
        sa, sb = torch.rand(sa_shape, device="cuda") + 0.5, torch.rand(sb_shape, device="cuda") + 0.5
        keys = [choose_key(M, N, K, mode, False)] + (args.entries.split(",") if args.entries else [])
        calls = {k: (lambda k=k: run_fp8(qa, qb, sa, sb, mode=mode, out_dtype=torch.bfloat16, entry=k)) for k in keys}
        tsa, tsb = (sa, sb) if mode == "tensor" else (sa[:, None], sb[None, :])
        calls["_scaled_mm"] = lambda: torch._scaled_mm(qa, qb.t(), tsa, tsb, out_dtype=torch.bfloat16)
        for name, fn in calls.items():
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(args.reps):
                    b.flush_l2()
                    fn()
                torch.cuda.synchronize()
            per = defaultdict(list)
            for ev in prof.events():
                if ev.device_type == torch.autograd.DeviceType.CUDA and "zero" not in ev.name.lower() \
                        and "fill" not in ev.name.lower():
                    per[ev.name].append(ev.device_time)
            total = sum(sum(v) for v in per.values()) / args.reps
            parts = "; ".join(f"{n[:90]} {sum(v) / len(v):.2f} us x{len(v) // args.reps}" for n, v in per.items())
            print(f"{shape} {mode:6} {name:16} {total:7.2f} us | {parts}", flush=True)
