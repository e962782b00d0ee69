"""Probe: production tile widths against each other and cuBLAS, K-major b (`matmul_nt`) and
row-major b (`matmul`: an N-major B read in place, whose 64-wide blocks overhang a width that
is not a multiple of 64), fp16 and bf16, the library's pick beside them. Every kernel's output
is poisoned, checked against fp32 and again over repeated runs (bit-identical), then all are
timed interleaved with cuBLAS (L2 flushed, medians), SM clock and power sampled during the
timed loop. The defaults ask item 107's question: gemm:128x144 at 1536³ (12 x 11 = 132 tiles,
one full wave, where 176 makes 108; cuBLAS runs 144 x 128 tiles there) and gemm:128x104 at
1280³ (130 tiles, where smallm:c2n128 makes 100). Earlier runs (items 35,
55, 57, 60) passed their widths as --keys (then step 9's variants, 9:n176 ...).

    PYTHONPATH=src python benchmarks/probes/widths/probe_widths.py [--keys K1,K2] [--shapes MxNxK,...] [--json out.json]
"""
import argparse
import json
import statistics

import torch

import gemm_ladder
from gemm_ladder.library import select
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.measure.gpuinfo import Nvml, Sampler

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="1536x1536x1536,1536x1536x3072,1536x1536x768,1408x1408x1408,1664x1664x1664,"
                                    "1536x4096x1536,2048x8192x8192,1280x1280x1280,1152x1152x1152,1280x1280x2560")
ap.add_argument("--keys", default="gemm:128x144,gemm:128x104,gemm:128x176,gemm:128x192,gemm:128x128,"
                                  "gemm:128x256,smallm:c2n128")
ap.add_argument("--dtypes", default="float16,bfloat16")
ap.add_argument("--layouts", default="nt,mm")
ap.add_argument("--reps", type=int, default=40)
ap.add_argument("--repeats", type=int, default=5)
ap.add_argument("--json", default=None)
args = ap.parse_args()
bench = Bench(0)
nvml = Nvml()
rows = []
for dt in args.dtypes.split(","):
    dtype = getattr(torch, dt)
    for spec in args.shapes.split(","):
        M, N, K = map(int, spec.split("x"))
        a, b_nk = bench.inputs(M, N, K, dtype)
        b_kn = b_nk.T.contiguous()
        for lay in args.layouts.split(","):
            pick = select.pick(M, N, K, dt)
            names, fns = [], []
            for key in dict.fromkeys(args.keys.split(",") + [pick]):
                out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
                if lay == "nt":
                    fn = lambda key=key, out=out: gemm_ladder.matmul_nt(a, b_nk, out, step=key)  # noqa: E731
                else:
                    fn = lambda key=key, out=out: gemm_ladder.matmul(a, b_kn, out, step=key)  # noqa: E731
                try:
                    fn()
                    torch.cuda.synchronize()
                    ok = check_product(out, a, b_nk)[0]
                    first = out.clone()
                    for _ in range(args.repeats):
                        out.fill_(float("nan"))
                        fn()
                    torch.cuda.synchronize()
                    same = torch.equal(first, out)
                except Exception as e:  # a key that cannot take the shape or layout is reported, not fatal
                    print(f"  {spec} {dt} {lay} {key}: {type(e).__name__}: {str(e)[:120]}", flush=True)
                    continue
                names.append((key, bool(ok), bool(same)))
                fns.append(fn)
            c = torch.empty((M, N), dtype=dtype, device="cuda")
            theirs = (lambda: torch.matmul(a, b_nk.T, out=c)) if lay == "nt" else (lambda: torch.matmul(a, b_kn, out=c))
            theirs()
            with Sampler(nvml) as sampler:
                times = bench.time_interleaved(fns + [theirs], args.reps)
            gpu = sampler.summary()
            med = [statistics.median(t) * 1e3 for t in times]
            line = [f"{spec} {dt} {lay} (pick {pick}) cuBLAS {med[-1]:.1f} us:"]
            for (key, ok, same), t in zip(names, med):
                rows.append(dict(M=M, N=N, K=K, dtype=dt, layout=lay, kernel=key, pick=pick, us=t, cublas_us=med[-1],
                                 ratio_to_cublas=med[-1] / t, ok=ok and same, correct=ok, repeatable=same, gpu=gpu))
                line.append(f"{key} {t:.1f} ({med[-1] / t:.3f}){'' if ok else ' WRONG'}{'' if same else ' MOVING'}")
            print("  ".join(line), flush=True)
if args.json:
    with open(args.json, "w") as f:
        json.dump(dict(commit=git_commit(), gpu=torch.cuda.get_device_name(), reps=args.reps, rows=rows), f, indent=1)
