"""gemm-ladder: the command line.

  gemm-ladder                  the main job: the ladder benchmark on a GPU; without one,
                               the compile report and the pipeline simulator
  gemm-ladder bench            ladder vs cuBLAS (table + JSON)
  gemm-ladder report           compile every step (ptxas report, SASS instruction classes)
  gemm-ladder check            correctness of steps on the GPU
  gemm-ladder deadlock         the course's what-ifs on the GPU, as errors instead of hangs
  gemm-ladder simulate         the mbarrier pipeline simulator (no GPU)
  gemm-ladder trace            measured in-kernel timeline of a step (GPU)
  gemm-ladder calibrate        the calibrated simulator checked against saved traces (no GPU)
  gemm-ladder bench --suite    shape suite with the selected kernels vs cuBLAS (GPU)
  gemm-ladder explain M N K    which kernel the selection picks, and why
  gemm-ladder plot JSON...     roofline and ladder bar chart from recorded results
"""
from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

from ..choreography.whatifs import WHAT_IFS, gpu_what_ifs
from ..runtime.steps import DEFAULT_BENCH, all_steps, parse_steps
from . import simulate, suite_cli
from .trace import add_calibrate_parser


def _console():
    import os
    from rich.console import Console
    # Tables are wide; when output is captured (CI, device runs) don't squeeze them to 80.
    return Console(width=None if sys.stdout.isatty() else int(os.environ.get("COLUMNS", 180)))


def gpu_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except Exception:
        return False


def needs_gpu(instead: str):
    """A command that runs kernels: without a CUDA GPU it says so, and what to run
    instead, and exits with 2."""
    def wrap(cmd):
        @functools.wraps(cmd)
        def run(args) -> int:
            if not gpu_available():
                _console().print(f"[red]gemm-ladder {args.command} needs a CUDA GPU (sm_90a); none is "
                                 f"available here.[/red] {instead}")
                return 2
            return cmd(args)
        return run
    return wrap


def parse_sizes(spec: str) -> list[tuple[int, int, int]]:
    out = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        dims = [int(x) for x in part.lower().split("x")]
        if len(dims) == 1:
            dims *= 3
        if len(dims) != 3 or min(dims) < 1:
            raise argparse.ArgumentTypeError(f"bad size {part!r}: use N (square) or MxNxK")
        out.append(tuple(dims))
    return out


def _dtype(s: str) -> str:
    m = {"fp16": "float16", "float16": "float16", "half": "float16", "bf16": "bfloat16", "bfloat16": "bfloat16"}
    if s not in m:
        raise argparse.ArgumentTypeError("dtype must be fp16 or bf16")
    return m[s]


def _dtype_or_both(s: str) -> str:
    return "both" if s == "both" else _dtype(s)


def print_ladder(result: dict, console) -> None:
    from rich.table import Table
    g = result.get("gpu", {})
    t = Table(title=f"GEMM ladder vs cuBLAS — {g.get('torch_name', '?')}, commit {result['commit'][:12]}")
    for col, just in (("size", "left"), ("step", "left"), ("forced move", "left"), ("ms", "right"),
                      ("p10-p90", "right"), ("TFLOP/s", "right"), ("x step 1", "right"), ("x cuBLAS", "right"),
                      ("cuBLAS TFLOP/s", "right"), ("SM MHz", "right"), ("W", "right"), ("status", "left")):
        t.add_column(col, justify=just)
    for r in result["rows"]:
        size = f"{r['M']}x{r['N']}x{r['K']}"
        if not r["ok"]:
            t.add_row(size, r["label"], r["forced_move"], *["-"] * 8, f"[red]{r['error'][:60]}")
            continue
        ratio = r["ratio_to_cublas"]
        color = "green" if ratio >= 1.0 else ("yellow" if ratio >= 0.7 else "white")
        t.add_row(size, r["label"], r["forced_move"], f"{r['ms']:.4f}", f"{r['ms_p10']:.3f}-{r['ms_p90']:.3f}",
                  f"{r['tflops']:.0f}", "-" if r["speedup_over_step1"] != r["speedup_over_step1"] else f"{r['speedup_over_step1']:.0f}x",
                  f"[{color}]{ratio:.2f}", f"{r['cublas_tflops']:.0f}", str(r["gpu"].get("sm_clock_mhz", "-")),
                  str(r["gpu"].get("power_w", "-")), "ok" + (f" ({r['reps']} reps)"))
    console.print(t)


def cmd_bench(args) -> int:
    if getattr(args, "suite", None) and getattr(args, "dry_run", False):  # plans only: no GPU
        return suite_cli.cmd_suite(args, _console())
    return _bench_on_gpu(args)


@needs_gpu("Try `gemm-ladder report` (compile report) or `gemm-ladder simulate`.")
def _bench_on_gpu(args) -> int:
    console = _console()
    if getattr(args, "suite", None):
        return suite_cli.cmd_suite(args, console)
    args.dtype = args.dtype or "float16"
    if args.dtype == "both":
        console.print("[red]--dtype both runs with --suite; the ladder takes fp16 or bf16[/red]")
        return 2
    from rich.progress import Progress
    from ..measure import bench
    steps = parse_steps(args.steps)
    with Progress(console=console, transient=True) as progress:
        result = bench.run(steps, args.sizes, dtype=args.dtype, reps=args.reps, budget_s=args.budget,
                           progress=progress)
    result["command"] = " ".join(["gemm-ladder"] + sys.argv[1:])
    print_ladder(result, console)
    path = Path(args.json) if args.json else bench.default_json_path(Path(args.out), result)
    bench.write_json(result, path)
    console.print(f"results: {path}")
    suite_cli.write_images([result], path.with_suffix(""), console)
    return 0 if all(r["ok"] for r in result["rows"]) else 1


def cmd_report(args) -> int:
    from ..measure.report import compile_report, print_report
    console = _console()
    rows = compile_report(parse_steps(args.steps), bf16=args.dtype == "bfloat16")
    print_report(rows, console)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r.get("ok") and not r.get("claims_missing") for r in rows) else 1


@needs_gpu("`gemm-ladder report` compiles every step without one.")
def cmd_check(args) -> int:
    console = _console()
    import torch
    from ..measure.accuracy import check_product
    from ..runtime import launch
    failures = 0
    gen = torch.Generator(device="cuda").manual_seed(1)
    dt = {"float16": torch.float16, "bfloat16": torch.bfloat16}[args.dtype]
    for st in parse_steps(args.steps):
        for (M, N, K) in args.sizes:
            if not st.accepts(M, N, K):
                continue
            a = torch.randn((M, K), device="cuda", generator=gen).to(dt)
            b = torch.randn((N, K), device="cuda", generator=gen).to(dt)
            out = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
            launch.run_step(st, a, b, out, sync=True, debug=args.debug)
            ok, mx, rel, msg = check_product(out, a, b)
            failures += not ok
            console.print(f"step {st.key:5s} {M}x{N}x{K}: {'ok' if ok else '[red]FAIL ' + msg}  rel={rel:.1e}")
    return 1 if failures else 0


@needs_gpu("`gemm-ladder simulate --what-if ...` models the what-ifs without one.")
def cmd_deadlock(args) -> int:
    from rich.markup import escape
    from ..choreography.gpu_whatifs import run_whatif_subprocess
    from ..runtime.steps import get_step
    console = _console()
    w = WHAT_IFS[args.what_if]
    step = args.step or w.default_step
    if problem := w.applies_to(get_step(step)):
        console.print(f"[red]{escape(problem)}[/red] (default step: {w.default_step})")
        return 2
    res = run_whatif_subprocess(step, args.what_if, timeout_s=args.timeout, repeats=args.repeats)
    console.print(escape(res["summary"]))
    # a race the runs did not lose is an honest outcome too, not a failure of the command
    return 0 if res["detected"] or (w.race and res["outcome"] == "finished-correct") else 1


@needs_gpu("`gemm-ladder simulate` draws the modelled timeline.")
def cmd_trace(args) -> int:
    from .trace import trace_command
    return trace_command(args, _console())


def cmd_default(args) -> int:
    console = _console()
    if gpu_available():
        args.steps, args.sizes, args.dtype, args.reps, args.budget = DEFAULT_BENCH, [(4096, 4096, 4096)], "float16", 50, 2.0
        args.json, args.out = None, "benchmarks/results"
        return cmd_bench(args)
    console.print("[yellow]No CUDA GPU here: running what needs none — the compile report of every step "
                  "and the pipeline simulator.[/yellow]")
    from ..measure.report import compile_report, print_report
    rows = compile_report(all_steps())
    print_report(rows, console)
    rc = 0 if all(r.get("ok") and not r.get("claims_missing") for r in rows) else 1
    console.print(simulate.simulate_report(Path(args.out_dir)))
    return rc


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gemm-ladder", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", default="out", help="where the no-GPU main job writes its pages (default: out/)")
    sub = p.add_subparsers(dest="command")

    b = sub.add_parser("bench", help="the ladder benchmark vs cuBLAS")
    b.add_argument("--steps", default=DEFAULT_BENCH, help=f"steps, e.g. '1-7,7:d4' (default {DEFAULT_BENCH})")
    b.add_argument("--sizes", type=parse_sizes, default=[(4096, 4096, 4096)], help="N or MxNxK, comma separated")
    b.add_argument("--dtype", type=_dtype_or_both, default=None, help="fp16 (default), bf16; both (suites' default)")
    b.add_argument("--reps", type=int, default=50, help="timed calls per step (slow steps use fewer)")
    b.add_argument("--budget", type=float, default=2.0, help="seconds of timed calls per step at most")
    b.add_argument("--out", default="benchmarks/results", help="directory for the JSON results")
    b.add_argument("--json", help="exact JSON output path")
    suite_cli.add_bench_flags(b)
    b.set_defaults(fn=cmd_bench)

    r = sub.add_parser("report", help="compile report (no GPU needed)")
    r.add_argument("--steps", default="all")
    r.add_argument("--dtype", type=_dtype, default="float16")
    r.add_argument("--json")
    r.set_defaults(fn=cmd_report)

    c = sub.add_parser("check", help="correctness of steps against an fp32 reference (GPU)")
    c.add_argument("--steps", default="all")
    c.add_argument("--sizes", type=parse_sizes, default=[(1024, 1024, 1024), (4096, 4096, 4096)])
    c.add_argument("--dtype", type=_dtype, default="float16")
    c.add_argument("--debug", action="store_true", help="bounded mbarrier waits: a deadlock becomes an error")
    c.set_defaults(fn=cmd_check)

    d = sub.add_parser("deadlock", help="run a what-if ablation on the GPU with bounded waits")
    d.add_argument("--step", help="default: the what-if's own step")
    d.add_argument("--what-if", default="both-phase-0", choices=gpu_what_ifs())
    d.add_argument("--timeout", type=float, default=60.0, help="seconds before the child process is killed")
    d.add_argument("--repeats", type=int, default=5,
                   help="runs in the child (races are timing-dependent); it stops at the first that fails")
    d.set_defaults(fn=cmd_deadlock)

    t = sub.add_parser("trace", help="measured in-kernel timeline of a step (GPU)")
    t.add_argument("--step", default="7")
    t.add_argument("--size", type=parse_sizes, default=[(4096, 4096, 4096)])
    t.add_argument("--out", default="out")
    t.add_argument("--events", type=int, help="trace capacity per role per CTA (default: enough for the size)")
    t.set_defaults(fn=cmd_trace)

    add_calibrate_parser(sub)
    suite_cli.add_parsers(sub, _dtype)
    simulate.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "fn", None) is None:
        return cmd_default(args)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
