"""Probe: ladder kernels with a deeper ring than their registry entry (item 44's finding for the
small-M family: bytes in flight set the per-SM rate). Each candidate on poisoned outputs
checked against fp32, then timed interleaved with cuBLAS (L2 flushed, medians).

    PYTHONPATH=src python benchmarks/probes/midm/probe_depth.py \
        --shapes 1000x1000x1000,512x4096x4096 --kernels 8:c1,8:c1+depth=6
"""
import argparse, json, statistics
import torch
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.runtime import launch, select, steps

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="1000x1000x1000,1024x1024x1024,768x768x768,512x4096x4096,512x11008x4096,"
                "2048x2048x2048,3000x5000x4000")
ap.add_argument("--kernels", default="8:c1,8:c1+depth=6,pick")
ap.add_argument("--dtype", default="float16")
ap.add_argument("--reps", type=int, default=60)
ap.add_argument("--json", default=None)
args = ap.parse_args()
dtype = getattr(torch, args.dtype)
bench = Bench(0)
sms = launch.num_sms(0)
rows = []


def kernel(spec: str, M: int, N: int, K: int):
    if spec == "pick":
        return select.pick(M, N, K, args.dtype, sms)
    base, *fields = spec.split("+")
    st = steps.get_step(base)
    if not fields:
        return st
    kv = {k: int(v) for k, v in (f.split("=") for f in fields)}
    return steps.variant(st, base.split(":")[-1] + "".join(f"{k[0]}{v}" for k, v in kv.items()), **kv)


for shape in args.shapes.split(","):
    M, N, K = map(int, shape.split("x"))
    a, b = bench.inputs(M, N, K, dtype)
    names, fns, oks = [], [], []
    for spec in args.kernels.split(","):
        out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
        try:
            st = kernel(spec, M, N, K)
            p = launch.plan(st, a, b, out)
            p(); torch.cuda.synchronize()
            ok = bool(check_product(out, a, b)[0])
        except Exception as e:  # a configuration that cannot run is reported, not fatal
            print(f"  {spec}: {type(e).__name__}: {str(e)[:140]}", flush=True)
            continue
        names.append(spec if spec != "pick" else f"pick={st}"); fns.append(p); oks.append(ok)
    names.append("cublas"); fns.append(lambda a=a, b=b: torch.matmul(a, b.T)); oks.append(True)
    times = bench.time_interleaved(fns, args.reps)
    med = [statistics.median(t) * 1e3 for t in times]
    cub = med[-1]
    print(f"{shape} cublas {cub:.1f}us  " + "  ".join(
        f"{n} {t:.1f} ({cub / t:.3f}){'' if ok else ' WRONG'}" for n, t, ok in zip(names[:-1], med[:-1], oks[:-1])),
        flush=True)
    for n, t, ok in zip(names[:-1], med[:-1], oks[:-1]):
        rows.append(dict(M=M, N=N, K=K, dtype=args.dtype, kernel=n, us=t, cublas_us=cub, ratio_to_cublas=cub / t, ok=ok))
    del a, b
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows), open(args.json, "w"), indent=1)
