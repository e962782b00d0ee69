"""gemm-ladder: the command line (`gemm-ladder --help` lists the commands)."""
from __future__ import annotations

import argparse
import json
import os
import sys

from ..choreography.gpu_whatifs import attention_gpu_what_ifs
from ..choreography.whatifs import WHAT_IFS, gpu_what_ifs
from ..families.keys import UnknownStep, as_step, parse_step_spec
from ..families.ladder import DEFAULT_BENCH, STEPS, VARIANTS, all_steps
from ..families.ladder_step import Step
from . import attention_cli, doors, simulate, suite_cli
from .console import make_console as _console
from .doors import CliError, OneLineParser, dtype as _dtype, parse_sizes
from .calibrate_cli import add_calibrate_parser

DESCRIPTION = """\
A GEMM ladder for Hopper: CUDA kernels from a naive GEMM to warp-specialized TMA + wgmma,
compiled at run time with NVRTC. With no command, runs the main job: the ladder benchmark
on a Hopper GPU; without one, the compile report of every step and the pipeline simulator.
Files go under --out-dir (default out/)."""


def _span(values) -> str:
    v = sorted(set(values))
    return f"{v[0]}-{v[-1]}" if len(v) > 1 else str(v[0])


def print_ladder(result: dict, console) -> None:
    """The ladder table, narrow enough for a 100-column terminal: the size goes in the title
    when there is one; clocks, power and repetitions in a line below (all are in the JSON)."""
    from rich import box
    from rich.markup import escape
    from rich.table import Table
    g, rows = result.get("gpu", {}), result["rows"]
    sizes = sorted({(r["M"], r["N"], r["K"]) for r in rows})
    title = f"GEMM ladder vs cuBLAS — {g.get('torch_name', '?')}, commit {result['commit'][:12]}"
    if len(sizes) == 1:
        title += ", " + "x".join(map(str, sizes[0]))
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, collapse_padding=True)
    cols = (["size"] if len(sizes) > 1 else []) + ["step", "ms", "p10-p90", "TFLOP/s", "x step 1", "x cuBLAS",
                                                   "cuBLAS TFLOP/s"]
    for col in cols:
        t.add_column(col, justify="left" if col in ("size", "step") else "right", no_wrap=True)
    for r in rows:
        head = [f"{r['M']}x{r['N']}x{r['K']}", r["step"]] if len(sizes) > 1 else [r["label"]]
        if not r["ok"]:
            t.add_row(*head, "[red]failed", *["-"] * 5)
            continue
        ratio, up = r["ratio_to_cublas"], r["speedup_over_step1"]
        color = "green" if ratio >= 1.0 else ("yellow" if ratio >= 0.7 else "white")
        t.add_row(*head, f"{r['ms']:.4f}", f"{r['ms_p10']:.3f}-{r['ms_p90']:.3f}", f"{r['tflops']:.0f}",
                  "-" if up != up else f"{up:.0f}x", f"[{color}]{ratio:.2f}", f"{r['cublas_tflops']:.0f}")
    console.print(t)
    ok = [r for r in rows if r["ok"]]
    mhz = [r["gpu"]["sm_clock_mhz"] for r in ok if r["gpu"].get("sm_clock_mhz") is not None]
    watts = [r["gpu"]["power_w"] for r in ok if r["gpu"].get("power_w") is not None]
    if ok:
        console.print((f"SM clock {_span(mhz)} MHz, " if mhz else "") + (f"power {_span(watts)} W, " if watts else "")
                      + f"{_span(r['reps'] for r in ok)} timed calls per step", markup=False, highlight=False)
    for r in rows:
        if not r["ok"]:
            console.print(f"[red]step {r['step']} at {r['M']}x{r['N']}x{r['K']}: {escape(r['error'])}[/red]",
                          highlight=False)


def _check_api_flags(args) -> None:
    """bench --api measures the library's own kernel choice: flags of the other benchmarks
    contradict it."""
    if args.suite:
        raise CliError("--api and --suite are two benchmarks: give one of them")
    if args.dry_run:
        raise CliError("--dry-run plans a suite (--suite); --api needs the GPU")
    if args.steps is not None:
        raise CliError("--steps picks ladder steps; --api measures the library's own choice per shape")


def cmd_bench(args) -> int:
    if attention_cli.check_flags(args):  # its own benchmark, given alone
        return attention_cli.cmd(args, _console())
    if getattr(args, "call", "kernel") != "kernel":
        if not args.suite:
            raise CliError("--call times a shape suite through the library: give --suite NAME")
        if args.autotune:
            raise CliError("--autotune times candidate kernels; --call times the library's own choice")
    if getattr(args, "fp8", False):
        if args.api or args.suite or args.library or args.steps is not None or getattr(args, "decode_chain", False):
            raise CliError("--fp8 is its own benchmark (the fp8 family against torch._scaled_mm): give it alone "
                           "(with --sizes, --reps, --budget, --json, --out-dir)")
        doors.require_hopper("`gemm-ladder report` and `gemm-ladder simulate` need none")
        from ..measure.bench_fp8 import cli_main
        return cli_main(args, _console(), doors.out_dir(args.out_dir),
                        doors.out_file(args.json) if args.json else None)
    if getattr(args, "decode_chain", False):
        if args.api or args.suite or args.library or args.steps is not None or args.sizes:
            raise CliError("--decode-chain is its own benchmark (one layer's decode GEMMs in a CUDA graph against "
                           "cuBLAS's): give it alone (with --dtype, --reps, --json, --out-dir)")
        doors.require_hopper("`gemm-ladder report` and `gemm-ladder simulate` need none")
        from ..measure.decode_chain import cli_main as chain_main
        return chain_main(args, _console(), doors.out_dir(args.out_dir),
                          doors.out_file(args.json) if args.json else None)
    if args.library and (args.api or args.suite):
        raise CliError("--library ends the ladder with the library's kernel; --api and --suite measure the library "
                       "already")
    if args.api:
        _check_api_flags(args)
    elif args.dtype == "both" and not args.suite:
        raise CliError("--dtype both runs with --suite, --api or --attention; the ladder takes fp16 or bf16")
    if args.suite and args.dry_run:  # plans only: no GPU, no files
        return suite_cli.cmd_suite(args, _console())
    doors.require_hopper("`gemm-ladder report`, `gemm-ladder simulate` and `bench --suite ... --dry-run` need none")
    json_path = doors.out_file(args.json) if args.json else None
    out = doors.out_dir(args.out_dir)
    console = _console()
    if args.suite:
        args.out = str(out)
        return suite_cli.cmd_suite(args, console)
    if args.api:  # the library path (measure/bench_api.py)
        from ..measure.bench_api import cli_main
        return cli_main(args, console, out, json_path)
    from ..measure import bench
    args.dtype = args.dtype or "float16"
    library_row = args.library or args.steps is None  # the default ladder ends at the library's kernel
    args.steps = args.steps if args.steps is not None else parse_step_spec(DEFAULT_BENCH)
    args.sizes = args.sizes or [(4096, 4096, 4096)]
    doors.say_compiling(args.steps, args.dtype == "bfloat16")
    with doors.progress() as progress:
        result = bench.run(args.steps, args.sizes, dtype=args.dtype, reps=args.reps, budget_s=args.budget,
                           progress=progress, library_row=library_row)
    result["command"] = " ".join(["gemm-ladder"] + sys.argv[1:])
    print_ladder(result, console)
    path = bench.write_json(result, json_path or bench.default_json_path(out, result))
    console.print(f"results: {path}")
    suite_cli.write_images([result], path.with_suffix(""), console)
    return 0 if all(r["ok"] for r in result["rows"]) else 1


def _write_report(args, bf16: bool, steps) -> int:
    from ..measure.report import compile_report, print_report
    json_path = doors.out_file(args.json) if getattr(args, "json", None) is not None else None
    doors.say_compiling([st for st in steps if isinstance(st, Step)], bf16)
    with doors.progress() as progress:
        rows = compile_report(steps, bf16=bf16, progress=progress)
    print_report(rows, _console())
    if json_path:
        doors.write_text(json_path, json.dumps(rows, indent=1))
    return 0 if all(r.get("ok") and not r.get("claims_missing") for r in rows) else 1


def cmd_report(args) -> int:
    return _write_report(args, args.dtype == "bfloat16", args.steps)


def cmd_check(args) -> int:
    doors.require_hopper("`gemm-ladder report` compiles every step without one")
    import torch
    from ..library import runner
    from ..measure.accuracy import check_product
    console = _console()
    failures = 0
    gen = torch.Generator(device="cuda").manual_seed(1)
    dt = {"float16": torch.float16, "bfloat16": torch.bfloat16}[args.dtype]
    for st in args.steps:
        for (M, N, K) in args.sizes:
            if not st.accepts(M, N, K):
                continue
            a = torch.randn((M, K), device="cuda", generator=gen).to(dt)
            b = torch.randn((N, K), device="cuda", generator=gen).to(dt)
            out = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
            runner.run_step(st, a, b, out, sync=True, debug=args.debug)
            ok, mx, rel, msg = check_product(out, a, b)
            failures += not ok
            console.print(f"step {st.key:5s} {M}x{N}x{K}: {'ok' if ok else '[red]FAIL ' + msg}  rel={rel:.1e}")
    return 1 if failures else 0


def cmd_deadlock(args) -> int:
    doors.require_hopper("`gemm-ladder simulate --what-if ...` models the same what-ifs without one")
    from rich.markup import escape
    from ..choreography.gpu_whatifs import run_whatif_subprocess, what_if_entry
    w = what_if_entry(args.what_if)
    if args.what_if not in WHAT_IFS:  # an attention what-if: on its own step (A2-A5)
        if args.step is not None:
            raise CliError(f"{args.what_if} runs on the attention step {w.default_step}; --step takes GEMM steps")
        key = w.default_step
    else:
        step = args.step or as_step(w.default_step)
        if problem := w.applies_to(step):
            raise CliError(f"{problem} (its own step: {w.default_step})")
        key = step.key
    with doors.status(f"step {key}, what-if {args.what_if}: a debug build in a child process"):
        res = run_whatif_subprocess(key, args.what_if, timeout_s=args.timeout, repeats=args.repeats)
    _console().print(escape(res["summary"]))
    # a race the runs did not lose is an honest outcome too, not a failure of the command
    return 0 if res["detected"] or (w.race and res["outcome"] == "finished-correct") else 1


def cmd_trace(args) -> int:
    from .trace import attention_trace_command, check_attention_args, trace_command
    check_attention_args(args)
    doors.require_hopper("`gemm-ladder simulate` draws the modelled timeline without one")
    args.out = str(doors.out_dir(args.out_dir))
    if args.attention is not None:
        return attention_trace_command(args, _console())
    args.step = (args.step or doors.traced_step("7")).key
    args.size = args.size or [(4096, 4096, 4096)]
    return trace_command(args, _console())


def cmd_default(args) -> int:
    if doors.hopper_problem() is None:
        args.steps, args.sizes, args.dtype = parse_step_spec(DEFAULT_BENCH), [(4096, 4096, 4096)], "float16"
        args.reps, args.budget, args.json, args.suite, args.dry_run, args.api = 50, 2.0, None, None, False, False
        return cmd_bench(args)
    out = doors.out_dir(args.out_dir)
    console = _console()
    console.print("[yellow]No Hopper GPU here: running what needs none — the compile report of every step "
                  "and the pipeline simulator.[/yellow]")
    from ..families import attention, fp8
    # and step 11 with the fp8 family, and every attention build (A2-A5 and the library's, per head dim)
    rc = _write_report(args, False, all_steps() + fp8.all_entries() + attention.all_builds())
    with doors.status("simulating the pipelines") as update:
        text = simulate.simulate_report(out, tick=update)
    console.print(text, markup=False, highlight=False)
    # and the attention steps' schedule (A2-A5 at head dim 128: softmax lanes beside the tensor core)
    rc_attention = simulate.run_attention(argparse.Namespace(attention="all", out_dir=str(out), json=False))
    return rc or rc_attention


_HELP_STEPS = (f"steps: keys {min(STEPS)}..{max(STEPS)}, variants ({', '.join(VARIANTS)}, or N:d<depth>g<group>w<CTAs "
               "per SM>l<wgmma groups in flight>, b0/b1 for step 9's borrowed stage; named variants take them too, "
               "e.g. 9:n232b0), ranges such as 1-7, 'all' (comma separated)")
_HELP_SIZES = "N (square) or MxNxK, comma separated"
_HELP_DTYPE = "fp16 or bf16"


def _out_dir_parent() -> argparse.ArgumentParser:
    """--out-dir on a command (also accepted before it); --out is its older spelling."""
    p = OneLineParser(add_help=False)
    p.add_argument("--out-dir", "--out", dest="out_dir", default=argparse.SUPPRESS, metavar="DIR",
                   help=f"folder for the files this command writes (default: {doors.DEFAULT_OUT_DIR}/)")
    return p


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="gemm-ladder", description=DESCRIPTION,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out-dir", default=doors.DEFAULT_OUT_DIR, metavar="DIR",
                   help=f"folder for every file written (default: {doors.DEFAULT_OUT_DIR}/)")
    sub = p.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    outp = [_out_dir_parent()]
    seconds = doors.number(float, 0, 3600, "s", low_open=True)

    b = sub.add_parser("bench", parents=outp, help="the ladder (or with --suite a shape suite) vs cuBLAS: table, JSON, figures (GPU)")
    b.add_argument("--steps", type=doors.step_list, help=f"{_HELP_STEPS} (default {DEFAULT_BENCH})")
    b.add_argument("--library", action="store_true", help="end the ladder with the library's kernel for each size "
                   "(on by default without --steps)")
    b.add_argument("--sizes", type=parse_sizes, help=f"{_HELP_SIZES} (default 4096; with --api 4096,8192)")
    b.add_argument("--dtype", type=doors.dtype_or_both, help=f"{_HELP_DTYPE} (default fp16); with --suite, --api or "
                   "--attention also both (their default)")
    b.add_argument("--api", action="store_true", help="the library as a caller sees it: host us per call, "
                   "matmul/matmul_nt vs cuBLAS beside the kernel (JSON <date>_<gpu>_api_<commit>.json)")
    b.add_argument("--fp8", action="store_true", help="the fp8 family (scaled_mm, step 11) against torch._scaled_mm: "
                   "squares and LLM projection shapes, every scale mode (JSON <date>_h200_fp8_<commit>.json)")
    b.add_argument("--decode-chain", action="store_true", dest="decode_chain",
                   help="one transformer layer's decode GEMMs (M = 1, 8, 16) in one CUDA graph against cuBLAS's "
                        "(default bf16; JSON <date>_h200_decode_chain_<commit>.json)")
    attention_cli.add_flags(b)
    b.add_argument("--reps", type=doors.number(int, 1, 100_000), default=50, help="timed calls per step at most (slow steps use fewer)")
    b.add_argument("--budget", type=seconds, default=2.0, help="seconds of timed calls per step at most")
    b.add_argument("--json", metavar="FILE", help="exact JSON output path (default: a dated name under --out-dir)")
    suite_cli.add_bench_flags(b)
    b.set_defaults(fn=cmd_bench)

    r = sub.add_parser("report", help="compile every step: registers, shared memory, spills, SASS classes (no GPU)")
    r.add_argument("--steps", type=doors.step_list, default="all", help=f"{_HELP_STEPS} (default all)")
    r.add_argument("--dtype", type=_dtype, default="float16", help=f"{_HELP_DTYPE}: which build to report (default fp16)")
    r.add_argument("--json", metavar="FILE", help="also write the report rows as JSON to FILE")
    r.set_defaults(fn=cmd_report)

    c = sub.add_parser("check", help="correctness of steps against an fp32 reference (GPU)")
    c.add_argument("--steps", type=doors.step_list, default="all", help=f"{_HELP_STEPS} (default all)")
    c.add_argument("--sizes", type=parse_sizes, default=[(1024, 1024, 1024), (4096, 4096, 4096)],
                   help=f"{_HELP_SIZES} (default 1024,4096); sizes a step cannot take are skipped")
    c.add_argument("--dtype", type=_dtype, default="float16", help=f"{_HELP_DTYPE} (default fp16)")
    c.add_argument("--debug", action="store_true", help="bounded mbarrier waits: a deadlock becomes an error")
    c.set_defaults(fn=cmd_check)

    d = sub.add_parser("deadlock", help="run one of the course's what-ifs on the GPU with bounded waits")
    d.add_argument("--step", type=doors.traced_step,
                   help="a step with mbarrier rings (default: the what-if's own step)")
    d.add_argument("--what-if", default="both-phase-0", choices=gpu_what_ifs() + attention_gpu_what_ifs(),
                   help="the ablation to compile in (default both-phase-0)")
    d.add_argument("--timeout", type=seconds, default=60.0, help="seconds before the child process is killed")
    d.add_argument("--repeats", type=doors.number(int, 1, 100), default=5,
                   help="runs in the child, 1..100 (races are timing-dependent); it stops at the first that "
                        "does not finish correct (default 5)")
    d.set_defaults(fn=cmd_deadlock)

    t = sub.add_parser("trace", parents=outp, help="measured in-kernel timeline of a step beside the model (GPU)")
    t.add_argument("--step", type=doors.traced_step, help="a step with mbarrier rings, e.g. 7:d4 (default 7)")
    t.add_argument("--size", type=parse_sizes, help="N or MxNxK, comma separated: each traced in turn (default 4096; "
                   "files of another size than 4096³ name it)")
    t.add_argument("--events", type=doors.number(int, 1, 1 << 20),
                   help="trace capacity per role per CTA (default: enough for the size)")
    t.add_argument("--reps", type=doors.number(int, 1, 1000), default=20,
                   help="timed calls of the traced and the untraced build each, in turns (default 20; medians)")
    t.add_argument("--ctas", type=doors.number(int, 1, 1 << 20),
                   help="decode and save the first N CTAs only (default all; large sizes decode slowly)")
    t.add_argument("--no-page", action="store_true", dest="no_page",
                   help="write the records and the summary JSON only (no page, no Perfetto trace)")
    ta = t.add_argument_group("attention (a fused attention step on about one wave of tiles)")
    ta.add_argument("--attention", choices=("A2", "A3", "A4", "A5"),
                    help="trace an attention step instead of a GEMM step, beside the attention model")
    ta.add_argument("--head-dim", type=int, choices=(64, 128, 256), dest="head_dim", help="head dim (default 128)")
    ta.add_argument("--seq-len", type=doors.number(int, 1, 1 << 17), dest="seq_len",
                    help="query and key length, 1..131072 (default 4096)")
    ta.add_argument("--causal", action="store_true", help="the causal mask (the model draws a full tile)")
    t.set_defaults(fn=cmd_trace)

    add_calibrate_parser(sub)
    suite_cli.add_parsers(sub, _dtype)
    simulate.add_parser(sub, parents=outp)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    prog = "gemm-ladder" + (f" {args.command}" if getattr(args, "command", None) else "")
    try:
        if getattr(args, "fn", None) is None:
            return cmd_default(args)
        return args.fn(args)
    except (CliError, UnknownStep) as e:
        return doors.fail(prog, str(e), getattr(e, "code", 2))
    except OSError as e:
        if e.filename is None:
            raise
        # a file the command reads or writes that the checks before the work did not catch
        return doors.fail(prog, f"{e.filename}: {e.strerror or e}")
    except KeyboardInterrupt:
        return doors.fail(prog, "interrupted", 130)
    except BrokenPipeError:  # the reader went away (e.g. `| head`): nothing left to say
        sys.stdout = open(os.devnull, "w")
        return 141


if __name__ == "__main__":
    sys.exit(main())
