"""Experiment: the small-M kernel with two consumer warpgroups on the same 64 rows, alternating
k-tiles (GL_SMALLM_KALT: benchmarks/results/experiments/longk/2026-12-04_longk_kalt.patch
applied to a copy of src/gemm_ladder/kernels in kernels_kalt/ beside this script), against one
consumer (smallm:n64), both on whole tiles (splits=1, one tile per CTA), beside the library's pick and cuBLAS; one process,
interleaved, L2 flushed, medians; outputs poisoned and checked against fp32 first."""
import dataclasses
import json
import os
import statistics
import sys
from pathlib import Path

import torch

from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.library.select import pick
from gemm_ladder.measure import bench, probe
from gemm_ladder.measure.gpuinfo import Sampler

KDIR = Path(__file__).resolve().parent / "kernels_kalt"
n64 = smallm.FAMILIES["smallm:n64"]
kalt = dataclasses.replace(smallm.FAMILIES["smallm:c2n64"], min_m=1, key="smallm:c2n64-kalt")
dtype = getattr(torch, sys.argv[1] if len(sys.argv) > 1 else "bfloat16")
shapes = sys.argv[2].split(",") if len(sys.argv) > 2 else ["64x4096x4096", "16x4096x4096", "64x2048x8192", "64x4096x8192",
                                                          "32x4096x8192", "64x1024x16384", "64x2048x4096"]
bn = bench.Bench()
rows = []
for shape in shapes:
    M, N, K = map(int, shape.split("x"))
    a, b = bn.inputs(M, N, K, dtype)
    ref = a.float() @ b.float().T
    with probe.kernels_from(KDIR, when=lambda defines: defines.get("GL_SMALLM_KALT")):
        kalt_plan = runner.plan_smallm(kalt, a, b, splits=1, extra_defines={"GL_SMALLM_KALT": 1})
    plans = {"n64 whole": runner.plan_smallm(n64, a, b, splits=1), "kalt whole": kalt_plan,
             "pick " + pick(M, N, K, str(dtype).split(".")[-1]): runner.plan(pick(M, N, K, str(dtype).split(".")[-1]), a, b)}
    err = {}
    for name, p in plans.items():
        p.out.fill_(float("nan"))
        p()
        torch.cuda.synchronize()
        err[name] = float((p.out.float() - ref).abs().max() / ref.abs().max())
    fns = list(plans.values()) + [lambda: a @ b.T]
    names = list(plans) + ["cublas"]
    bn.time_interleaved(fns, 3)
    with Sampler(bn.nvml) as smp:
        t = bn.time_interleaved(fns, 40)
    us = {n: 1e3 * statistics.median(x) for n, x in zip(names, t)}
    rows.append({"shape": shape, "dtype": str(dtype), "us": us, "rel_err": err, "gpu": smp.summary()})
    print(f"{shape} {dtype}: " + "  ".join(f"{n} {us[n]:7.2f} us ({us['cublas'] / us[n]:.3f})" for n in names[:-1])
          + f"  cublas {us['cublas']:7.2f} | err " + " ".join(f"{e:.1e}" for e in err.values()), flush=True)
out = os.environ.get("OUT", ".")
json.dump(rows, open(f"{out}/kalt_{str(dtype).split('.')[-1]}.json", "w"), indent=1)
