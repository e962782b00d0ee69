"""Probe: do rows that are not whole 32-byte sectors (K a multiple of 8, not 16) cost less with
another TMA L2 promotion? Each kernel is planned three times, its tensor maps encoded with L2
promotion 256B (the default), 128B and none, and all are timed interleaved with cuBLAS (L2
flushed, medians), outputs checked first.

    PYTHONPATH=src python benchmarks/probes/align/probe_promotion.py

It ran once (2026-11-29, record beside it) at 075bb7c with a temporary module switch,
`driver.L2_PROMOTION`, read by `TensorMap`; the switch was replaced by the rule it supported
(128 B promotion for rows that are not whole 32-byte sectors), so this script no longer changes
what it encodes: kept as the record of what ran.
"""
import statistics
import torch
from gemm_ladder.measure.bench import Bench
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.runtime import driver, launch, smallm

PROMOS = {"256B": "CU_TENSOR_MAP_L2_PROMOTION_L2_256B", "128B": "CU_TENSOR_MAP_L2_PROMOTION_L2_128B",
          "none": "CU_TENSOR_MAP_L2_PROMOTION_NONE"}
CASES = [((1000, 1000, 1000), ("8:c1", "smallm:n128")), ((1008, 1008, 1008), ("8:c1", "smallm:n128")),
         ((256, 4104, 4104), ("8:c1", "smallm:n128")), ((256, 4096, 4096), ("8:c1", "smallm:n128")),
         ((3000, 5000, 4008), ("9:n192",)), ((3000, 5000, 4000), ("9:n192",)),
         ((2000, 2000, 4000), ("9:c1",)), ((16, 4096, 4104), ("smallm:n128",))]
bench = Bench(0)
for (M, N, K), keys in CASES:
    a, b = bench.inputs(M, N, K, torch.float16)
    names, fns = [], []
    for key in keys:
        for pname, promo in PROMOS.items():
            driver.L2_PROMOTION = promo
            out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
            st = smallm.with_fields(smallm.FAMILIES[key], "anym", max_m=1 << 30) if key.startswith("smallm") else key
            p = launch.plan(st, a, b, out)
            p()
            torch.cuda.synchronize()
            ok = check_product(out, a, b)[0]
            names.append(f"{key}/{pname}{'' if ok else ' WRONG'}")
            fns.append(p)
    driver.L2_PROMOTION = PROMOS["256B"]
    names.append("cublas")
    fns.append(lambda: torch.matmul(a, b.T))
    t = [statistics.median(x) * 1e3 for x in bench.time_interleaved(fns, 40)]
    cub = t[-1]
    print(f"{M}x{N}x{K} cublas {cub:.1f}us  " + "  ".join(f"{n} {x:.1f} ({cub / x:.2f})" for n, x in zip(names, t)),
          flush=True)
