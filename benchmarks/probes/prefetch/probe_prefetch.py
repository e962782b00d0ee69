"""Probe: the tensor maps' descriptors fetched at kernel entry (as built) against no prefetch
(-DGL_ABLATE_NO_PREFETCH=1), for the selection's pick and a few ladder steps per shape, each
output poisoned and checked against fp32 first, then both builds timed interleaved with
cuBLAS (bench.py: L2 flushed, medians).

    PYTHONPATH=src python benchmarks/probes/prefetch/probe_prefetch.py [--json out.json]
"""
import argparse, json, math, statistics
import torch
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.runtime import select, steps
from gemm_ladder.runtime.launch import plan

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="256x256x256,512x512x512,1000x1000x1000,1024x1024x1024,2048x2048x2048,"
                                    "4096x4096x4096,16x4096x4096,64x4096x4096,4096x4096x256")
ap.add_argument("--keys", default="pick,9,8,10", help="'pick' is the selection's kernel for the shape")
ap.add_argument("--dtypes", default="float16")
ap.add_argument("--reps", type=int, default=30)
ap.add_argument("--json", default=None)
args = ap.parse_args()
bench = Bench(0)
rows, logs = [], []
for dt in args.dtypes.split(","):
    dtype = getattr(torch, dt)
    for spec in args.shapes.split(","):
        M, N, K = map(int, spec.split("x"))
        a, b = bench.inputs(M, N, K, dtype)
        pick = select.pick(M, N, K, dt)
        keys = []  # the pick, and the ladder steps at the squares of 1000 and up
        for k in args.keys.split(","):
            k = pick if k == "pick" else k
            if k not in keys and (k == pick or min(M, N) >= 1000):
                keys.append(k)
        for key in keys:
            fns, ok, same = [], True, True
            for defines in ({}, {"GL_ABLATE_NO_PREFETCH": 1}):
                out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
                p = plan(steps.get_step(key), a, b, out, extra_defines=defines)
                p(); torch.cuda.synchronize()
                ok &= bool(check_product(out, a, b)[0])
                first = out.clone()
                out.fill_(float("nan")); p(); torch.cuda.synchronize()
                same &= torch.equal(first, out)
                fns.append(p)
            c = torch.empty((M, N), dtype=dtype, device="cuda")
            fns.append(lambda: torch.matmul(a, b.T, out=c))
            med = [statistics.median(t) * 1e3 for t in bench.time_interleaved(fns, args.reps)]
            row = dict(M=M, N=N, K=K, dtype=dt, kernel=key, us_entry=med[0], us_none=med[1], cublas_us=med[2],
                       ratio_entry=med[2] / med[0], ratio_none=med[2] / med[1], ok=ok, repeat_identical=same)
            rows.append(row)
            logs.append(math.log(med[1] / med[0]))
            print(f"{M}x{N}x{K} {dt} {key}: entry {med[0]:.2f} us ({row['ratio_entry']:.3f})  none {med[1]:.2f} "
                  f"({row['ratio_none']:.3f})  cuBLAS {med[2]:.2f}  gain {med[1] - med[0]:+.2f} us"
                  f"{'' if ok and same else '  WRONG' if not ok else '  MOVING'}", flush=True)
gm = math.exp(sum(logs) / len(logs)) if logs else 0
print(f"geomean none/entry over {len(rows)} rows: {gm:.4f}")
if args.json:
    json.dump(dict(commit=git_commit(), gpu=torch.cuda.get_device_name(), geomean_speedup=gm, rows=rows),
              open(args.json, "w"), indent=1)
