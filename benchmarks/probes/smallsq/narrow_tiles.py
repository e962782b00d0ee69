"""Small squares (perf-notes item 104): the library's pick against smallm:n64s and a 64 x 32 tile
(smallm:n32 with its M limit lifted) whole and split 2 and 4 ways, and cuBLAS; one process,
interleaved, L2 flushed, medians of 60, every output checked on a poisoned buffer.
Usage: PYTHONPATH=src python benchmarks/probes/smallsq/narrow_tiles.py [256,320,...]"""
import statistics, sys, torch
from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.library.select import pick
from gemm_ladder.measure import bench
from gemm_ladder.measure.gpuinfo import Sampler
F = smallm.FAMILIES
n32sq = smallm.with_fields(F["smallm:n32"], "sq", max_m=4096, one_wave_max_kt=0, depth=8, max_kt=16)
n64s = F["smallm:n64s"]
bn = bench.Bench()
for dt in (torch.bfloat16, torch.float16):
    for n in map(int, (sys.argv[1] if len(sys.argv) > 1 else "256,320,384,512,640,768").split(",")):
        M = N = K = n
        a, b = bn.inputs(M, N, K, dt)
        ref = a.float() @ b.float().T
        key = pick(M, N, K, str(dt).split(".")[1])
        cands = [("pick " + key, lambda: runner.plan(key, a, b))]
        for name, fam in (("n64s", n64s), ("n32sq", n32sq)):
            for s in (1, 2, 4):
                if fam.k_tiles(K) >= s and not fam.shape_problems(M, N, K):
                    cands.append((f"{name} s{s}", lambda fam=fam, s=s: runner.plan_smallm(fam, a, b, splits=s)))
        names, fns = [], []
        for nm, mk in cands:
            try:
                p = mk()
            except Exception as e:
                print(n, nm, "skip", str(e)[:120]); continue
            p.out.fill_(float("nan")); p(); torch.cuda.synchronize()
            e = float((p.out.float() - ref).abs().max() / ref.abs().max())
            if not e < 1e-2:
                print(n, nm, "WRONG", e); continue
            names.append(nm); fns.append(p)
        names.append("cublas"); fns.append(lambda: a @ b.T)
        bn.time_interleaved(fns, 3)
        with Sampler(bn.nvml) as smp:
            t = bn.time_interleaved(fns, 60)
        us = [1e3 * statistics.median(x) for x in t]
        print(f"{n}^3 {str(dt)[6:]}: " + "  ".join(f"{nm} {u:.2f} ({us[-1] / u:.3f})" for nm, u in zip(names, us)) +
              f" | {smp.summary().get('sm_clock_mhz')} MHz", flush=True)
