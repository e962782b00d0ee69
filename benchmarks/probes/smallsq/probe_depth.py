"""Probe: the small squares (one short K: 4-16 k-tiles) on the small-M family's entries at
shallower rings than their defaults (ad-hoc `with_fields` depths), and the selection's pick,
interleaved with cuBLAS (bench.py: L2 flushed, medians); each output poisoned, checked
against fp32 and repeated bit for bit. Question: does the ring's shared-memory size (12 stages
of 16 KB for smallm:n64) cost launch or fill time where only a few k-tiles exist?

    PYTHONPATH=src python benchmarks/probes/smallsq/probe_depth.py [--json out.json]
"""
import argparse, json, statistics
import torch
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.runtime import select
from gemm_ladder.runtime.launch import plan
from gemm_ladder.runtime.smallm import FAMILIES, with_fields
from gemm_ladder.runtime.steps import get_step

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="256x256x256,512x512x512,768x768x768,1024x1024x1024")
ap.add_argument("--dtypes", default="float16")
ap.add_argument("--reps", type=int, default=60)
ap.add_argument("--json", default=None)
args = ap.parse_args()
CANDIDATES = [FAMILIES["smallm:n64"], with_fields(FAMILIES["smallm:n64"], "d4", depth=4),
              with_fields(FAMILIES["smallm:n64"], "d6", depth=6), FAMILIES["smallm:n128"],
              with_fields(FAMILIES["smallm:n128"], "d4", depth=4)]
bench = Bench(0)
rows = []
for dt in args.dtypes.split(","):
    dtype = getattr(torch, dt)
    for spec in args.shapes.split(","):
        M, N, K = map(int, spec.split("x"))
        a, b = bench.inputs(M, N, K, dtype)
        pick = select.pick(M, N, K, dt)
        cands = [get_step(pick)] + [c for c in CANDIDATES if c.key != pick]
        names, fns = [], []
        for fam in cands:
            out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
            try:
                p = plan(fam, a, b, out)
                p(); torch.cuda.synchronize()
                ok = bool(check_product(out, a, b)[0])
                first = out.clone(); out.fill_(float("nan")); p(); torch.cuda.synchronize()
                ok &= torch.equal(first, out)
            except Exception as e:  # an entry that cannot take the shape is reported, not fatal
                print(f"  {spec} {fam.key}: {type(e).__name__}: {str(e)[:100]}", flush=True)
                continue
            names.append((fam.key, ok, fam.dynamic_smem)); fns.append(p)
        c = torch.empty((M, N), dtype=dtype, device="cuda")
        fns.append(lambda: torch.matmul(a, b.T, out=c))
        med = [statistics.median(t) * 1e3 for t in bench.time_interleaved(fns, args.reps)]
        line = [f"{spec} {dt} (pick {pick}) cuBLAS {med[-1]:.2f} us:"]
        for (key, ok, smem), t in zip(names, med):
            rows.append(dict(M=M, N=N, K=K, dtype=dt, kernel=key, pick=pick, smem=smem, us=t, cublas_us=med[-1],
                             ratio_to_cublas=med[-1] / t, ok=ok))
            line.append(f"{key} [{smem // 1024} KB] {t:.2f} ({med[-1] / t:.3f}){'' if ok else ' WRONG'}")
        print("  ".join(line), flush=True)
if args.json:
    json.dump(dict(commit=git_commit(), gpu=torch.cuda.get_device_name(), rows=rows), open(args.json, "w"), indent=1)
