"""Probe: the 176-wide step-9 tile (9:n176) against the picks it would replace, K-major b
(`matmul_nt`) and row-major b (`matmul`, an N-major B read in place), fp16 and bf16. Every
candidate's output is poisoned, checked against fp32 and checked again over repeated runs
(bit-identical), then all are timed interleaved with cuBLAS (bench.py: L2 flushed, medians).

    PYTHONPATH=src python benchmarks/probes/widths/probe_widths.py [--json out.json]
"""
import argparse, json, statistics
import torch
import gemm_ladder
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.runtime import select

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="512x11008x4096,2048x11008x4096,2048x14336x4096,512x28672x8192,"
                                    "2048x28672x8192,2048x2056x2048,3000x5000x4000,4096x4096x4096")
ap.add_argument("--keys", default="9:n176,9:n192,9:c1,8:c1,9")
ap.add_argument("--dtypes", default="float16,bfloat16")
ap.add_argument("--layouts", default="nt,mm")
ap.add_argument("--reps", type=int, default=40)
ap.add_argument("--repeats", type=int, default=5)
ap.add_argument("--json", default=None)
args = ap.parse_args()
bench = Bench(0)
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
            for key in args.keys.split(","):
                out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
                if lay == "nt":
                    fn = lambda key=key, out=out: gemm_ladder.matmul_nt(a, b_nk, out, step=key)  # noqa: E731
                else:
                    fn = lambda key=key, out=out: gemm_ladder.matmul(a, b_kn, out, step=key)  # noqa: E731
                try:
                    fn(); torch.cuda.synchronize()
                    ok = check_product(out, a, b_nk)[0]
                    first = out.clone()
                    for _ in range(args.repeats):
                        out.fill_(float("nan")); fn()
                    torch.cuda.synchronize()
                    same = torch.equal(first, out)
                except Exception as e:  # a key that cannot take the shape/layout is reported, not fatal
                    print(f"  {spec} {dt} {lay} {key}: {type(e).__name__}: {str(e)[:120]}", flush=True)
                    continue
                names.append((key, bool(ok), bool(same))); fns.append(fn)
            c = torch.empty((M, N), dtype=dtype, device="cuda")
            theirs = (lambda: torch.matmul(a, b_nk.T, out=c)) if lay == "nt" else (lambda: torch.matmul(a, b_kn, out=c))
            theirs()
            times = bench.time_interleaved(fns + [theirs], args.reps)
            med = [statistics.median(t) * 1e3 for t in times]
            line = [f"{spec} {dt} {lay} (pick {pick}) cuBLAS {med[-1]:.1f} us:"]
            for (key, ok, same), t in zip(names, med):
                rows.append(dict(M=M, N=N, K=K, dtype=dt, layout=lay, kernel=key, pick=pick, us=t, cublas_us=med[-1],
                                 ratio_to_cublas=med[-1] / t, ok=ok and same, correct=ok, repeatable=same))
                line.append(f"{key} {t:.1f} ({med[-1] / t:.3f}){'' if ok else ' WRONG'}{'' if same else ' MOVING'}")
            print("  ".join(line), flush=True)
if args.json:
    json.dump(dict(commit=git_commit(), gpu=torch.cuda.get_device_name(), rows=rows), open(args.json, "w"), indent=1)
