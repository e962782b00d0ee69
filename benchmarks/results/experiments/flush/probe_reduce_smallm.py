"""Probe: how a split tile's pieces are summed at M <= 16, under both L2 flushes. For each shape
the selection's pick (its deal; planes summed by the second kernel when split) against the
same entry with the pieces summed in a cluster through DSMEM (`cluster_reduce`) and summed in
the kernel by stream-K's fixup (`fixup`), each with its model deal, interleaved with cuBLAS
after bench.py's zeroing flush and after a read flush (L2 left clean). Each output is
poisoned and checked against fp32 first, and repeated bit for bit.

    PYTHONPATH=src python benchmarks/results/experiments/flush/probe_reduce_smallm.py [--json F]
"""
import argparse, json, statistics
import torch
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import launch, select, smallm

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="16x4096x14336,1x4096x14336,16x4096x4096,1x4096x4096,16x4096x11008,16x8192x8192")
ap.add_argument("--reps", type=int, default=40)
ap.add_argument("--dtype", default="float16")
ap.add_argument("--json", default=None)
args = ap.parse_args()
dtype = getattr(torch, args.dtype)
bench = Bench(0)
buf = bench.flush_buf
FLUSHES = {"zero": lambda: buf.zero_(), "read": lambda: buf.sum()}
sms = launch.num_sms(0)
rows = []
for shape in args.shapes.split(","):
    M, N, K = map(int, shape.split("x"))
    a, b = bench.inputs(M, N, K, dtype)
    pick = select.pick(M, N, K, args.dtype, sms)
    fam = smallm.FAMILIES.get(str(pick))
    cands = {f"pick={pick}": pick}
    if fam is not None:
        cands[f"{fam.key}:cr"] = smallm.with_fields(fam, "cr", cluster_reduce=True)
        cands[f"{fam.key}:fixup"] = smallm.with_fields(fam, "fixup", fixup=True)
    names, fns, notes = [], [], []
    for name, st in cands.items():
        out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
        try:
            p = launch.plan(st, a, b, out)
        except Exception as e:  # a configuration that cannot run is reported, not fatal
            print(f"{shape} {name}: {type(e).__name__}: {str(e)[:150]}", flush=True)
            continue
        p(); torch.cuda.synchronize()
        ok = bool(check_product(out, a, b)[0])
        first = out.clone()
        out.fill_(float("nan")); p(); torch.cuda.synchronize()
        same = torch.equal(first, out)
        d = getattr(p, "deal", None)
        names.append(name); fns.append(p)
        notes.append((ok, same, None if d is None else f"u{d.units} c{d.ctas} p{d.planes}{' dsmem' if d.dsmem else ''}"
                      f"{' fixup' if d.fixup else ''}"))
    fns.append(lambda: torch.matmul(a, b.T))
    for fname, fl in FLUSHES.items():
        bench.flush_l2 = fl
        med = [statistics.median(t) * 1e3 for t in bench.time_interleaved(fns, args.reps)]
        cub = med[-1]
        line = [f"{shape} {fname}: cuBLAS {cub:.1f} us"]
        for name, us, (ok, same, deal) in zip(names, med, notes):
            line.append(f"{name} [{deal}] {us:.1f} ({cub / us:.3f}){'' if ok else ' WRONG'}{'' if same else ' MOVING'}")
            rows.append(dict(M=M, N=N, K=K, dtype=args.dtype, kernel=name, flush=fname, us=us, cublas_us=cub,
                             ratio_to_cublas=cub / us, ok=ok, repeat_identical=same, deal=deal))
        print("\n  ".join(line), flush=True)
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows), open(args.json, "w"), indent=1)
