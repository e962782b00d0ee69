#!/usr/bin/env python3
"""Soak gemm_ladder.matmul: mixed random shapes, layouts and dtypes for a fixed time, each
result compared with cuBLAS on the same inputs, host and device memory sampled throughout.

    python scripts/soak.py --minutes 5 --json out/soak.json

Per call: gemm_ladder.matmul and torch.matmul (cuBLAS) on the same fuzz case (fuzz_support:
shapes around tile edges, every layout, batch dims, out=), then max |ours - cuBLAS| against
twice the worst-case bound of one fp32-accumulated, once-rounded result (each side is
within one bound of the exact product; exact-integer inputs must match exactly) and the
two fp64 checksums. Memory: host RSS, torch's allocated and reserved bytes and the device's
used bytes (cudaMemGetInfo), at a baseline taken after a warm-up, every --sample-every
seconds, and at the end after the last call's tensors are freed.
Exit status 0: no mismatch, no error, and no growth of host RSS or torch-allocated memory
beyond the limits printed with the result.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

import fuzz_check as fc  # noqa: E402
import fuzz_support as fs  # noqa: E402

RSS_GROWTH_LIMIT_MB = 256  # the Python heap and torch's host-side caches settle after warm-up
ALLOCATED_GROWTH_LIMIT_MB = 16  # every tensor of every call is freed: nothing should remain


def memory() -> dict:
    import torch
    rss_kb = 0
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss_kb = int(line.split()[1])
    except OSError:
        pass
    m = {"host_rss_mb": round(rss_kb / 1024, 1), "torch_allocated_mb": 0.0, "torch_reserved_mb": 0.0,
         "device_used_mb": 0.0}
    if torch.cuda.is_available():
        free, total = torch.cuda.mem_get_info()
        mb = 1 << 20
        m.update(torch_allocated_mb=round(torch.cuda.memory_allocated() / mb, 1),
                 torch_reserved_mb=round(torch.cuda.memory_reserved() / mb, 1),
                 device_used_mb=round((total - free) / mb, 1))
    return m


def one_call(case: fs.Case, device: str = "cuda", call=None) -> dict:
    """Run one case through matmul (or `call`) and cuBLAS; the comparison figures."""
    import torch
    built = fs.build(case, device)
    res = call(case, built) if call is not None else fs.invoke(case, built)
    cub = torch.matmul(built.a_logical, built.b_logical)
    r, c = res.double().reshape(-1, case.N), cub.double().reshape(-1, case.N)
    a2 = built.a_logical.reshape(-1, case.K).double()
    # An output that overflows the 16-bit range is ±inf in both: the same infinity is a match
    # (seen: K=1, -1474 x 47.8 = -70476). Ours non-finite anywhere else is a failure.
    same_inf = torch.isinf(r) & (r == c)
    r, c = torch.where(same_inf, 0.0, r), torch.where(same_inf, 0.0, c)
    figures = torch.stack([
        (r - c).abs().max(), (~torch.isfinite(r)).sum().double(), c.abs().max(), r.sum(), c.sum(),
        a2.norm(dim=1).max() * built.b_logical.double().norm(dim=0).max(), c.abs().sum(),
    ]).tolist()
    diff, nonfinite, absmax, sum_ours, sum_cub, scale, abssum = figures
    bound, _ = fc.tolerance(case.dtype, case.K, absmax, scale, math.inf)
    tol = 0.0 if case.exact else 2 * bound
    return {"ok": nonfinite == 0 and diff <= tol, "diff": diff, "tol": tol, "nonfinite": int(nonfinite),
            "checksum_rel_diff": abs(sum_ours - sum_cub) / max(abssum, 1e-30)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--minutes", type=float, default=5.0)
    p.add_argument("--seed", type=int, default=777)
    p.add_argument("--dtypes", default="float16,bfloat16")
    p.add_argument("--max-dim", type=int, default=4096)
    p.add_argument("--work-cap", type=float, default=1 << 31)
    p.add_argument("--warmup-seconds", type=float, default=None, help="default: min(30 s, 10%% of the run)")
    p.add_argument("--sample-every", type=float, default=15.0)
    p.add_argument("--json")
    p.add_argument("--device", default="cuda", help="cpu: a smoke test of this script (with --impl torch)")
    p.add_argument("--impl", choices=("gemm_ladder", "torch"), default="gemm_ladder")
    p.add_argument("--rss-growth-limit-mb", type=float, default=RSS_GROWTH_LIMIT_MB,
                   help="host RSS growth allowed after the warm-up (default %(default)s); torch's own CPU "
                        "fp16/bf16 matmul keeps ~0.25 MB per distinct shape, so a CPU smoke run needs more")
    args = p.parse_args(argv)

    import torch
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("soak: no CUDA GPU", file=sys.stderr)
        return 2
    call = None
    if args.impl == "torch":
        from fuzz import torch_impl as call
    sync = torch.cuda.synchronize if args.device.startswith("cuda") else (lambda: None)
    dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    duration = args.minutes * 60
    warmup = args.warmup_seconds if args.warmup_seconds is not None else min(30.0, duration / 10)
    calls, mismatches, errors = {d: 0 for d in dtypes}, [], []
    worst = {"diff_over_tol": 0.0, "checksum_rel_diff": 0.0}
    shapes, samples = set(), []
    baseline = None
    t0 = time.monotonic()
    next_sample = t0 + warmup
    i = 0
    with fc.strict_cublas():
        while time.monotonic() - t0 < duration:
            dtype = dtypes[i % len(dtypes)]
            case = fs.generate(args.seed, i, dtype, max_dim=args.max_dim, work_cap=int(args.work_cap),
                               targets=("matmul",))
            i += 1
            try:
                v = one_call(case, args.device, call)
            except Exception as e:  # counted and reported; a lost context ends the run below
                errors.append(f"{case.repro()}  # {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
                print(errors[-1], flush=True)
                if len(errors) >= 20:
                    break
                continue
            calls[dtype] += 1
            shapes.add((case.M, case.N, case.K))
            if v["tol"] > 0:
                worst["diff_over_tol"] = max(worst["diff_over_tol"], v["diff"] / v["tol"])
            worst["checksum_rel_diff"] = max(worst["checksum_rel_diff"], v["checksum_rel_diff"])
            if not v["ok"]:
                mismatches.append(f"{case.repro()}  # max|ours-cuBLAS|={v['diff']:.3g} tol={v['tol']:.3g} "
                                  f"non-finite={v['nonfinite']}")
                print(mismatches[-1], flush=True)
            now = time.monotonic()
            if now >= next_sample:
                gc.collect()
                sync()
                m = memory()
                m.update(t_s=round(now - t0, 1), calls=sum(calls.values()))
                samples.append(m)
                baseline = baseline or m
                next_sample = now + args.sample_every
                print(f"soak: {m['t_s']:>6.0f} s  {m['calls']} calls  {len(mismatches)} mismatches  "
                      f"rss {m['host_rss_mb']} MB  torch alloc {m['torch_allocated_mb']} MB  "
                      f"reserved {m['torch_reserved_mb']} MB  device used {m['device_used_mb']} MB", flush=True)
    gc.collect()
    sync()
    end = memory()
    baseline = baseline or end
    growth = {k: round(end[k] - baseline[k], 1) for k in end}
    grew = growth["host_rss_mb"] > args.rss_growth_limit_mb or growth["torch_allocated_mb"] > ALLOCATED_GROWTH_LIMIT_MB
    ok = not mismatches and not errors and not grew
    rec = {"minutes": args.minutes, "seconds": round(time.monotonic() - t0, 1), "seed": args.seed,
           "calls": sum(calls.values()), "calls_per_dtype": calls, "distinct_shapes": len(shapes),
           "mismatches": len(mismatches), "mismatch_examples": mismatches[:20], "errors": len(errors),
           "error_examples": errors[:20], "worst": worst,
           "memory": {"baseline": baseline, "end": end, "growth": growth, "samples": samples,
                      "limits_mb": {"host_rss": args.rss_growth_limit_mb, "torch_allocated": ALLOCATED_GROWTH_LIMIT_MB}},
           "max_dim": args.max_dim, "work_cap": int(args.work_cap), "torch": torch.__version__,
           "device": torch.cuda.get_device_name(0) if args.device.startswith("cuda") else args.device,
           "impl": args.impl, "ok": ok}
    print(f"soak: {rec['calls']} calls {calls} over {rec['seconds']} s, {len(shapes)} distinct shapes: "
          f"{len(mismatches)} mismatches, {len(errors)} errors; worst |ours-cuBLAS|/tol {worst['diff_over_tol']:.3f}, "
          f"worst checksum rel. diff {worst['checksum_rel_diff']:.2e}")
    print(f"soak: memory baseline {baseline} -> end {end}; growth {growth} "
          f"(limits: rss {args.rss_growth_limit_mb:g} MB, torch allocated {ALLOCATED_GROWTH_LIMIT_MB} MB) -> "
          f"{'ok' if ok else 'NOT OK'}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rec, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
