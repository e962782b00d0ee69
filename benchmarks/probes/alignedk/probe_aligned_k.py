"""Probe: the small-M family above 128 rows on rows that are not whole 32-byte sectors (K, or
N for a row-major b, = 8 mod 16), against the library's pick — the shapes behind
smallm.ALIGNED_K (docs/perf-notes.md items 28, 42). Every candidate runs through the library's
call (`matmul_nt(a, b)` with b (N, K), or `matmul(a, b)` with b row-major (K, N)), checked
against fp32, then timed interleaved with torch.matmul on the same
operands (L2 flushed, medians).

    PYTHONPATH=src python benchmarks/probes/alignedk/probe_aligned_k.py [--json F]
"""
import argparse, json, statistics
import torch
import gemm_ladder
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.runtime import fastpath, smallm

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="1000x1000x1000,1016x1016x1016,1000x1000x1008,256x4104x4104,256x4088x4088,"
                                    "256x4000x4000,512x1000x4000,2000x1000x1000")
ap.add_argument("--fams", default="c2n128,n128,c2n64")
ap.add_argument("--ladder", default="8:c1")
ap.add_argument("--dtype", default="float16")
ap.add_argument("--reps", type=int, default=60)
ap.add_argument("--json", default=None)
args = ap.parse_args()
dtype = getattr(torch, args.dtype)
fams = {k: smallm.with_fields(smallm.FAMILIES[f"smallm:{k}"], "anym", max_m=1 << 30)
        for k in filter(None, args.fams.split(","))}
bench, rows = Bench(0), []
for spec in args.shapes.split(","):
    M, N, K = map(int, spec.split("x"))
    a, b_nk = bench.inputs(M, N, K, dtype)
    b_kn = b_nk.T.contiguous()
    for call, b, ours, theirs in (("matmul_nt", b_nk, gemm_ladder.matmul_nt, lambda: torch.matmul(a, b_nk.T)),
                                  ("matmul", b_kn, gemm_ladder.matmul, lambda: torch.matmul(a, b_kn))):
        names, fns = [], []
        for name, step in ([("pick", None)] + [(k, k) for k in filter(None, args.ladder.split(","))]
                           + list(fams.items())):
            fn = (lambda s=step, b=b, ours=ours: ours(a, b, step=s))
            try:
                out = fn()
                ok = check_product(out, a, b_nk)[0]
                kernel = fastpath.config_for("nt" if call == "matmul_nt" else "mm", a, b, None, step).step.key
            except Exception as e:  # a candidate that cannot run this layout is reported, not fatal
                print(f"  {spec} {call} {name}: {type(e).__name__}: {str(e)[:100]}", flush=True)
                continue
            names.append((name, kernel, bool(ok)))
            fns.append(fn)
        fns.append(theirs)
        med = [statistics.median(t) * 1e3 for t in bench.time_interleaved(fns, args.reps)]
        cub = med[-1]
        line = [f"{spec} {call}: cublas {cub:.1f} us"]
        for (name, kernel, ok), t in zip(names, med):
            line.append(f"{name}={kernel} {t:.1f} ({cub / t:.2f}){'' if ok else ' WRONG'}")
            rows.append(dict(M=M, N=N, K=K, dtype=args.dtype, call=call, candidate=name, kernel=kernel, us=t,
                             cublas_us=cub, ratio_to_cublas=cub / t, ok=ok))
        print("\n  ".join(line), flush=True)
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows), open(args.json, "w"), indent=1)
