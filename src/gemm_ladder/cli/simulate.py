"""``gemm-ladder simulate``: the mbarrier choreography simulator on the command line.

No GPU needed.  ``cli.py`` registers the subcommand with :func:`add_parser` and
calls :func:`run`; the no-GPU default job calls :func:`simulate_report`.

    gemm-ladder simulate                      # steps 4..10 + the course's what-ifs
    gemm-ladder simulate --step 7 --depth 2   # one step
    gemm-ladder simulate --what-if both-phase-0

Writes ``OUT/choreography.html`` (the interactive page) and
``OUT/choreography_trace.json`` (Chrome / Perfetto trace), prints the KPIs and,
for a what-if, the verdict and its one-sentence explanation.  Exit code 0 for a
run whose what-if was detected and explained; 2 for bad arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ..choreography.sim import SimResult, depth_needed, params_for_step, run_what_if, simulate, simulated_steps
from ..choreography.whatifs import WHAT_IFS
from ..choreography.viz import write_chrome_trace, write_page

__all__ = ["add_parser", "run", "simulate_report", "DEFAULT_OUT"]

DEFAULT_OUT = "results/choreography"
PAGE_NAME = "choreography.html"
TRACE_NAME = "choreography_trace.json"


def add_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``simulate`` on an argparse subparsers object; returns the parser.
    (Also sets ``fn=run`` and ``func=run`` as defaults, for dispatchers that use them.)"""
    p = subparsers.add_parser(
        "simulate",
        help="simulate the mbarrier pipelines of steps 4-10 (no GPU) and draw the choreography",
        description="Discrete-event model of the ladder's TMA / wgmma / mbarrier choreography. "
                    "Writes an interactive HTML page and a Perfetto trace, prints tensor-core busy "
                    "fraction, stalls, fill and drain; --what-if runs one of the course's exercises "
                    "and explains the deadlock or early release it causes.")
    keys = ", ".join(st.key + (" (model only)" if st.model_only else "") for st in simulated_steps())
    p.add_argument("--step", type=_step_key,
                   help=f"one step or variant, e.g. 7:d4 (default: all of {keys}, "
                        "lockstep beside warp-specialized)")
    p.add_argument("--depth", type=int, help="PIPE_DEPTH (ring stages); default per step")
    p.add_argument("--k-tiles", type=int, dest="k_tiles", help="k-tiles per output tile (default 64 = K 4096)")
    p.add_argument("--tiles-per-cta", type=int, dest="tiles_per_cta",
                   help="output tiles per CTA (default 1 for steps 4-5, 2 for persistent steps)")
    p.add_argument("--what-if", dest="what_if", choices=list(WHAT_IFS),
                   help="one of the course's exercises: " +
                        "; ".join(f"{k}: {w.text}" for k, w in WHAT_IFS.items()))
    p.add_argument("--l2-bw", type=float, dest="l2_bytes_per_ns", metavar="B_PER_NS",
                   help="per-SM L2->SMEM bandwidth in bytes/ns (default: unlimited)")
    p.add_argument("--consumer-gap-ns", type=float, dest="consumer_gap_ns",
                   help="a consumer's shortest wgmma issue-to-issue time (default 411)")
    p.add_argument("--load-latency-ns", type=float, dest="load_latency_ns",
                   help="TMA load latency (default 800)")
    p.add_argument("--mma-ns", type=float, dest="mma_ns",
                   help="wgmma time per 128x128x64 k-tile (default 280)")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output folder (default {DEFAULT_OUT})")
    p.add_argument("--json", action="store_true", help="also print the KPIs as JSON")
    p.set_defaults(fn=run, func=run)
    return p


def _step_key(text: str) -> str:
    """A step the simulator models (checked when the arguments are parsed)."""
    try:
        return params_for_step(text).key
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _overrides(args: argparse.Namespace) -> dict:
    keys = ("depth", "k_tiles", "tiles_per_cta", "l2_bytes_per_ns", "load_latency_ns", "mma_ns", "consumer_gap_ns")
    return {k: getattr(args, k, None) for k in keys if getattr(args, k, None) is not None}


def _fmt_ns(ns: float) -> str:
    return f"{ns:.0f} ns" if abs(ns) < 1000 else f"{ns / 1000:.2f} us"


def _row(r: SimResult) -> dict:
    k = r.kpis
    style = "lockstep" if r.params.lockstep else "warp-specialized"
    # the stall that starves the tensor core: the MMA side's (consumer / team) longest wait
    # while the tensor core sat idle
    mma_side = [(lane, b, ns) for lane, bars in k["exposed_stall_ns"].items() for b, ns in bars.items()
                if lane.split("/")[-1].startswith(("consumer", "team"))]
    top = max(mma_side, key=lambda x: x[2]) if mma_side else None
    return dict(
        step=r.params.step, key=r.params.key, model_only=r.params.model_only, style=style, depth=r.params.depth,
        what_if=r.what_if or "",
        busy=k["tensor_core_busy"], steady=k["tensor_core_busy_steady"],
        fill_ns=k["fill_ns"], drain_ns=k["drain_ns"], makespan_ns=k["makespan_ns"],
        top_stall=f"{top[0]} on {top[1]} {_fmt_ns(top[2])}" if top else "",
        verdict=r.verdict,
    )


def _step_cell(row: dict) -> str:
    return row["key"] + (" (model only)" if row["model_only"] else "")


def _text_line(r: SimResult) -> str:
    d = _row(r)
    head = f"step {_step_cell(d)} {d['style']:<16} depth {d['depth']}"
    if d["what_if"]:
        head += f" what-if {d['what_if']}"
    return (f"{head}: tensor-core busy {d['busy']:.1%} (steady {d['steady']:.1%}), "
            f"fill {_fmt_ns(d['fill_ns'])}, drain {_fmt_ns(d['drain_ns'])}, "
            f"makespan {_fmt_ns(d['makespan_ns'])}, verdict {d['verdict']}")


def _print_table(results: list[SimResult], title: str) -> None:
    from rich.console import Console
    from rich.table import Table
    rows = [_row(r) for r in results]
    t = Table(title=title)
    for c, j in (("step", "right"), ("style", "left"), ("depth", "right"), ("what-if", "left"),
                 ("TC busy", "right"), ("steady", "right"), ("fill", "right"), ("drain", "right"),
                 ("makespan", "right"), ("MMA-side stall, TC idle", "left"), ("verdict", "left")):
        t.add_column(c, justify=j)
    for d in rows:
        t.add_row(_step_cell(d), d["style"], str(d["depth"]), d["what_if"], f"{d['busy']:.1%}",
                  f"{d['steady']:.1%}", _fmt_ns(d["fill_ns"]), _fmt_ns(d["drain_ns"]),
                  _fmt_ns(d["makespan_ns"]), d["top_stall"],
                  d["verdict"] if d["verdict"] == "ok" else f"[bold red]{d['verdict']}[/]")
    Console(width=max(140, Console().width)).print(t)


def _write(out_dir: str | Path, results: list[SimResult], pair: tuple[int, int] | None,
           subtitle: str) -> tuple[Path, Path]:
    out = Path(out_dir)
    tls = [r.timeline for r in results]
    page = write_page(tls, out / PAGE_NAME, title="GEMM ladder - mbarrier choreography",
                      pair=pair, subtitle=subtitle)
    trace = write_chrome_trace(tls, out / TRACE_NAME)
    return page, trace


_SUBTITLE = ("discrete-event model of the mbarrier pipelines (gemm_ladder.choreography.sim), H200 estimates: "
             "wgmma {mma:.0f} ns per 128x128x64 k-tile, a consumer's issue gap {gap:.0f} ns, "
             "TMA latency {lat:.0f} ns{bw}")


def _subtitle(p) -> str:
    bw = f", {p.l2_bytes_per_ns:g} B/ns per SM" if p.l2_bytes_per_ns else ", bandwidth unlimited"
    return _SUBTITLE.format(mma=p.mma_ns, gap=p.consumer_gap_ns, lat=p.load_latency_ns, bw=bw)


def simulate_report(out_dir: str | Path, step: int | str | None = None, **overrides: Any) -> str:
    """Simulate every step the simulator models (or one ``step``) with the default parameters (plus
    ``overrides``), and with no ``step`` also each of the course's what-ifs; write
    ``out_dir/choreography.html`` and ``out_dir/choreography_trace.json``; return a
    short text summary (KPIs per step, what-if verdicts and explanations)."""
    steps = [step] if step is not None else simulated_steps()
    results = [simulate(params_for_step(s, **overrides)) for s in steps]
    lines = ["choreography simulator (no GPU): tensor-core busy fraction per step"]
    lines += ["  " + _text_line(r) for r in results]
    pair: tuple[int, int] | None = (0, -1)
    if step is None:
        lock = max(i for i, r in enumerate(results) if r.params.lockstep)
        ws = next(i for i, r in enumerate(results) if not r.params.lockstep)
        pair = (lock, ws)
        p_ws = results[ws].params
        sweep = []
        for d in range(1, depth_needed(p_ws) + 3):
            r = simulate(params_for_step(p_ws.key, **dict(overrides, depth=d)))
            sweep.append(f"{d}: {r.kpis['tensor_core_busy']:.0%}")
        lines.append(f"  step {p_ws.key} busy vs depth (depth needed by the model: {depth_needed(p_ws)}): "
                     + ", ".join(sweep))
        lines.append("what-ifs (the course's exercises):")
        for name in WHAT_IFS:
            wo = {k: v for k, v in overrides.items() if not (name == "depth-1" and k == "depth")}
            r = run_what_if(name, **wo)
            results.append(r)
            lines.append(f"  {name} (step {_step_cell(_row(r))}): {r.verdict} - {r.explanation}")
    page, trace = _write(out_dir, results, pair, _subtitle(results[0].params))
    lines.append(f"wrote {page} and {trace}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """Run ``gemm-ladder simulate`` with parsed ``args``; returns the exit code."""
    ov = _overrides(args)
    out = getattr(args, "out", None) or DEFAULT_OUT
    what_if = getattr(args, "what_if", None)
    step = getattr(args, "step", None)
    try:
        if what_if:
            s = step if step is not None else WHAT_IFS[what_if].default_step
            wo = {k: v for k, v in ov.items() if not (what_if == "depth-1" and k == "depth")}
            res = run_what_if(what_if, s, **wo)
            base = simulate(params_for_step(s, **wo))
            results = [res, base]
            page, trace = _write(out, results, (0, 1), _subtitle(res.params))
            _print_table(results, f"what-if {what_if} on step {s} (beside the correct kernel)")
            print(f"what-if {what_if}: {WHAT_IFS[what_if].text}")
            print(f"verdict: {res.verdict}")
            print(res.explanation)
            if WHAT_IFS[what_if].why:
                print(f"why: {WHAT_IFS[what_if].why}")
        elif step is not None:
            res = simulate(params_for_step(step, **ov))
            results = [res]
            page, trace = _write(out, results, (0, -1), _subtitle(res.params))
            _print_table(results, res.params.title)
            if res.verdict != "ok":
                print(f"verdict: {res.verdict}")
                print(res.explanation)
        else:
            print(simulate_report(out, **ov))
            if getattr(args, "json", False):
                print(json.dumps({st.key: dict(simulate(params_for_step(st, **ov)).kpis, model_only=st.model_only)
                                  for st in simulated_steps()}, default=str))
            return 0
    except ValueError as exc:
        print(f"gemm-ladder simulate: error: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "json", False):
        print(json.dumps([dict(_row(r), kpis=r.kpis, explanation=r.explanation) for r in results],
                         default=str))
    print(f"wrote {page} and {trace}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m gemm_ladder.cli.simulate``), for development."""
    parser = argparse.ArgumentParser(prog="gemm-ladder")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(["simulate"] + list(sys.argv[1:] if argv is None else argv))
    return run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
