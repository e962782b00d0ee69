"""CLI for the suite, the selection and the figures:

  gemm-ladder bench --suite NAME [--dtype both] [--dry-run]   suite vs cuBLAS (GPU)
  gemm-ladder explain M N K [--dtype] [--sms]                  the selection's candidates and pick
  gemm-ladder plot RESULT.json [...] [--out STEM]              roofline + bar chart from results
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from . import doors, explain_call


def dtypes_of(arg: str | None) -> list[str]:
    if arg in (None, "both"):
        return ["float16", "bfloat16"]
    return [arg]


def write_images(results: list[dict], stem: Path, console) -> list[Path]:
    """Figures beside a JSON; a missing matplotlib is a note, not a failure of the run."""
    try:
        from ..measure import plots
        paths = plots.write_images(results, stem)
    except ImportError as e:
        console.print(f"[yellow]no figures ({e}); later: gemm-ladder plot <json>[/yellow]")
        return []
    for p in paths:
        console.print(f"figure: {p}")
    return paths


def _fmt(v, spec: str) -> str:
    return "-" if not isinstance(v, (int, float)) or not math.isfinite(v) else format(v, spec)


def print_suite(result: dict, console) -> None:
    from rich.table import Table
    g = result.get("gpu", {})
    mem = result.get("memory", {})
    for dtype, s in result.get("summary", {}).items():
        t = Table(title=f"suite {result['suite']} {dtype} vs cuBLAS — {g.get('torch_name', '?')}, "
                        f"commit {result['commit'][:12]}")
        for col in ("shape", "what", "kernel", "ms", "cuBLAS ms", "x cuBLAS", "TFLOP/s", "GB/s",
                    "% copy BW", "status"):
            t.add_column(col, justify="left" if col in ("shape", "what", "kernel", "status") else "right")
        for r in (r for r in result["rows"] if r["dtype"] == dtype):
            shape = f"{r['M']}x{r['N']}x{r['K']}"
            kern = r["kernel"] + (" (padded)" if r.get("padded") else "") + \
                (f" (copies {r['staged']})" if r.get("staged") else "")
            if r.get("heuristic") and r["heuristic"] != r["kernel"]:
                kern += f" (model: {r['heuristic']})"
            if not r["ok"]:
                t.add_row(shape, r["label"], kern, *["-"] * 6, f"[red]{r['error'][:70]}")
                continue
            ratio = r["ratio_to_cublas"]
            color = "green" if ratio >= 1.0 else ("yellow" if ratio >= 0.9 else "red")
            t.add_row(shape, r["label"], kern, _fmt(r["ms"], ".4f"), _fmt(r["cublas_ms"], ".4f"),
                      f"[{color}]{ratio:.2f}", _fmt(r["tflops"], ".0f"), _fmt(r["gbs"], ".0f"),
                      _fmt(100 * r.get("hbm_copy_fraction", math.nan), ".0f"), f"ok ({r['reps']} reps)")
        console.print(t)
        w = s.get("worst", {})
        console.print(f"{dtype}: {s['ok']}/{s['shapes']} correct; geomean x cuBLAS {_fmt(s['geomean_ratio'], '.3f')}; "
                      f"worst {w.get('shape', '-')} ({w.get('label', '')}, {w.get('kernel', '')}) "
                      f"{_fmt(w.get('ratio_to_cublas'), '.3f')}; by group "
                      + ", ".join(f"{k} {_fmt(v, '.3f')}" for k, v in s.get("groups", {}).items()))
    console.print(f"copy bandwidth: HBM {_fmt(mem.get('hbm_copy_gbs'), '.0f')} GB/s, "
                  f"L2 {_fmt(mem.get('l2_copy_gbs'), '.0f')} GB/s (read + written)")


def cmd_suite(args, console) -> int:
    from ..measure import suite, suites
    if args.suite not in suites.suite_names():
        raise doors.CliError(f"unknown suite {args.suite!r}; known: {', '.join(suites.suite_names())}")
    dts = dtypes_of(args.dtype)
    if getattr(args, "dry_run", False):
        return _dry_run(args.suite, dts, console)
    from ..measure import bench
    command = " ".join(["gemm-ladder"] + sys.argv[1:])

    def path_of(result: dict) -> Path:
        return Path(args.json) if args.json else suite.suite_json_path(Path(args.out), result)

    def checkpoint(result: dict) -> None:  # the rows so far survive a killed run
        bench.write_json({**result, "command": command}, path_of(result))

    with doors.progress() as progress:
        result = suite.run_suite(args.suite, dts, progress=progress, autotune=getattr(args, "autotune", False),
                                 checkpoint=checkpoint, call=getattr(args, "call", "kernel"))
    result["command"] = command
    print_suite(result, console)
    path = path_of(result)
    bench.write_json(result, path)
    console.print(f"results: {path}")
    extra = []
    for p in args.with_results or []:
        try:
            extra.append(json.loads(Path(p).read_text()))
        except (OSError, ValueError) as e:  # the run is recorded; a missing extra only thins the figure
            console.print(f"[yellow]not plotted: {p} ({e})[/yellow]")
    write_images([result] + extra, path.with_suffix(""), console)
    return 0 if all(r["ok"] for r in result["rows"]) else 1


def _dry_run(name: str, dts: list[str], console) -> int:
    from rich.table import Table
    from ..measure import suite
    rows = suite.plan_suite(name, dts)
    t = Table(title=f"suite {name}: {len(rows)} runs (no GPU used; model times are estimates)")
    for col in ("dtype", "shape", "what", "kernel", "reps", "model us/call"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["dtype"], f"{r['M']}x{r['N']}x{r['K']}", r["label"],
                  str(r["kernel"]) + (" (padded)" if r["padded"] else ""), str(r["reps"]), _fmt(r["model_us"], ".1f"))
    console.print(t)
    timed = sum(2 * r["reps"] * r["model_us"] for r in rows if math.isfinite(r["model_us"])) / 1e6
    console.print(f"model: {timed:.1f} s of timed kernel calls (ours + cuBLAS at the model's time), plus an "
                  f"L2 flush before each of {sum(2 * r['reps'] for r in rows)} calls, inputs, references and compiles")
    return 0


def print_candidates(rows: list[dict], title: str, shape: str, console) -> None:
    """The candidates that take the shape in a table that fits 80 columns (numbers only; the
    shape they run when padded in the title, or a column when they differ); those that do not, below it, grouped by their reason,
    as wrapped text (a "why" column would wrap a word per line)."""
    from rich import box
    from rich.table import Table
    taken = [r for r in rows if "shape run" in r]
    if taken:
        short = {"shape run": "shape run", "tile eff": "tile\neff", "compute us": "compute\nus",
                 "memory us": "memory\nus", "L2 us": "L2\nus", "score us": "score\nus", "why": "bound",
                 "waves": "waves\n(full)"}
        runs = {r["shape run"] for r in taken}
        if runs != {shape} and len(runs) == 1:  # padded alike: said once, in the title
            title += f"; each runs padded to {runs.pop()}"
        cols = [c for c in dict.fromkeys(k for r in taken for k in r) if c != "shape run" or len(runs) > 1]
        t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, padding=0)
        for c in cols:
            t.add_column(short.get(c, c), justify="left" if c in ("", "kernel", "shape run", "why") else "right",
                         no_wrap=True)
        for r in taken:  # "padded" is said by the title or the shape run column
            t.add_row(*[str(r.get(c, "")).replace("-bound", "").replace(", padded", "") for c in cols])
        console.print(t)
    else:
        console.print(title, markup=False, highlight=False)
    reasons: dict[str, list[str]] = {}
    for r in rows:
        if "shape run" not in r:
            reasons.setdefault(r["why"], []).append(r["kernel"])
    if reasons:
        console.print("not candidates:", markup=False, highlight=False)
    for why, keys in reasons.items():
        console.print(f"  {', '.join(keys)}: {why}", markup=False, highlight=False)


def cmd_explain(args) -> int:
    from ..cuda import device as cuda_device
    from ..cuda.device import H200
    from ..families import cost_model
    from ..library import select
    from .console import make_console
    console = make_console()
    sms = args.sms
    if sms is None:
        sms = H200.sms
        if doors.hopper_problem() is None:
            sms = cuda_device.num_sms(0)
    if args.fp8:
        return explain_fp8(args, sms, console)
    if args.fast_accum or args.bias16:
        raise doors.CliError("--fast-accum and --bias16 describe an fp8 call: give --fp8 tensor|row|block")
    dev = cost_model.Device(sms=sms)
    plan = explain_call.plan_call(args.M, args.N, args.K, args.dtype, sms, args.b_row_major, args.ldb)
    # the candidates as the library's call sees them: b's read and its rows' alignment
    ch = select.choose(args.M, args.N, args.K, args.dtype, device=dev, b_misaligned=plan.b_misaligned,
                       b_mn=plan.b_mn)
    if args.json:
        print(json.dumps({**ch.as_dict(), "runs": plan.run.key if plan.run else None}, indent=1, default=str))
        return 0 if ch.pick else 1
    print_candidates(select.explain_rows(ch), f"{args.M}x{args.N}x{args.K} {args.dtype}: candidates ({dev.sms} "
                     f"SMs, {dev.peak_tflops:.0f} TFLOP/s, {dev.hbm_tbs} TB/s: {dev.source})",
                     "x".join(map(str, (args.M, args.N, args.K))), console)
    console.print(f"pick: {ch.pick.key if ch.pick else 'none'} — {ch.reason}", markup=False, highlight=False)
    if ch.pick and plan.run:  # the library's call adds its own rules (select.step_for): say what it runs
        lines = [explain_call.runs_line(plan, ch.pick.key, args.M, args.N, args.K),
                 *explain_call.staging_lines(plan, dev), explain_call.predicted_line(plan, args.M, args.N, args.K, dev)]
        for line in lines:
            console.print(line, markup=False, highlight=False)
    if args.measured:
        print_measured(args.M, args.N, args.K, args.dtype, console)
    return 0 if ch.pick else 1


def explain_fp8(args, sms: int, console) -> int:
    """The fp8 family's entry for an e4m3 call with these scales, and why (families/fp8.choice)."""
    from ..families import fp8
    if args.measured:
        raise doors.CliError("--fp8 --measured: the fp8 record's rows are in bench --fp8's JSON, not the cost model's")
    if args.b_row_major or args.ldb is not None:
        raise doors.CliError("--fp8: B is read K-major only, as a contiguous (N, K) matrix (fp8 wgmma has no "
                             "transpose); --b-row-major and --ldb do not apply")
    entry, why = fp8.choice(args.M, args.N, args.K, args.fp8, args.fast_accum, sms, bias16=args.bias16)
    if problems := entry.shape_problems(args.M, args.N, args.K):  # what the door refuses, said so
        raise doors.CliError(f"--fp8 {args.M}x{args.N}x{args.K}: " + "; ".join(problems))
    if args.json:
        print(json.dumps({"M": args.M, "N": args.N, "K": args.K, "scales": args.fp8, "fast_accum": args.fast_accum,
                          "bias16": args.bias16, "sms": sms, "entry": entry.key, "label": entry.label, "why": why}))
        return 0
    console.print(f"{args.M}x{args.N}x{args.K} e4m3, {args.fp8} scales{', fast accumulation' if args.fast_accum else ''} "
                  f"({sms} SMs): {entry.key} ({entry.label})", markup=False, highlight=False)
    console.print(f"why: {why}", markup=False, highlight=False)
    return 0


def print_measured(M: int, N: int, K: int, dtype: str, console) -> None:
    """The newest cost-model record's row for the shape: predicted beside measured."""
    from ..measure import costmodel
    row, path = costmodel.measured_row(M, N, K, dtype)
    if path is None:
        console.print("measured: no cost-model record here (a checkout's benchmarks/results holds them)",
                      markup=False, highlight=False)
    elif row is None:
        console.print(f"measured: {path.name} does not hold {M}x{N}x{K} {dtype}", markup=False, highlight=False)
    else:
        console.print(f"measured: {row['measured_kernel']} {row['measured_us']:.1f} us, predicted {row['predicted_us']:.1f}"
                      f" us ({row['error']:+.0%}, {row['fitted_on']}; {path.name})", markup=False, highlight=False)


def cmd_plot(args) -> int:
    from .console import make_console
    console = make_console()
    results = []
    for p in args.results:
        try:
            res = json.loads(Path(p).read_text())
        except OSError as e:
            raise doors.CliError(f"cannot read {p}: {e.strerror or e}") from None
        except ValueError as e:
            raise doors.CliError(f"cannot read {p}: not JSON ({e})") from None
        if not isinstance(res, dict) or not isinstance(res.get("rows"), list):
            raise doors.CliError(f"{p} is not a gemm-ladder result (no rows)")
        results.append(res)
    # by default under --out-dir, never beside the JSON (a record's figures are tracked files)
    stem = Path(args.out) if args.out else Path(getattr(args, "out_dir", None) or doors.DEFAULT_OUT_DIR) / \
        Path(args.results[0]).with_suffix("").name
    fp8 = [r for r in results if r.get("kind") == "gemm-ladder bench --fp8"]
    if fp8:  # the fp8 record has its own roofline (fp8 peak, fp8 operand bytes)
        if len(fp8) != len(results):
            raise doors.CliError("an fp8 record plots alone: give `bench --fp8` results without ladder or suite ones")
        from ..measure.plots_fp8 import write_fp8_roofline
        path = doors.out_file(stem.with_name(stem.name + "_roofline.png"))
        console.print(f"roofline: {write_fp8_roofline(fp8[0], path)}", markup=False, highlight=False)
        return 0
    for suffix in ("_roofline.png", "_bars.png"):
        doors.out_file(stem.with_name(stem.name + suffix))
    return 0 if write_images(results, stem, console) else 1


def _dim(s: str) -> int:
    import argparse
    try:
        v = int(s)
    except ValueError:
        v = 0
    if v < 1:
        raise argparse.ArgumentTypeError(f"{s!r} is not a positive integer")
    if v > doors.MAX_DIM:
        raise argparse.ArgumentTypeError(f"{s} is over {doors.MAX_DIM}: the kernels index with 32-bit ints")
    return v


def add_parsers(sub, dtype_type) -> None:
    e = sub.add_parser("explain", help="the kernel the selection picks for M N K, and why (no GPU needed)")
    e.add_argument("M", type=_dim, help="rows of A and C")
    e.add_argument("N", type=_dim, help="columns of C (rows of B)")
    e.add_argument("K", type=_dim, help="the reduction dimension")
    e.add_argument("--dtype", type=dtype_type, default="float16", help="fp16 or bf16 (default fp16)")
    e.add_argument("--sms", type=doors.number(int, 1, 1024), help="SM count (default: this Hopper GPU's, else 132)")
    e.add_argument("--ldb", type=_dim, help="the row stride of b as the call is given it, in elements (default: "
                                             "contiguous, K for an (N, K) b, N for a row-major (K, N) b; at least "
                                             "that). One that is not a multiple of 8 is copied first; rows that "
                                             "are not whole 32-byte sectors change the pick")
    e.add_argument("--b-row-major", action="store_true",
                   help="B given as a row-major (K, N) matrix, as matmul(a, b) takes it (read N-major where the "
                        "kernel can); default: a contiguous (N, K) b, as matmul_nt(a, b) takes it")
    e.add_argument("--json", action="store_true", help="print the candidates and the kernel the call runs (runs) as JSON")
    e.add_argument("--measured", action="store_true", help="beside the predicted time, the time measured "
                   "on the H200 when the newest cost-model record holds the shape (benchmarks/results)")
    e.add_argument("--fp8", choices=("tensor", "row", "block"), help="the fp8 family's entry for e4m3 operands "
                   "with these scales instead (gemm_ladder.scaled_mm), and why")
    e.add_argument("--fast-accum", action="store_true", help="with --fp8: use_fast_accum=True")
    e.add_argument("--bias16", action="store_true", help="with --fp8: a 16-bit bias (it spills some tiles)")
    e.set_defaults(fn=cmd_explain)

    p = sub.add_parser("plot", help="roofline and ladder bar chart from results JSON (no GPU needed)")
    p.add_argument("results", nargs="+", help="ladder and/or suite JSON files")
    p.add_argument("--out", metavar="STEM", help="output stem: writes STEM_roofline.png (+ STEM_bars.png); "
                                                 "default: the first JSON's name under --out-dir (out/)")
    p.set_defaults(fn=cmd_plot)


def add_bench_flags(b) -> None:
    from ..measure.suites import suite_names
    b.add_argument("--suite", choices=suite_names(), help="run a shape suite with the selected kernels")
    b.add_argument("--dry-run", action="store_true", help="with --suite: list shapes, picks, reps; no GPU")
    b.add_argument("--autotune", action="store_true",
                   help="with --suite: time every accepted candidate once per shape, run the fastest, "
                        "cache the choice (autotune.json in the JIT cache)")
    b.add_argument("--call", choices=("kernel", "matmul", "matmul_nt"), default="kernel",
                   help="with --suite: time the selected kernel's prebuilt launch (default), or the library's "
                        "call gemm_ladder.matmul(a, b) with b row-major (K, N) / matmul_nt(a, b) against "
                        "torch.matmul on the same operands")
    b.add_argument("--with-results", nargs="*", metavar="JSON",
                   help="with --suite: also plot these results (e.g. a ladder run) on the roofline")
