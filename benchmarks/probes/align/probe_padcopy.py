"""Operands whose rows are 16-byte but not 32-byte aligned (K or N = 8 mod 16): read in place
(today), or copied first into rows padded to a multiple of 16 elements (a plain strided copy,
not a transpose) and then read aligned. Times, interleaved with torch.matmul on the same
operands, L2 flushed, medians: the library's call as it is, the pad copy alone, and the
copy + the library's call on the padded view. Also the copy's rate (read + written bytes).

    PYTHONPATH=src python benchmarks/probes/align/probe_padcopy.py [--json F]
"""
import argparse
import json
import statistics

import torch

import gemm_ladder
from gemm_ladder.measure.bench import Bench

# (M, N, K, which operand is misaligned in the call matmul(a, b) with b row-major (K, N))
SHAPES = [(3000, 5000, 4000, "b"), (4096, 4104, 4096, "b"), (2048, 2056, 2048, "b"),
          (1000, 1000, 1000, "a,b"), (4096, 4096, 4104, "a"), (8192, 8200, 8192, "b"),
          (512, 11000, 4096, "b"), (16, 4104, 4096, "b"), (128, 4104, 4096, "b")]


def padded(t):
    rows, cols = t.shape
    buf = torch.empty((rows, cols + (-cols) % 16), dtype=t.dtype, device=t.device)
    view = buf[:, :cols]
    return buf, view


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    bench = Bench(0)
    rows = []
    for M, N, K, mis in SHAPES:
        for dt in (torch.float16,):
            a = torch.randn(M, K, device="cuda").to(dt)
            b = torch.randn(K, N, device="cuda").to(dt)
            ref = a.float() @ b.float()
            _, pa = padded(a)
            _, pb = padded(b)
            pa.copy_(a)
            pb.copy_(b)
            out = gemm_ladder.matmul(a, b)
            out2 = gemm_ladder.matmul(pa, pb)
            err = max(float((out.float() - ref).abs().max()), float((out2.float() - ref).abs().max()))
            c = torch.empty(M, N, dtype=dt, device="cuda")

            def lib():
                gemm_ladder.matmul(a, b)

            def copy_only():
                pa.copy_(a) if "a" in mis else None
                pb.copy_(b) if "b" in mis else None

            def copy_lib():
                copy_only()
                gemm_ladder.matmul(pa if "a" in mis else a, pb if "b" in mis else b)

            def padded_lib():  # the kernel alone on aligned rows
                gemm_ladder.matmul(pa if "a" in mis else a, pb if "b" in mis else b)

            def cublas():
                torch.matmul(a, b, out=c)

            names = ["cublas", "lib", "copy", "copy+lib", "padded-lib"]
            times = bench.time_interleaved([cublas, lib, copy_only, copy_lib, padded_lib], args.reps)
            med = {n: statistics.median(t) for n, t in zip(names, times)}
            copied = (M * K if "a" in mis else 0) + (K * N if "b" in mis else 0)
            tbs = 2 * 2 * copied / (med["copy"] * 1e-3) / 1e12
            row = {"M": M, "N": N, "K": K, "misaligned": mis, "dtype": str(dt), "max_abs_err": err,
                   **{f"{n}_us": med[n] * 1e3 for n in names}, "copy_tbs": tbs,
                   "ratio_lib": med["cublas"] / med["lib"], "ratio_copy_lib": med["cublas"] / med["copy+lib"]}
            rows.append(row)
            print(f"{M}x{N}x{K} [{mis}] cublas {row['cublas_us']:.1f}  lib {row['lib_us']:.1f} ({row['ratio_lib']:.3f})  "
                  f"copy {row['copy_us']:.1f} ({tbs:.2f} TB/s)  copy+lib {row['copy+lib_us']:.1f} "
                  f"({row['ratio_copy_lib']:.3f})  padded-lib {row['padded-lib_us']:.1f}  err {err:.3g}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
