"""Probe: where a small problem's time goes — inside the kernel or around it. For each shape and
candidate (the pick, forced ladder steps, small-M entries), ours and cuBLAS are timed with CUDA
events (bench.py's method: interleaved, L2 flushed before each call, medians), then profiled
(torch profiler / CUPTI) call by call after a flush: per call, the device time of its kernels
(`dur`), first start to last end (`span`) and the gap from the flush kernel's end to the first
kernel's start (`gap`: launch latency with the queue full). Also lists cuBLAS's kernels.

    PYTHONPATH=src python benchmarks/probes/latency/probe_latency.py [--shapes 256x256x256,...]
"""
import argparse, json, statistics, sys
import torch
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.runtime import launch, select
from probe_latency_lib import profiled as _profiled

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="256x256x256,512x512x512,1024x1024x1024,1000x1000x1000,"
                                    "64x4096x4096,128x4096x4096,16x8192x8192,512x11008x4096")
ap.add_argument("--keys", default="5,7:d4,8:c1,smallm:n128")
ap.add_argument("--dtype", default="float16")
ap.add_argument("--reps", type=int, default=100)
ap.add_argument("--prof-reps", type=int, default=30)
ap.add_argument("--json", default=None)
args = ap.parse_args()
dtype = getattr(torch, args.dtype)
bench = Bench(0)
sms = launch.num_sms(0)


rows, timed = [], []
for spec in args.shapes.split(","):  # first every event timing: a profiler session leaves CUPTI
    M, N, K = map(int, spec.split("x"))  # attached, and the event timings after it are not clean
    a, b = bench.inputs(M, N, K, dtype)
    pick = select.pick(M, N, K, args.dtype, sms)
    cands, fns = [], []
    for key in [pick] + [k for k in args.keys.split(",") if k and k != pick]:
        out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
        try:
            p = launch.plan(key, a, b, out)
            p(); torch.cuda.synchronize()
            ok = check_product(out, a, b)[0]
        except Exception as e:  # a candidate that does not take the shape is reported, not fatal
            print(f"  {spec} {key}: {type(e).__name__}: {str(e)[:100]}", flush=True)
            continue
        cands.append((("pick=" if key == pick else "") + key, ok)); fns.append(p)
    c = torch.empty((M, N), dtype=dtype, device="cuda")
    cub = lambda a=a, b=b, c=c: torch.matmul(a, b.T, out=c)  # noqa: E731
    cub(); torch.cuda.synchronize()
    times = bench.time_interleaved(fns + [cub], args.reps)
    timed.append((spec, (M, N, K), cands + [("cublas", True)], fns + [cub], [statistics.median(t) * 1e3 for t in times]))
for spec, (M, N, K), cands, fns, ev in timed:  # then the kernels' device times
    prof = [_profiled(bench, f, args.prof_reps) for f in fns]
    for (name, ok), t, pr in zip(cands, ev, prof):
        row = {"M": M, "N": N, "K": K, "dtype": args.dtype, "kernel": name, "ok": bool(ok),
               "event_us": t, "ratio_to_cublas": ev[-1] / t, **pr}
        rows.append(row)
        print(f"{spec:18} {name:16} ok={ok!s:5} event {t:7.2f} us  x{ev[-1] / t:5.3f}  dur {pr['dur_us']:7.2f}"
              f"  span {pr['span_us']:7.2f}  gap {pr['gap_us']:5.2f}  n={len(pr['kernels'])}"
              + (f"  {' | '.join(pr['kernels'])}" if name == "cublas" else ""), flush=True)
if args.json:
    with open(args.json, "w") as f:
        json.dump({"commit": git_commit(), "gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)
