"""Probe: is the small-M family at M = 64-128 limited by L2 -> SM bandwidth? Runs each
candidate (family entry x K split, cuBLAS) once after a warm-up, between
cudaProfilerStart/Stop, so that

    ncu --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \
        --csv --page details python benchmarks/probes/midm/ncu_l2.py

reports each kernel's duration, L2 and DRAM throughput (ncu flushes caches between passes).
Without ncu it prints the candidates' times (interleaved, L2 flushed, medians).

    PYTHONPATH=src python benchmarks/probes/midm/ncu_l2.py --cases 128x4096x4096:n128:2,...
"""
import argparse, statistics
import torch
from gemm_ladder.measure.bench import Bench
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.runtime import launch, smallm

ap = argparse.ArgumentParser()
ap.add_argument("--cases", default="128x4096x4096:n128:2,128x4096x4096:c2n128:4,128x4096x4096:c2n128:2,"
                "128x4096x4096:n128:1,64x4096x4096:n128:2,64x4096x4096:n128:4,64x4096x4096:n128:1,"
                "128x4096x4096:cublas,64x4096x4096:cublas,1000x1000x1000:8:c1,1000x1000x1000:cublas",
                help="MxNxK:family:splits (family n32x: smallm:n32 off its niche), MxNxK:ladder step key, or MxNxK:cublas")
ap.add_argument("--dtype", default="float16")
ap.add_argument("--reps", type=int, default=40)
args = ap.parse_args()
dtype = getattr(torch, args.dtype)
bench = Bench(0)
F = smallm.FAMILIES
BIG = 1 << 30
runs = []
inputs = {}
for case in args.cases.split(","):
    shape, *what = case.split(":")
    M, N, K = map(int, shape.split("x"))
    if shape not in inputs:
        inputs[shape] = bench.inputs(M, N, K, dtype)
    a, b = inputs[shape]
    out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
    if what == ["cublas"]:
        fn = lambda a=a, b=b: torch.matmul(a, b.T)
        ok = True
    elif len(what) == 2 and what[1].isdigit():
        if what[0] == "n32x":  # smallm:n32 without its niche rule (any M, any K)
            fam = smallm.with_fields(F["smallm:n32"], "anym", max_m=BIG, one_wave_max_kt=0)
        else:
            fam = smallm.with_fields(F[what[0]] if what[0] in F else F[f"smallm:{what[0]}"], "anym", max_m=BIG)
        fn = fam.plan(a, b, out, splits=int(what[1]))
        fn(); torch.cuda.synchronize()
        ok = bool(check_product(out, a, b)[0])
    else:
        fn = launch.plan(":".join(what), a, b, out)
        fn(); torch.cuda.synchronize()
        ok = bool(check_product(out, a, b)[0])
    d = getattr(fn, "deal", None)
    runs.append((case + (f" [c{d.ctas} p{d.planes}]" if d is not None else ""), fn, ok))

times = bench.time_interleaved([f for _, f, _ in runs], args.reps)
for (name, _, ok), t in zip(runs, times):
    print(f"{name:44s} {statistics.median(t) * 1e3:7.1f} us{'' if ok else '  WRONG'}", flush=True)

torch.cuda.synchronize()
torch.cuda.profiler.start()
for name, fn, _ in runs:
    torch.cuda.nvtx.range_push(name)
    fn()
    torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
