"""Probe: two switches of the small-M family at the selection's pick, against the pick as built:
  :ef     B's lines (the weights, streamed once) read with L2 evict-first priority
          (`b_evict_first`, GL_B_EVICT_FIRST). The zeroing flush leaves L2 full of dirty lines;
          each one the stream evicts costs a DRAM write, and evict-first should make the stream
          replace its own lines instead.
  +early  the first stages loaded by thread 0 right after the barrier init (GL_EARLY_LOADS).
Interleaved with cuBLAS after the zeroing flush and a read flush; every output poisoned, checked
against fp32, repeated bit for bit (debug builds of the switched kernels first, at edge shapes).

    PYTHONPATH=src python benchmarks/probes/early/probe_smallm_switches.py [--json F]
        [--shapes 16x8192x8192,...] [--dtypes float16,bfloat16] [--reps 40] [--only edge|time|both]
"""
import argparse, json
import torch
from gemm_ladder.measure import probe
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import launch, select, smallm, steps

M16 = [f"{m}x{n}x{k}" for m in (1, 16) for n, k in ((4096, 4096), (11008, 4096), (4096, 11008), (14336, 4096),
                                                      (4096, 14336), (8192, 8192), (28672, 8192), (8192, 28672))]
ap = argparse.ArgumentParser()
ap.add_argument("--shapes", default=",".join(M16 + ["64x4096x4096", "128x4096x4096", "128x8192x8192", "512x512x512",
                                                    "1000x1000x1000"]))
ap.add_argument("--edge", default="1x264x200,16x520x72,100x1000x1000,128x4104x520,7x4096x4104")
ap.add_argument("--reps", type=int, default=40)
ap.add_argument("--dtypes", default="float16,bfloat16")
ap.add_argument("--only", choices=("edge", "time", "both"), default="both")
ap.add_argument("--json", default=None)
args = ap.parse_args()
EARLY = {"GL_EARLY_LOADS": 1}
bench = Bench(0)
sms = launch.num_sms(0)
make = lambda c, a, b, out: launch.plan(c[0], a, b, out, extra_defines=c[1], debug=len(c) > 2)


def candidates(M, N, K, dt, debug=False):
    pick = select.pick(M, N, K, dt, sms)
    entry = steps.get_step(pick)
    c = {f"pick={pick}": (entry, {})}
    if isinstance(entry, smallm.SmallM):
        ef = smallm.with_fields(entry, "ef", b_evict_first=True)
        c.update({f"{pick}:ef": (ef, {}), f"{pick}+early": (entry, EARLY), f"{pick}:ef+early": (ef, EARLY)})
        if debug:
            c.update({f"{pick}:ef+early:debug": (ef, EARLY, True)})
    return c


rows, edge_rows = [], []
for dt in (args.dtypes.split(",") if args.only != "time" else []):
    dtype = getattr(torch, dt)
    for shape in args.edge.split(","):
        M, N, K = map(int, shape.split("x"))
        a, b = bench.inputs(M, N, K, dtype)
        for name, p, ok, same, deal in probe.checked_plans(candidates(M, N, K, dt, True), a, b, make,
                                                           f"edge {shape} {dt}", repeats=20):
            edge_rows.append(dict(M=M, N=N, K=K, dtype=dt, kernel=name, ok=ok, repeat_identical=same, deal=deal))
            if not (ok and same):
                print(f"edge {shape} {dt} {name}: ok={ok} repeat_identical={same}", flush=True)
    print(f"edge {dt}: {sum(r['ok'] and r['repeat_identical'] for r in edge_rows if r['dtype'] == dt)} of "
          f"{sum(r['dtype'] == dt for r in edge_rows)} candidate-shapes correct and bit-identical", flush=True)
for dt in (args.dtypes.split(",") if args.only != "edge" else []):
    dtype = getattr(torch, dt)
    for shape in args.shapes.split(","):
        M, N, K = map(int, shape.split("x"))
        a, b = bench.inputs(M, N, K, dtype)
        checked = probe.checked_plans(candidates(M, N, K, dt), a, b, make, f"{shape} {dt}", repeats=3)
        rows += probe.time_against_cublas(bench, checked, a, b, args.reps, f"{shape} {dt}",
                                          dict(M=M, N=N, K=K, dtype=dt))
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows, edge=edge_rows), open(args.json, "w"), indent=1)
