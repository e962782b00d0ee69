"""Probe: which kernel for M = 128 .. 512 (the suite's worst shapes). Each candidate on poisoned
outputs checked against fp32, then timed interleaved with cuBLAS (L2 flushed, medians).
Candidates: the current pick, ladder steps (--ladder), and small-M family entries (--fams) with
their M limit lifted, each with the deal its model picks and with K split --splits ways.

    PYTHONPATH=src python benchmarks/probes/midm/probe_midm.py [--ms 128,256,512] [--dtype float16]
"""
import argparse, json, statistics, sys
import torch
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.runtime import launch, select, smallm

ap = argparse.ArgumentParser()
ap.add_argument("--ms", default="128,256,512")
ap.add_argument("--nk", default="4096x4096,11008x4096,4096x11008,4096x14336,28672x8192,14336x4096")
ap.add_argument("--dtype", default="float16")
ap.add_argument("--reps", type=int, default=60)
ap.add_argument("--json", default=None)
ap.add_argument("--fams", default="c2,c2n128,c2n64")
ap.add_argument("--splits", default="1,2,3,4")
ap.add_argument("--ladder", default="7:d4,9:c1")
ap.add_argument("--skwaves", default="132,128", help="grid sizes of the fixup deals")
ap.add_argument("--sk", default="", help="stream-K fixup entries (c2,c2n128,...): one wave of 132 and of 128 CTAs")
ap.add_argument("--adhoc", default="", help="ad-hoc family entries, e.g. n64:bn=64:depth=12 (from 'smallm', "
                "integer fields), probed like --fams")
ap.add_argument("--models", default="", help="deal-model constants to compare, e.g. old:0.85:1.0,new:0.65:2.0 "
                "(name:HBM_SATURATION:WORKSPACE_COST); each adds <fam>:<name> with the deal picked under them")
args = ap.parse_args()
dtype = getattr(torch, args.dtype)
F = smallm.FAMILIES
BIG = 1 << 30
fams = {k: smallm.with_fields(F[k] if k in F else F[f"smallm:{k}"], "anym", max_m=BIG)
        for k in filter(None, args.fams.split(","))}
for spec in filter(None, args.adhoc.split(",")):
    name, *kv = spec.split(":")
    fams[name] = smallm.with_fields(F["smallm"], name, max_m=BIG, **{k: int(v) for k, v in (x.split("=") for x in kv)})
SPLITS = [int(x) for x in args.splits.split(",")] if args.splits else []
bench = Bench(0)
sms = launch.num_sms(0)
rows = []
for M in map(int, args.ms.split(",")):
    for nk in args.nk.split(","):
        N, K = map(int, nk.split("x"))
        a, b = bench.inputs(M, N, K, dtype)
        pick = select.pick(M, N, K, args.dtype, sms)
        names, fns, outs, oks, info = [], [], [], [], []
        def add(name, mk):
            out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
            try:
                p = mk(out)
                p(); torch.cuda.synchronize()
                ok = check_product(out, a, b)[0]
            except Exception as e:  # a configuration that cannot run is reported, not fatal
                print(f"  {name}: {type(e).__name__}: {str(e)[:120]}", flush=True)
                return
            names.append(name); fns.append(p); oks.append(ok)
            info.append(getattr(p, "deal", None))
        add(f"pick={pick}", lambda o: launch.plan(pick, a, b, o))
        for lk in filter(None, args.ladder.split(",")):
            add(lk, lambda o, lk=lk: launch.plan(lk, a, b, o))
        for fk, fam in fams.items():
            if M < fam.min_m:
                continue
            add(f"{fk}:model", lambda o, fam=fam: fam.plan(a, b, o))
            for spec in filter(None, args.models.split(",")):
                name, sat, wsc = spec.split(":")
                def planned(o, fam=fam, sat=float(sat), wsc=float(wsc)):
                    keep = smallm.HBM_SATURATION, smallm.WORKSPACE_COST
                    smallm.HBM_SATURATION, smallm.WORKSPACE_COST = sat, wsc
                    try:
                        return fam.plan(a, b, o)
                    finally:
                        smallm.HBM_SATURATION, smallm.WORKSPACE_COST = keep
                add(f"{fk}:{name}", planned)
            for sp in SPLITS:
                add(f"{fk}:s{sp}", lambda o, fam=fam, sp=sp: fam.plan(a, b, o, splits=sp))
        for fk in filter(None, args.sk.split(",")):
            fam = smallm.with_fields(F[fk] if fk in F else F[f"smallm:{fk}"], "sk", fixup=True, max_m=BIG)
            if M < fam.min_m:
                continue
            for g in [int(x) for x in args.skwaves.split(",")]:
                add(f"{fk}:sk{g}", lambda o, fam=fam, g=g: fam.plan(a, b, o, wave=g))
            add(f"{fk}:skmodel", lambda o, fam=fam: fam.plan(a, b, o))
        names.append("cublas"); fns.append(lambda: torch.matmul(a, b.T)); oks.append(True); info.append(None)
        times = bench.time_interleaved(fns, args.reps)
        med = [statistics.median(t) * 1e3 for t in times]
        cub = med[-1]
        line = [f"{M}x{N}x{K} cublas {cub:.1f}us"]
        for nm, t, ok, d in zip(names[:-1], med[:-1], oks[:-1], info[:-1]):
            ds = f"[u{d.units} c{d.ctas} p{d.planes}]" if d is not None else ""
            line.append(f"{nm}{ds} {t:.1f} ({cub / t:.2f}){'' if ok else ' WRONG'}")
            rows.append(dict(M=M, N=N, K=K, dtype=args.dtype, kernel=nm, us=t, cublas_us=cub, ratio_to_cublas=cub / t,
                             ok=bool(ok), deal=None if d is None else dict(units=d.units, ctas=d.ctas, planes=d.planes)))
        print("\n  ".join(line), flush=True)
        del a, b
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows), open(args.json, "w"), indent=1)
