#!/usr/bin/env python3
"""Fuzz gemm_ladder on the GPU: seeded random cases through matmul, matmul(step=...) and
every ladder step's strict run_step, each against an fp64 reference and cuBLAS.

    python scripts/fuzz.py --cases 2000 --json out/fuzz.json      # 2000 cases per dtype
    python scripts/fuzz.py --replay 'seed=... index=... ...'         # one failing case again

Every failure prints a one-line reproducer (GEMM-FUZZ REPRO: ...). The JSON record holds
the cases per dtype, the families covered, the tolerance basis, the worst error ratio to
cuBLAS and every failure. Exit status: 0 when no case failed.
`--device cpu --impl torch` runs the harness against torch itself (a smoke test without a GPU).
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

import fuzz_check as fc  # noqa: E402
import fuzz_support as fs  # noqa: E402


def torch_impl(case, built):
    """The harness's own stand-in for the library: fp32-accumulated torch matmul."""
    a = built.a_logical.reshape(-1, case.K).float()
    r = (a @ built.b_logical.float()).to(built.a_logical.dtype)
    r = r if case.kind == "run_step" else r.reshape(*case.batch, case.rows, case.N)
    return built.out.copy_(r) if built.out is not None else r


def environment(device: str) -> dict:
    import torch
    env = {"torch": torch.__version__, "python": sys.version.split()[0], "device": device,
           "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")}
    try:
        env["commit"] = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                       capture_output=True, text=True, timeout=10).stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        env["commit"] = "unknown"
    if device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(0)
        env["cuda"] = torch.version.cuda
    # matmul picks a kernel per shape among these (library/select.py); each case records its pick
    from gemm_ladder.library import select
    env["matmul_candidates"] = list(select.CANDIDATES)
    return env


def summary_lines(rec: dict) -> list[str]:
    out = [f"fuzz: {rec['cases']} cases {rec['cases_per_dtype']} in {rec['seconds']} s: "
           f"{rec['n_failures']} failures" + (f" ({rec['aborted']})" if rec["aborted"] else "")]
    fam = rec["families"]
    out.append("  targets: " + ", ".join(f"{k} {v}" for k, v in fam.get("target", {}).items())
               + " | steps: " + ", ".join(f"{k}:{v}" for k, v in fam.get("step", {}).items() if k != "-"))
    for key in ("a", "b", "out", "values", "batch", "M-family", "K-family"):
        out.append(f"  {key}: " + ", ".join(f"{k} {v}" for k, v in fam.get(key, {}).items()))
    out.append(f"  tolerance set by: {rec['tolerance_basis']}")
    for dtype, w in rec["worst_ratio_to_cublas"].items():
        out.append(f"  worst error / cuBLAS error, {dtype}: {w['ratio']:.3f} "
                   f"({w['err_max']:.3g} vs {w['cublas_err_max']:.3g}) at {w['case']}")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", type=int, default=2000, help="cases per dtype (default 2000)")
    p.add_argument("--seed", type=int, default=20261129)
    p.add_argument("--dtypes", default="float16,bfloat16")
    p.add_argument("--steps", default="all", help="step keys the step-targeted cases draw from, e.g. 4,5,7:d4")
    p.add_argument("--targets", default="matmul,matmul@step,run_step")
    p.add_argument("--max-dim", type=int, default=fs.MAX_DIM)
    p.add_argument("--work-cap", type=float, default=fs.WORK_CAP, help="largest M*N*K of a case")
    p.add_argument("--max-seconds", type=float, default=None, help="stop drawing cases after this long")
    p.add_argument("--json", help="write the record here")
    p.add_argument("--replay", help="run the one case this line describes (from a GEMM-FUZZ REPRO line)")
    p.add_argument("--device", default="cuda")
    p.add_argument("--impl", choices=("gemm_ladder", "torch"), default="gemm_ladder")
    args = p.parse_args(argv)

    import time

    import torch
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print("fuzz: no CUDA GPU here (use --device cpu --impl torch for a harness smoke test)", file=sys.stderr)
        return 2
    call = fs.invoke if args.impl == "gemm_ladder" else torch_impl

    if args.replay:
        line = args.replay.split("--replay", 1)[-1].strip().strip("'\"")
        case = fs.Case.from_line(line)
        with fc.strict_cublas():
            built = fs.build(case, args.device)
            v = fc.evaluate(case, built, call(case, built))
        print(case.line())
        print(json.dumps(v, indent=1, default=str))
        return 0 if v["ok"] else 1

    dtypes = tuple(d.strip() for d in args.dtypes.split(",") if d.strip())
    keys = fs.step_keys() if args.steps == "all" else [s.strip() for s in args.steps.split(",")]
    targets = tuple(t.strip() for t in args.targets.split(","))
    t_end = time.monotonic() + args.max_seconds if args.max_seconds else None

    def drawn():
        for c in fs.cases(args.seed, args.cases, dtypes, max_dim=args.max_dim, work_cap=int(args.work_cap),
                          targets=targets, steps=keys):
            if t_end is not None and time.monotonic() > t_end:
                print(f"fuzz: --max-seconds {args.max_seconds} reached before case {c.index}", flush=True)
                return
            yield c

    rec = fc.run(drawn(), args.device, call=call, log=lambda s: print(s, flush=True))
    rec.update(seed=args.seed, requested_per_dtype=args.cases, steps=keys, targets=list(targets),
               max_dim=args.max_dim, work_cap=int(args.work_cap), impl=args.impl,
               environment=environment(args.device))
    rec["complete"] = all(rec["cases_per_dtype"].get(d, 0) >= args.cases for d in dtypes) and not rec["aborted"]
    for line in summary_lines(rec):
        print(line)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(rec, indent=1) + "\n")
        print(f"fuzz: record written to {args.json}")
    return 0 if rec["n_failures"] == 0 and rec["complete"] else 1


if __name__ == "__main__":
    sys.exit(main())
