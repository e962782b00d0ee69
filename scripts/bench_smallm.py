"""Benchmark the small-M split-K family against cuBLAS on decode-like shapes.

    PYTHONPATH=src python scripts/bench_smallm.py [--dtypes float16,bfloat16] [--keys smallm,smallm:n128]
                                                   [--ms 1,16,64,128] [--nk 4096x4096,...] [--pdl both|on|off]
                                                   [--reps 100] [--json PATH]

Method as the ladder benchmark (docs/benchmarking.md): random normal inputs, each output
poisoned (NaN) and checked against an fp32 reference before it is timed; ours and cuBLAS
(torch.matmul(a, b.T)) interleaved call by call through `Bench.time_interleaved`, an L2
flush before each call, CUDA events, medians. Ours is the prepared plan (both launches, no
host work), with and without programmatic launch of the reduction. Achieved bandwidth counts
A + B + C once (the workspace round trip is the kernel's own cost); the HBM copy bandwidth
measured in the same process (a 1 GiB device-to-device copy, read + write) is the yardstick.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
from pathlib import Path

SHAPES_NK = [(4096, 4096), (14336, 4096), (4096, 14336)]


def copy_gbps(bench, nbytes: int = 1 << 30, reps: int = 20) -> float:
    """Device-to-device copy bandwidth (bytes read + written per second), median of reps."""
    import torch
    src = torch.empty(nbytes // 4, dtype=torch.int32, device=f"cuda:{bench.dev}")
    dst = torch.empty_like(src)
    (times,) = bench.time_interleaved([lambda: dst.copy_(src)], reps)
    del src, dst
    return 2 * nbytes / (statistics.median(times) * 1e-3) / 1e9


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dtypes", default="float16,bfloat16")
    ap.add_argument("--keys", default="smallm,smallm:n128")
    ap.add_argument("--ms", default="1,16,64,128")
    ap.add_argument("--nk", default=",".join(f"{n}x{k}" for n, k in SHAPES_NK), help="N x K pairs")
    ap.add_argument("--pdl", choices=("both", "on", "off"), default="both", help="the reduction's programmatic launch")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--json", type=Path, default=None, help="default: benchmarks/results/<date>_<gpu>_smallm_<commit>.json")
    args = ap.parse_args(argv)

    import torch
    from gemm_ladder.cuda import device as cuda_device
    from gemm_ladder.families import smallm
    from gemm_ladder.library import runner
    from gemm_ladder.measure.accuracy import check_output, reference
    from gemm_ladder.measure.bench import Bench, git_commit, percentile

    dev = torch.cuda.current_device()
    runner.check_device(torch.device(f"cuda:{dev}"))
    bench = Bench(dev)
    sms = cuda_device.num_sms(dev)
    gpu = torch.cuda.get_device_name(dev)
    result = {
        "kind": "gemm-ladder smallm bench", "commit": git_commit(),
        "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "host": platform.node(),
        "gpu": {"torch_name": gpu, "sms": sms, **bench.nvml.static()}, "torch": torch.__version__,
        "method": {"reps": args.reps, "interleaved": True, "l2_flush_bytes": bench.flush_buf.numel() * 4,
                   "timer": "CUDA events per call", "inputs": "randn fp32 -> dtype",
                   "ours": "prepared plan: split-K kernel + reduction (pdl on/off)",
                   "bytes": "A + B + C once", "reference": "fp32 torch.matmul (TF32 off)"},
        "copy_gbps": copy_gbps(bench),
        "rows": [],
    }
    print(f"{gpu}, {sms} SMs, HBM copy {result['copy_gbps']:.0f} GB/s (read + write)")
    print(f"{'dtype':9} {'M':>4} {'N':>6} {'K':>6} {'kernel':12} {'pdl':>3} {'ctas':>5} {'ms':>8} "
          f"{'cublas':>8} {'ratio':>6} {'GB/s':>6} {'%copy':>6}")
    for dname in args.dtypes.split(","):
        dtype = getattr(torch, dname)
        for M in map(int, args.ms.split(",")):
            for N, K in [tuple(map(int, s.split("x"))) for s in args.nk.split(",")]:
                a, b = bench.inputs(M, N, K, dtype)
                ref = reference(a, b)
                c_cublas = torch.empty((M, N), dtype=dtype, device=a.device)
                cublas = lambda: torch.matmul(a, b.T, out=c_cublas)  # noqa: E731
                nbytes = (M * K + N * K + M * N) * a.element_size()
                for key in args.keys.split(","):
                    fam = smallm.get_family(key)
                    if not fam.accepts(M, N, K):
                        continue
                    for pdl in {"both": (True, False), "on": (True,), "off": (False,)}[args.pdl]:
                        row = {"M": M, "N": N, "K": K, "dtype": dname, "kernel": key, "pdl": pdl, "bytes": nbytes}
                        try:
                            out = torch.full((M, N), float("nan"), dtype=dtype, device=a.device)
                            p = runner.plan_smallm(fam, a, b, out, pdl=pdl)
                            p()
                            p.synchronize()
                            ok, mx, rel, err = check_output(out, ref, dname)
                            row.update(ok=ok, max_abs_err=mx, rel_err=rel, error=err, planes=p.deal.planes,
                                       units_per_cta=p.deal.units, ctas=p.deal.ctas)
                            if ok:
                                ours, theirs = bench.time_interleaved([p, cublas], args.reps)
                                ms, cms = statistics.median(ours), statistics.median(theirs)
                                row.update(ms=ms, ms_p10=percentile(ours, .1), ms_p90=percentile(ours, .9),
                                           cublas_ms=cms, cublas_ms_p10=percentile(theirs, .1),
                                           cublas_ms_p90=percentile(theirs, .9), ratio_to_cublas=cms / ms,
                                           gbps=nbytes / (ms * 1e-3) / 1e9, cublas_gbps=nbytes / (cms * 1e-3) / 1e9,
                                           tflops=2 * M * N * K / (ms * 1e-3) / 1e12, gpu_sample=bench.nvml.sample())
                                row["frac_of_copy"] = row["gbps"] / result["copy_gbps"]
                        except Exception as e:  # report, don't stop the sweep
                            row.update(ok=False, error=f"{type(e).__name__}: {e}")
                        result["rows"].append(row)
                        if row.get("ms"):
                            print(f"{dname:9} {M:>4} {N:>6} {K:>6} {key:12} {'on' if pdl else 'off':>3} "
                                  f"{row['ctas']:>5} {row['ms']:8.4f} {row['cublas_ms']:8.4f} "
                                  f"{row['ratio_to_cublas']:6.2f} {row['gbps']:6.0f} {100 * row['frac_of_copy']:5.0f}%")
                        else:
                            print(f"{dname:9} {M:>4} {N:>6} {K:>6} {key:12} {'on' if pdl else 'off':>3} FAILED: "
                                  f"{row.get('error', '')[:200]}")
                del a, b, ref, c_cublas
    result["gpu_after"] = bench.nvml.sample()
    path = args.json
    if path is None:
        tag = "h200" if "H200" in gpu else gpu.replace(" ", "_").lower()
        path = Path("benchmarks/results") / f"{result['date'][:10]}_{tag}_smallm_{result['commit'][:7]}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, default=str))
    print(f"wrote {path}")
    failed = [r for r in result["rows"] if not r.get("ok")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
