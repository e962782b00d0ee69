"""The fixed cost of a launch after an L2 flush (perf-notes item 104): an empty kernel
(torch.cuda._sleep(0)) against smallm:n64 with no loads and no MMAs at one k-tile (the probe
switches of benchmarks/results/experiments/longk/2026-12-04_longk_sides.patch), with and without
the programmatic-launch attribute and a 2-stage ring, and real calls beside cuBLAS.
Usage: PYTHONPATH=src python benchmarks/probes/smallsq/fixed_cost.py (with the patch applied)"""
import statistics, torch
from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.measure import bench
F = smallm.FAMILIES
n64, n64s = F["smallm:n64"], F["smallm:n64s"]
nopdl = lambda f, tag: smallm.with_fields(f, tag, chain_pdl=False)
bn = bench.Bench()
NLM = {"GL_PROBE_NO_LOADS": 1, "GL_PROBE_NO_MMA": 1}
rows = []
def case(name, mk):
    rows.append((name, mk))
def mm(M, N, K):
    a, b = bn.inputs(M, N, K, torch.bfloat16)
    return a, b
a1, b1 = mm(64, 64, 64)
case("sleep0", lambda: (lambda: torch.cuda._sleep(0)))
case("cublas 64^3", lambda: (lambda: a1 @ b1.T))
case("n64 empty pdl", lambda: runner.plan_smallm(n64, a1, b1, splits=1, extra_defines=NLM))
case("n64 empty nopdl", lambda: runner.plan_smallm(nopdl(n64, "np"), a1, b1, splits=1, extra_defines=NLM))
case("n64 d2 empty nopdl", lambda: runner.plan_smallm(smallm.with_fields(n64, "d2np", chain_pdl=False, depth=2), a1, b1, splits=1, extra_defines=NLM))
case("n64 real 64^3 pdl", lambda: runner.plan_smallm(n64, a1, b1, splits=1))
case("n64 real 64^3 nopdl", lambda: runner.plan_smallm(nopdl(n64, "np"), a1, b1, splits=1))
a2, b2 = mm(256, 256, 256)
case("cublas 256^3", lambda: (lambda: a2 @ b2.T))
case("n64s 256^3 pdl", lambda: runner.plan_smallm(n64s, a2, b2))
case("n64s 256^3 nopdl", lambda: runner.plan_smallm(nopdl(n64s, "np"), a2, b2))
a3, b3 = mm(256, 2048, 4096)
case("cublas 256x2048x4096", lambda: (lambda: a3 @ b3.T))
case("n64 256x2048x4096 pdl", lambda: runner.plan_smallm(n64, a3, b3, splits=1))
case("n64 256x2048x4096 nopdl", lambda: runner.plan_smallm(nopdl(n64, "np"), a3, b3, splits=1))
names, fns = [], []
for name, mk in rows:
    names.append(name); fns.append(mk())
for f in fns: f()
torch.cuda.synchronize()
bn.time_interleaved(fns, 3)
t = bn.time_interleaved(fns, 80)
for n, x in zip(names, t):
    print(f"{n:28s} median {1e3 * statistics.median(x):7.2f} us  p10 {1e3 * sorted(x)[8]:7.2f}", flush=True)
