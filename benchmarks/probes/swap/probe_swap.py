"""Probe: the small-M family's swapped build (GL_SWAP_AB: the weights as wgmma's A, m64, and
M <= 8 or 16 activation rows as its B, n8 / n16; C stored transposed; whole tiles only)
against the selection's pick, at M <= 16 shapes whose weights give at least 128 tiles of 64
rows. Each output poisoned and checked against fp32 first, and repeated bit for bit; then
timed interleaved with cuBLAS after bench.py's zeroing flush and after a read flush.

    PYTHONPATH=src python benchmarks/probes/swap/probe_swap.py [--json F]

Runs on tree c9a2dda (the `swap_ab` field and GL_SWAP_AB were reverted after this probe:
docs/perf-notes.md, item 70).
"""
import argparse, json, statistics
import torch
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import launch, select, smallm

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="16x8192x8192,1x8192x8192,16x8192x28672,1x8192x28672,16x28672x8192,16x14336x4096")
ap.add_argument("--variants", default="16:16,16:20,8:16", help="BN:depth of the swapped build")
ap.add_argument("--reps", type=int, default=30)
ap.add_argument("--dtypes", default="float16")
ap.add_argument("--json", default=None)
args = ap.parse_args()
bench = Bench(0)
buf = bench.flush_buf
FLUSHES = {"zero": lambda: buf.zero_(), "read": lambda: buf.sum()}
sms = launch.num_sms(0)
base = smallm.FAMILIES["smallm"]
swaps = [smallm.with_fields(base, f"swap{bn}d{d}", swap_ab=True, bn=int(bn), depth=int(d), b_mn_major=False)
         for bn, d in (v.split(":") for v in args.variants.split(","))]
rows = []
for dt in args.dtypes.split(","):
    dtype = getattr(torch, dt)
    for shape in args.shapes.split(","):
        M, N, K = map(int, shape.split("x"))
        a, b = bench.inputs(M, N, K, dtype)
        pick = select.pick(M, N, K, dt, sms)
        cands = {f"pick={pick}": pick, **{f.key: f for f in swaps if f.accepts(M, N, K)}}
        names, fns, notes = [], [], []
        for name, st in cands.items():
            out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
            try:
                p = launch.plan(st, a, b, out)
                p(); torch.cuda.synchronize()
            except Exception as e:  # reported, not fatal
                print(f"{shape} {name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
                continue
            ok = bool(check_product(out, a, b)[0])
            first = out.clone()
            out.fill_(float("nan")); p(); torch.cuda.synchronize()
            same = torch.equal(first, out)
            d = getattr(p, "deal", None)
            names.append(name); fns.append(p)
            notes.append((ok, same, None if d is None else f"c{d.ctas} u{d.units} p{d.planes}{' dsmem' if d.dsmem else ''}"))
        fns.append(lambda: torch.matmul(a, b.T))
        for fname, fl in FLUSHES.items():
            bench.flush_l2 = fl
            med = [statistics.median(t) * 1e3 for t in bench.time_interleaved(fns, args.reps)]
            cub = med[-1]
            line = [f"{shape} {dt} {fname}: cuBLAS {cub:.1f} us"]
            for name, us, (ok, same, deal) in zip(names, med, notes):
                line.append(f"{name} [{deal}] {us:.1f} ({cub / us:.3f}){'' if ok else ' WRONG'}{'' if same else ' MOVING'}")
                rows.append(dict(M=M, N=N, K=K, dtype=dt, kernel=name, flush=fname, us=us, cublas_us=cub,
                                 ratio_to_cublas=cub / us, ok=ok, repeat_identical=same, deal=deal))
            print("\n  ".join(line), flush=True)
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows), open(args.json, "w"), indent=1)
