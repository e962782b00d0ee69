"""The operand ring's two sides for the small-M family's whole 64 x 64 tiles (perf-notes item 104):
each variant's time at K = 2048, 4096 and 8192 beside cuBLAS, and its pace per k-tile between
2048 and 8192. Needs the probe switches of benchmarks/results/experiments/longk/2026-12-04_longk_sides.patch
applied to src/gemm_ladder/kernels/smallm/smallm_splitk.cu (GL_PROBE_NO_LOADS, GL_PROBE_NO_MMA,
GL_PROBE_KALT, ...); ran at daf5880 with it, in this form for the last two runs of
experiments/longk/2026-12-04_h200_longk_ring_sides_daf5880.txt (the earlier runs listed other
variants of the same switches).
Usage: PYTHONPATH=src python benchmarks/probes/longk/ring_sides.py [MxN ...]"""
import statistics, sys, torch
from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.measure import bench
from gemm_ladder.measure.gpuinfo import Sampler
n64 = smallm.FAMILIES["smallm:n64"]
import dataclasses
class KAlt(smallm.SmallM):
    @property
    def threads(self):
        return 384
kalt = KAlt(**{**{f.name: getattr(n64, f.name) for f in dataclasses.fields(n64)}, "key": "smallm:n64:kalt", "variant": "kalt"})
KA = {"GL_PROBE_KALT": 1}
bn = bench.Bench()
NL = {"GL_PROBE_NO_LOADS": 1}
def dep(f, d):
    if isinstance(f, KAlt):
        return KAlt(**{**{x.name: getattr(f, x.name) for x in dataclasses.fields(f)}, "key": f"{f.key}:d{d}", "variant": f"kaltd{d}", "depth": d})
    return smallm.with_fields(f, f"d{d}", depth=d)
V = []
for d in (12, 13, 14):
    V += [(f"plain d{d}", dep(n64, d), {}), (f"nomma d{d}", dep(n64, d), {"GL_PROBE_NO_MMA": 1}),
          (f"kalt d{d}", dep(kalt, d), KA), (f"kalt_nomma d{d}", dep(kalt, d), {**KA, "GL_PROBE_NO_MMA": 1})]
for mn in sys.argv[1:] or ["256x2048", "128x4096"]:
    M, N = map(int, mn.split("x"))
    res = {}
    for K in (2048, 4096, 8192):
        a, b = bn.inputs(M, N, K, torch.bfloat16)
        ref = a.float() @ b.float().T
        plans = {}
        for v, fam, d in V:
            p = runner.plan_smallm(fam, a, b, splits=1, extra_defines=d or None)
            if "nl" not in v and "nomma" not in v:
                p.out.fill_(float("nan")); p(); torch.cuda.synchronize()
                e = float((p.out.float() - ref).abs().max() / ref.abs().max())
                if not e < 1e-2:
                    print(mn, K, v, "WRONG rel err", e, flush=True)
            plans[v] = p
        names = list(plans) + ["cublas"]
        fns = list(plans.values()) + [lambda: a @ b.T]
        bn.time_interleaved(fns, 3)
        with Sampler(bn.nvml) as smp:
            t = bn.time_interleaved(fns, 30)
        print(mn, K, smp.summary(), flush=True)
        for n, x in zip(names, t):
            res[(n, K)] = 1e3 * statistics.median(x)
    for n in names:
        c2, c4, c8 = res[(n, 2048)], res[(n, 4096)], res[(n, 8192)]
        print(f"{mn} {n:12s} K=2048 {c2:6.2f} us  K=4096 {c4:6.2f} (x cuBLAS {res[('cublas', 4096)] / c4:.3f})  "
              f"K=8192 {c8:6.2f} (x {res[('cublas', 8192)] / c8:.3f})  pace {1e3 * (c8 - c2) / 96:6.1f} ns/k-tile", flush=True)
