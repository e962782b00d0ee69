"""Probe (perf-notes item 111): where a small kernel's fixed cost goes. skeleton.cu's levels (an
empty kernel; barrier init and a sync; the register hand-over; a staged 64 x 64 store through TMA;
one TMA load before it; the programmatic-launch wait) at several launch shapes (threads, dynamic
shared memory, CTAs, a cluster of 2), beside torch's empty kernel, cuBLAS and the library at 64^3
and 256^3. Three clocks per case: CUDA events around the call after an L2 flush (interleaved,
medians: the suite's method), the kernels' own device time and the gap after the flush (CUPTI),
and the time per launch of 64 launches back to back without a flush (a graph chain's case).
Every storing level's output is poisoned first and checked.

    PYTHONPATH=src python benchmarks/probes/skeleton/skeleton.py [--json out.json]
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

from gemm_ladder.cuda import driver, jit
from gemm_ladder.library import runner
from gemm_ladder.library.select import pick
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.measure.gpuinfo import Sampler
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "latency"))
import probe_latency_lib as lat  # noqa: E402 (benchmarks/probes/latency)

SOURCE = "../../../benchmarks/probes/skeleton/skeleton.cu"  # relative to the kernels' folder
ap = argparse.ArgumentParser()
ap.add_argument("--reps", type=int, default=60)
ap.add_argument("--json", default=None)
args = ap.parse_args()
bench = Bench(0)
stream = torch.cuda.current_stream().cuda_stream
KB = 1024
# name: (level, threads, dynamic smem, C rows, C cols, cluster, pdl)
CASES = {
    "L0 t128 s0 g16": (0, 128, 0, 256, 256, 1, False),
    "L0 t384 s0 g16": (0, 384, 0, 256, 256, 1, False),
    "L0 t384 s200K g16": (0, 384, 200 * KB, 256, 256, 1, False),
    "L0 t384 s200K g128": (0, 384, 200 * KB, 1024, 512, 1, False),
    "L1 t384 s200K g16": (1, 384, 200 * KB, 256, 256, 1, False),
    "L2 t384 s200K g16": (2, 384, 200 * KB, 256, 256, 1, False),
    "L3 t384 s200K g16": (3, 384, 200 * KB, 256, 256, 1, False),
    "L4 t384 s200K g16": (4, 384, 200 * KB, 256, 256, 1, False),
    "L5 t384 s200K g16 pdl": (5, 384, 200 * KB, 256, 256, 1, True),
    "L4 t384 s16K g16": (4, 384, 16 * KB, 256, 256, 1, False),
    "L4 t128 s16K g16": (4, 128, 16 * KB, 256, 256, 1, False),
    "L4 t128 s200K g16": (4, 128, 200 * KB, 256, 256, 1, False),
    "L4 t384 s200K g16 c2": (4, 384, 200 * KB, 256, 256, 2, False),
    "L4 t384 s200K g128": (4, 384, 200 * KB, 1024, 512, 1, False),
    "L4 t128 s16K g128": (4, 128, 16 * KB, 1024, 512, 1, False),
}


def skeleton_case(level, threads, smem, rows, cols, cluster, pdl):
    k = jit.compile_kernel(SOURCE, "skeleton", {"SK_LEVEL": level, "SK_THREADS": threads})
    lk = driver.load(k, 0, smem)
    a = torch.randn(rows, 64, device="cuda").half()
    c = torch.full((rows, cols), float("nan"), device="cuda", dtype=torch.half)
    ta = driver.TensorMap(a.data_ptr(), rows, 64, 64, 64, 64)
    tc = driver.TensorMap(c.data_ptr(), rows, cols, cols, 64, 64)
    grid = (rows // 64) * (cols // 64)
    launch = driver.PreparedLaunch(lk, (grid, 1, 1), (threads, 1, 1), [ta, tc, rows // 64], stream=stream,
                                   dynamic_smem=smem, cluster=(cluster, 1, 1) if cluster > 1 else None, pdl=pdl)
    launch()
    torch.cuda.synchronize()
    if level >= 3:  # every tile written: ones (level 3) or A's first 64 columns, tile by tile
        want = torch.ones_like(c) if level == 3 else a.repeat(1, cols // 64)
        assert torch.equal(c, want), f"skeleton level {level}: wrong output"
    return launch, (a, c, ta, tc)


fns, keep = {}, []
for name, spec in CASES.items():
    fn, held = skeleton_case(*spec)
    fns[name] = fn
    keep.append(held)
fns["torch empty kernel (_sleep 0)"] = lambda: torch.cuda._sleep(0)
for n in (64, 256):
    a, b = bench.inputs(n, n, n, torch.float16)
    keep.append((a, b))
    key = pick(n, n, n)
    p = runner.plan(key, a, b)
    p.out.fill_(float("nan"))
    p()
    torch.cuda.synchronize()
    ref = a.float() @ b.float().T
    assert float((p.out.float() - ref).abs().max() / ref.abs().max()) < 1e-2, f"{key} at {n}^3 wrong"
    fns[f"library {key} {n}^3"] = p
    fns[f"cuBLAS {n}^3"] = (lambda a=a, b=b: a @ b.T)

names = list(fns)
calls = [fns[n] for n in names]
bench.time_interleaved(calls, 3)
with Sampler(bench.nvml) as smp:
    ev = bench.time_interleaved(calls, args.reps)
rows = []
for name, fn, t in zip(names, calls, ev):
    prof = lat.profiled(bench, fn, 30)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    s.record()
    for _ in range(64):
        fn()
    e.record()
    torch.cuda.synchronize()
    row = {"case": name, "event_us": 1e3 * statistics.median(t), "device_us": prof["dur_us"],
           "gap_after_flush_us": prof["gap_us"], "back_to_back_us": 1e3 * s.elapsed_time(e) / 64,
           "kernels": prof["kernels"]}
    rows.append(row)
    print(f"{name:34s} event {row['event_us']:6.2f}  device {row['device_us']:6.2f}  gap {row['gap_after_flush_us']:5.2f}"
          f"  back-to-back {row['back_to_back_us']:6.2f} us", flush=True)
out = {"probe": "skeleton", "commit": git_commit(), "reps": args.reps, "gpu": smp.summary(), "rows": rows}
print("gpu during the timed loop:", out["gpu"])
if args.json:
    with open(args.json, "w") as f:
        json.dump(out, f, indent=1)
