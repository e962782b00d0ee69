"""Probe: for every suite shape whose recorded pick is a step-9 kernel, that kernel with its
two-slot epilogue ring (b0) and with the borrowed stage (b1), timed interleaved with cuBLAS
(bench.py: L2 flushed, medians), each output poisoned and checked against fp32 first.

    PYTHONPATH=src python benchmarks/probes/borrow/probe_suite_borrow.py \
        --record benchmarks/results/2026-11-30_h200_suite_all_2f25461.json [--dtypes float16] [--json out.json]
"""
import argparse, json, math, statistics
import torch
import gemm_ladder
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.measure.accuracy import check_product

ap = argparse.ArgumentParser()
ap.add_argument("--record", required=True)
ap.add_argument("--dtypes", default="float16")
ap.add_argument("--reps", type=int, default=20)
ap.add_argument("--json", default=None)
args = ap.parse_args()
rec = json.load(open(args.record))
bench = Bench(0)
rows, logs = [], {"b0": [], "b1": []}
for dt in args.dtypes.split(","):
    dtype = getattr(torch, dt)
    seen = set()
    for r in rec["rows"]:
        if r["dtype"] != dt or not str(r.get("kernel", "")).startswith("9") or (r["M"], r["N"], r["K"]) in seen:
            continue
        seen.add((r["M"], r["N"], r["K"]))
        M, N, K, base = r["M"], r["N"], r["K"], r["kernel"]
        a, b_nk = bench.inputs(M, N, K, dtype)
        keys = {"b0": base + ("b0" if ":" in base else ":b0"), "b1": base + ("b1" if ":" in base else ":b1")}
        fns, ok = [], True
        for tag, key in keys.items():
            out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
            fn = lambda key=key, out=out: gemm_ladder.matmul_nt(a, b_nk, out, step=key)  # noqa: E731
            fn(); torch.cuda.synchronize()
            ok &= bool(check_product(out, a, b_nk)[0])
            fns.append(fn)
        c = torch.empty((M, N), dtype=dtype, device="cuda")
        fns.append(lambda: torch.matmul(a, b_nk.T, out=c))
        med = [statistics.median(t) * 1e3 for t in bench.time_interleaved(fns, args.reps)]
        row = dict(M=M, N=N, K=K, dtype=dt, kernel=base, us_b0=med[0], us_b1=med[1], cublas_us=med[2],
                   ratio_b0=med[2] / med[0], ratio_b1=med[2] / med[1], ok=ok)
        rows.append(row)
        logs["b0"].append(math.log(row["ratio_b0"])); logs["b1"].append(math.log(row["ratio_b1"]))
        print(f"{M}x{N}x{K} {dt} {base}: b0 {med[0]:.1f} ({row['ratio_b0']:.3f})  b1 {med[1]:.1f} "
              f"({row['ratio_b1']:.3f})  cuBLAS {med[2]:.1f}  b1/b0 {med[0] / med[1]:.3f}{'' if ok else ' WRONG'}",
              flush=True)
gm = {k: math.exp(sum(v) / len(v)) for k, v in logs.items() if v}
print(f"geomean over {len(rows)} shapes: b0 {gm.get('b0', 0):.4f}  b1 {gm.get('b1', 0):.4f}")
if args.json:
    json.dump(dict(commit=git_commit(), gpu=torch.cuda.get_device_name(), geomean=gm, rows=rows),
              open(args.json, "w"), indent=1)
