"""Probe: the long-K narrow rows (M <= 256, N <= 2048, K >= 4096) where the small-M family
trails cuBLAS. Every entry x K split, each on a poisoned output checked against fp32, then
timed interleaved with cuBLAS (L2 flushed, medians), plus cuBLAS's kernel names.

    PYTHONPATH=src python benchmarks/probes/longk/probe_longk.py --json out.json

The record is the deals' data for refitting the deal rule's price of a second pass
(smallm_deal.REDUCE_OVERHEAD_BYTES; rank_deals.py reads it).
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))

ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default="128x1024x8192,256x2048x4096,128x512x16384,256x512x4096,"
                "256x1024x4096,128x1024x16384,128x1024x4096,256x1024x8192,64x2048x16384,16x2048x8192")
ap.add_argument("--entries", default="n64,n128,c2n64,c2n64d,c2n128,c2n128d")
ap.add_argument("--splits", default="0,2,3,4,6,8,16", help="0: the entry's own deal")
ap.add_argument("--dtype", default="float16")
ap.add_argument("--reps", type=int, default=40)
ap.add_argument("--json")
args = ap.parse_args()
try:
    import torch
except ImportError:
    torch = None
if torch is None or not torch.cuda.is_available():
    print("probe_longk: no CUDA GPU here", file=sys.stderr)
    sys.exit(2)
from cublas_kernels import kernels_of  # noqa: E402
from gemm_ladder.families import smallm  # noqa: E402
from gemm_ladder.library import select  # noqa: E402
from gemm_ladder.library.runner import plan, plan_smallm  # noqa: E402
from gemm_ladder.measure.accuracy import check_product  # noqa: E402
from gemm_ladder.measure.bench import Bench, git_commit  # noqa: E402

dtype = getattr(torch, args.dtype)
bench = Bench(0)
sms = torch.cuda.get_device_properties(0).multi_processor_count
rows = []
for spec in args.shapes.split(","):
    M, N, K = map(int, spec.split("x"))
    a, b = bench.inputs(M, N, K, dtype)
    names, fns, info = [], [], []

    def add(name, mk, extra):
        out = torch.full((M, N), float("nan"), dtype=dtype, device="cuda")
        try:
            p = mk(out)
            p()
            torch.cuda.synchronize()
            ok, err, rel, msg = check_product(out, a, b)
        except Exception as e:  # a configuration that cannot run is reported, not fatal
            print(f"  {name}: {type(e).__name__}: {str(e)[:140]}", flush=True)
            return
        if not ok:
            print(f"  {name}: WRONG {msg}", flush=True)
            return
        d = getattr(p, "deal", None)
        names.append(name)
        fns.append(p)
        info.append(dict(extra, ctas=getattr(d, "ctas", None), units=getattr(d, "units", None),
                         dsmem=getattr(d, "dsmem", None), planes=getattr(d, "planes_bound", None)))

    pick = select.pick(M, N, K, args.dtype, sms) if hasattr(select, "pick") else None
    if pick:
        add(f"pick={pick}", lambda o: plan(pick, a, b, o), {"entry": "pick", "split": 0})
    for e in args.entries.split(","):
        fam = smallm.with_fields(smallm.FAMILIES[f"smallm:{e}"], f"smallm:{e}", max_m=1 << 30)
        seen = set()
        for s in map(int, args.splits.split(",")):
            d = fam.plan_deal(M, N, K, sms, splits=s or None)
            key = (d.units, d.dsmem, d.split)
            if key in seen:
                continue
            seen.add(key)
            add(f"{e}/s{s}", lambda o, fam=fam, s=s: plan_smallm(fam, a, b, o, splits=s or None),
                {"entry": e, "split": s})
    ref = torch.matmul
    bt = b.T
    out_c = torch.empty((M, N), dtype=dtype, device="cuda")
    fns.append(lambda: torch.matmul(a, bt, out=out_c))
    ms = bench.time_interleaved(fns, args.reps)
    cub = statistics.median(ms[-1])
    cub_names = kernels_of(lambda: torch.matmul(a, bt))
    print(f"{M}x{N}x{K} cuBLAS {cub*1e3:.2f} us  {' | '.join(cub_names)}", flush=True)
    for n, t, i in sorted(zip(names, ms, info), key=lambda x: statistics.median(x[1])):
        med = statistics.median(t)
        print(f"  {n:24} {med*1e3:7.2f} us  x{cub/med:.3f}  ctas {i['ctas']} units {i['units']} "
              f"dsmem {i['dsmem']} planes {i['planes']}", flush=True)
        rows.append(dict(i, M=M, N=N, K=K, name=n, us=med * 1e3, cublas_us=cub * 1e3,
                         ratio_to_cublas=cub / med, cublas_kernels=cub_names))
if args.json:
    Path(args.json).write_text(json.dumps({"commit": git_commit(), "dtype": args.dtype, "reps": args.reps,
                                           "gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1))
