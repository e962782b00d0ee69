"""Probe: the first stages of each CTA's first tile loaded before the cluster barrier
(-DGL_EARLY_LOADS=1, gl_warpspec.cuh) against the same step without, steps 8 and 9 with and
without their cluster. Each candidate: first a debug build (bounded waits) at edge shapes, then
outputs poisoned, checked against fp32, repeated bit for bit; timed interleaved with cuBLAS after
bench.py's zeroing flush, `--passes` times over the shapes.

    PYTHONPATH=src python benchmarks/probes/early/probe_early_loads.py [--json F]
        [--steps 8,8:c1,9,9:c1] [--shapes 2048x2048x2048,...] [--dtypes float16,bfloat16]
"""
import argparse, json
import torch
from gemm_ladder.measure import probe
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import launch

ap = argparse.ArgumentParser()
ap.add_argument("--steps", default="8,8:c1,9,9:c1")
ap.add_argument("--shapes", default="2048x2048x2048,4096x4096x4096,8192x8192x8192,3072x3072x3072,512x11008x4096")
ap.add_argument("--edge", default="136x264x200,392x520x72,4000x3000x72,1000x1000x1000,2056x264x136,264x4104x520")
ap.add_argument("--reps", type=int, default=60)
ap.add_argument("--passes", type=int, default=2)
ap.add_argument("--dtypes", default="float16,bfloat16")
ap.add_argument("--flushes", default="zero", help="zero, read or both (probe.flushes)")
ap.add_argument("--switch", default="GL_EARLY_LOADS", help="the define the +early candidates set to 1")
ap.add_argument("--only", choices=("edge", "time", "both"), default="both")
ap.add_argument("--json", default=None)
args = ap.parse_args()
EARLY = {args.switch: 1}
bench = Bench(0)
make = lambda c, a, b, out: launch.plan(c[0], a, b, out, extra_defines=c[1], debug=len(c) > 2)
rows, edge_rows = [], []
cands = {}
for k in args.steps.split(","):
    cands[k] = (k, {})
    cands[f"{k}+early"] = (k, EARLY)
for dt in (args.dtypes.split(",") if args.only != "time" else []):
    dtype = getattr(torch, dt)
    # correctness first: the debug build (bounded waits) and the plain build at edge shapes
    for shape in args.edge.split(","):
        M, N, K = map(int, shape.split("x"))
        a, b = bench.inputs(M, N, K, dtype)
        dbg = {f"{n}:debug": (c[0], c[1], True) for n, c in cands.items() if c[1]}
        for name, p, ok, same, _ in probe.checked_plans({**cands, **dbg}, a, b, make, f"edge {shape} {dt}", repeats=20):
            edge_rows.append(dict(M=M, N=N, K=K, dtype=dt, kernel=name, ok=ok, repeat_identical=same))
            if not (ok and same):
                print(f"edge {shape} {dt} {name}: ok={ok} repeat_identical={same}", flush=True)
    print(f"edge {dt}: {sum(r['ok'] and r['repeat_identical'] for r in edge_rows if r['dtype'] == dt)} of "
          f"{sum(r['dtype'] == dt for r in edge_rows)} candidate-shapes correct and bit-identical", flush=True)
for pas in range(args.passes if args.only != "edge" else 0):
    for dt in args.dtypes.split(","):
        dtype = getattr(torch, dt)
        for shape in args.shapes.split(","):
            M, N, K = map(int, shape.split("x"))
            a, b = bench.inputs(M, N, K, dtype)
            checked = probe.checked_plans(cands, a, b, make, f"{shape} {dt}", repeats=3)
            rows += probe.time_against_cublas(bench, checked, a, b, args.reps, f"pass {pas} {shape} {dt}",
                                              dict(M=M, N=N, K=K, dtype=dt, pass_=pas),
                                              flush_fns={f: fn for f, fn in probe.flushes(bench).items()
                                                         if args.flushes in (f, "both")})
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows, edge=edge_rows), open(args.json, "w"), indent=1)
