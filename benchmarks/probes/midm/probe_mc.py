"""Probe: the multicast pairs (smallm:n128m2) through the library with a row-major b (N-major B,
read in place) against the single-CTA entry and the selection's pick, and the pairs' ring depth
on K-major B. Each candidate on a poisoned output checked against fp32 first, then timed
interleaved with cuBLAS (L2 flushed, medians).

    PYTHONPATH=src python benchmarks/probes/midm/probe_mc.py [--shapes 1000x1000x1000,...]
"""
import argparse, json, statistics
import torch
import gemm_ladder
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import api, smallm

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="1000x1000x1000,264x1000x1000,1000x1000x1008,2000x1000x1000,1000x3000x1000")
ap.add_argument("--dtypes", default="float16,bfloat16")
ap.add_argument("--depths", default="6,8,9")
ap.add_argument("--reps", type=int, default=80)
ap.add_argument("--json", default=None)
args = ap.parse_args()
bench = Bench(0)
rows = []
F = smallm.FAMILIES
for dname in args.dtypes.split(","):
    dtype = getattr(torch, dname)
    for shape in args.shapes.split(","):
        M, N, K = map(int, shape.split("x"))
        a, b = bench.inputs(M, N, K, dtype)
        b_kn = b.t().contiguous()
        names, fns = [], []
        def add(name, fn):
            out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
            try:
                fn(out); torch.cuda.synchronize()
                ok = check_product(out, a, b)[0]
            except Exception as e:
                print(f"  {name}: {type(e).__name__}: {str(e)[:160]}", flush=True)
                return
            names.append(name + ("" if ok else " WRONG")); fns.append(lambda fn=fn, out=out: fn(out))
        pick_kn = api.step_for(M, N, K, dname, b_mn=True).key
        add(f"kn pick={pick_kn}", lambda o: gemm_ladder.matmul(a, b_kn, out=o))
        for key in ("smallm:n128", "smallm:n128m2"):
            add(f"kn {key}", lambda o, key=key: gemm_ladder.matmul(a, b_kn, out=o, step=key))
        pick_nk = api.step_for(M, N, K, dname).key
        add(f"nk pick={pick_nk}", lambda o: gemm_ladder.matmul_nt(a, b, out=o))
        for d in map(int, args.depths.split(",")):
            fam = smallm.with_fields(F["smallm:n128m2"], f"d{d}", depth=d, max_m=1 << 30, min_m=1)
            plans = {}
            def run(o, fam=fam, plans=plans):
                if o.data_ptr() not in plans:
                    plans[o.data_ptr()] = fam.plan(a, b, o)
                plans[o.data_ptr()]()
            add(f"nk n128m2:d{d}", run)
        names.append("cublas kn"); fns.append(lambda: torch.matmul(a, b_kn))
        times = bench.time_interleaved(fns, args.reps)
        med = [statistics.median(t) * 1e3 for t in times]
        cub = med[-1]
        print(f"{shape} {dname} cublas {cub:.1f} us", flush=True)
        for n, t in zip(names[:-1], med[:-1]):
            print(f"  {n:36s} {t:7.1f} ({cub / t:.3f})", flush=True)
            rows.append(dict(M=M, N=N, K=K, dtype=dname, kernel=n, us=t, cublas_us=cub, ratio_to_cublas=cub / t,
                             ok="WRONG" not in n))
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows), open(args.json, "w"), indent=1)
