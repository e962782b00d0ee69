"""Rows that are 16-byte but not 32-byte aligned cost step 9 without its cluster (9:c1) 13-23 %
when they are B's, ~1 % when they are A's (probe_padcopy.py). B is two thirds of the operand
traffic from L2; the 2-CTA cluster halves it by multicast. Here: each shape through
gemm_ladder.matmul with the library's pick and with each step forced (9 with its cluster,
9:c1, 9:n192), on the misaligned operands and on the same values in padded (aligned) rows,
interleaved with torch.matmul, L2 flushed, medians.

    PYTHONPATH=src python benchmarks/probes/align/probe_cluster_misaligned.py [--json F] [--nt]

--nt: through matmul_nt with b (N, K) K-major instead (K = 8 mod 16 makes both operands' rows so).
"""
import argparse
import json
import statistics

import torch

import gemm_ladder
from gemm_ladder.measure.bench import Bench

SHAPES = [(3000, 5000, 4000, "b"), (4096, 4104, 4096, "b"), (2048, 2056, 2048, "b"), (8192, 8200, 8192, "b"),
          (4096, 4096, 4104, "a"), (3000, 5000, 4008, "a,b")]
STEPS = [None, "9", "9:c1", "9:n192"]
NT_SHAPES = [(3000, 5000, 4008, "a,b"), (4096, 4096, 4104, "a,b"), (8192, 8192, 8200, "a,b")]


def padded_copy(t):
    rows, cols = t.shape
    buf = torch.empty((rows, cols + (-cols) % 16), dtype=t.dtype, device=t.device)
    buf[:, :cols].copy_(t)
    return buf[:, :cols]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--nt", action="store_true")
    args = ap.parse_args()
    shapes = NT_SHAPES if args.nt else SHAPES
    call = gemm_ladder.matmul_nt if args.nt else gemm_ladder.matmul
    bench = Bench(0)
    rows = []
    for M, N, K, mis in shapes:
        dt = torch.float16
        a = torch.randn(M, K, device="cuda").to(dt)
        b = torch.randn(N, K, device="cuda").to(dt) if args.nt else torch.randn(K, N, device="cuda").to(dt)
        pa, pb = padded_copy(a), padded_copy(b)
        ref = a.float() @ (b.float().T if args.nt else b.float())
        c = torch.empty(M, N, dtype=dt, device="cuda")
        fns, names = [lambda: torch.matmul(a, b.T if args.nt else b, out=c)], ["cublas"]
        for st in STEPS:
            for tag, (x, y) in (("mis", (a, b)), ("pad", (pa, pb))):
                out = call(x, y, step=st)
                err = float((out.float() - ref).abs().max())
                assert err < 0.5, (M, N, K, st, tag, err)
                fns.append(lambda x=x, y=y, st=st: call(x, y, step=st))
                names.append(f"{st or 'pick'}/{tag}")
        times = bench.time_interleaved(fns, args.reps)
        med = {n: statistics.median(t) * 1e3 for n, t in zip(names, times)}
        row = {"M": M, "N": N, "K": K, "misaligned": mis, "us": med,
               "ratio": {n: med["cublas"] / v for n, v in med.items()}}
        rows.append(row)
        print(f"{M}x{N}x{K} [{mis}] cublas {med['cublas']:.1f} us | " +
              "  ".join(f"{n} {v:.1f} ({med['cublas'] / v:.3f})" for n, v in med.items() if n != "cublas"), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
