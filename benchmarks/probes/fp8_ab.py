"""One process, two trees, for the fp8 family: the library's entry per call (or ENTRY) built from
this tree's kernels beside the same entry built from another tree's (--old-kernels DIR, e.g. an
older checkout's src/gemm_ladder/kernels), each call replayed from a CUDA graph, interleaved with
torch._scaled_mm, L2 flushed before each replay, medians, clock and power sampled during the timed
loop; the two builds' outputs compared with each other and with an fp32 reference.
Usage: PYTHONPATH=src python benchmarks/probes/fp8_ab.py --old-kernels DIR [--reps N] [--json F]
       [MxNxK:mode[:fast][:ENTRY] ...]"""
import argparse
import contextlib
import json
import statistics
from pathlib import Path

import torch

from gemm_ladder.families import fp8
from gemm_ladder.library import fp8_api
from gemm_ladder.library.fp8_runner import choose_key, run_fp8
from gemm_ladder.measure import bench, probe
from gemm_ladder.measure.bench import graphed
from gemm_ladder.measure.gpuinfo import Sampler

ap = argparse.ArgumentParser()
ap.add_argument("--old-kernels", required=True)
ap.add_argument("--reps", type=int, default=40)
ap.add_argument("--json")
ap.add_argument("cases", nargs="*", default=["8192x7168x2048:row:fast", "8192x28672x4096:row:fast",
                                             "2048x7168x2048:row:fast", "8192x28672x4096:row", "2048x7168x2048:row",
                                             "512x28672x4096:row", "4096x4096x4096:row", "8192x7168x2048:tensor:fast"])
args = ap.parse_args()
old_dir = Path(args.old_kernels)
b = bench.Bench()
rows = []
for case in args.cases:
    parts = case.split(":")
    M, N, K = map(int, parts[0].split("x"))
    mode, fast = parts[1], "fast" in parts[2:]
    key = next((p for p in parts[2:] if p != "fast"), None) or choose_key(M, N, K, mode, fast)
    if ":" not in key:
        key = "fp8:" + key
    x = torch.randn(M, K, device="cuda", generator=b.gen)
    w = torch.randn(N, K, device="cuda", generator=b.gen)
    qa, sa = fp8_api.quantize_fp8(x, mode, operand="a")
    qb, sb = fp8_api.quantize_fp8(w, mode, operand="b")
    ref = fp8_api.dequantize_fp8(qa, sa, mode, "a") @ fp8_api.dequantize_fp8(qb, sb, mode, "b").t()
    ksa, ksb = (sa.reshape(1), sb.reshape(1)) if mode == "tensor" else (sa.reshape(M), sb.reshape(N)) \
        if mode == "row" else (sa, sb)
    tmode = "tensor" if mode == "block" else mode
    ta, tsa = fp8_api.quantize_fp8(x, tmode, operand="a")
    tb, tsb = fp8_api.quantize_fp8(w, tmode, operand="b")
    new, old = fp8.get(key), fp8.with_fields(fp8.get(key), "old")
    outs, fns = {}, []
    for name, e in (("new", new), ("old", old)):
        fn = lambda e=e: run_fp8(qa, qb, ksa, ksb, mode=mode, out_dtype=torch.bfloat16, entry=e,  # noqa: E731
                                 fast_accum=fast)
        with probe.kernels_from(old_dir) if name == "old" else contextlib.nullcontext():
            outs[name] = fn()  # the first call builds and loads the entry ("-old": the other tree's)
        fns.append(graphed(fn))
    theirs = graphed(lambda: torch._scaled_mm(ta, tb.t(), tsa, tsb, out_dtype=torch.bfloat16, use_fast_accum=fast))
    same = bool(torch.equal(outs["new"], outs["old"]))
    err = float((outs["new"].float() - ref).abs().max() / ref.abs().max())
    calls = [g.replay for g in fns] + [theirs.replay]
    b.time_interleaved(calls, 3)
    with Sampler(b.nvml) as smp:
        t = b.time_interleaved(calls, args.reps)
    us = [1e3 * statistics.median(x) for x in t]
    row = {"M": M, "N": N, "K": K, "mode": mode, "fast": fast, "entry": key, "new_us": us[0], "old_us": us[1],
           "scaled_mm_us": us[2], "new_over_old": us[1] / us[0], "identical": same, "rel_err": err,
           "gpu": smp.summary()}
    rows.append(row)
    print(f"{M}x{N}x{K} {mode:6}{' fast' if fast else '     '} {key:15} new {us[0]:8.2f} us  old {us[1]:8.2f} us "
          f"({us[1] / us[0]:.3f}x)  _scaled_mm {us[2]:8.2f} (new x{us[2] / us[0]:.3f}, old x{us[2] / us[1]:.3f})  "
          f"identical {same}  err {err:.1e}", flush=True)
if args.json:
    with open(args.json, "w") as f:
        json.dump({"old_kernels": str(old_dir), "reps": args.reps, "rows": rows}, f, indent=1)
