"""``gemm-ladder simulate``: the mbarrier choreography simulator on the command line.

No GPU needed.  ``commands.py`` registers the subcommand with :func:`add_parser` and
calls :func:`run`; the no-GPU default job calls :func:`simulate_report`.

    gemm-ladder simulate                      # every simulated step + the course's what-ifs
    gemm-ladder simulate --step 7 --depth 2   # one step (or a variant: --step 7:d4)
    gemm-ladder simulate --what-if both-phase-0
    gemm-ladder simulate --attention A4         # an attention step (A2..A5, or all) at head dim 128
    gemm-ladder simulate --attention A4 --what-if pingpong-order-swapped

Writes ``OUT/simulate.html`` (the interactive page) and ``OUT/simulate_trace.json``
(Chrome / Perfetto trace) under ``--out-dir`` (default ``out/``); ``simulate_step7_d4.*``
for one step, ``simulate_<what-if>.*`` for a what-if (the main job's page,
``choreography.html``, stays its own); prints the KPIs (or, with ``--json``, only JSON) and, for a what-if, the verdict
and its one-sentence explanation.  Exit code 0 for a run whose what-if was detected and
explained; 2 for bad arguments, out-of-range values (each option names its range) or an
output folder that cannot be written.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

from ..choreography.sim import SimResult, depth_needed, params_for_step, run_what_if, simulate, simulated_steps
from ..choreography.sim import attention as attn
from ..choreography.whatifs import WHAT_IFS
from ..choreography.viz import write_chrome_trace, write_page
from . import doors

__all__ = ["add_parser", "run", "simulate_report", "DEFAULT_OUT"]

DEFAULT_OUT = doors.DEFAULT_OUT_DIR
# the main job's page (simulate_report); `gemm-ladder simulate` names its own (page_stem)
PAGE_NAME = "choreography.html"
TRACE_NAME = "choreography_trace.json"

# Caps. The page holds every event, so its size and the run time grow with the k-tiles a
# CTA walks through (k-tiles x tiles per CTA): 4096 of them for step 7 is ~4 s and a
# 20 MB page; the all-steps run simulates ~20 configurations, hence its lower cap.
MAX_DEPTH = 16
MAX_K_TILES = 4096
MAX_TILES_PER_CTA = 64
MAX_WORK_ONE = 4096
MAX_WORK_ALL = 512
MAX_NS = 100_000.0
MAX_SEQ_LEN = 131_072  # at most 2048 key blocks of 64 in a tile


def add_parser(subparsers: Any, parents: tuple | list = ()) -> argparse.ArgumentParser:
    """Register ``simulate`` on an argparse subparsers object; returns the parser.
    (Also sets ``fn=run`` and ``func=run`` as defaults, for dispatchers that use them.)
    ``parents`` may bring ``--out-dir``; without them the command has its own."""
    p = subparsers.add_parser(
        "simulate", parents=list(parents),
        help="simulate the mbarrier pipelines of the TMA steps (no GPU) and draw the choreography",
        description="Discrete-event model of the ladder's TMA / wgmma / mbarrier choreography. "
                    "Writes an interactive HTML page and a Perfetto trace, prints tensor-core busy "
                    "fraction, stalls, fill and drain; --what-if runs one of the course's exercises "
                    "and explains the deadlock or early release it causes.")
    keys = ", ".join(st.key + (" (model only)" if st.model_only else "") for st in simulated_steps())
    p.add_argument("--step", type=_step_key,
                   help=f"one step or variant, e.g. 7:d4, a depth at most {MAX_DEPTH} (default: all of {keys}, "
                        "lockstep beside warp-specialized)")
    p.add_argument("--depth", type=doors.number(int, 1, MAX_DEPTH), help=f"ring stages (PIPE_DEPTH), 1..{MAX_DEPTH}; default per step")
    p.add_argument("--k-tiles", type=doors.number(int, 1, MAX_K_TILES), dest="k_tiles",
                   help=f"k-tiles per output tile (default 64 = K 4096; at most {MAX_K_TILES})")
    p.add_argument("--tiles-per-cta", type=doors.number(int, 1, MAX_TILES_PER_CTA), dest="tiles_per_cta",
                   help="output tiles per CTA (default 1, 2 for persistent steps; "
                        f"k-tiles x tiles per CTA at most {MAX_WORK_ONE} with --step, {MAX_WORK_ALL} without)")
    p.add_argument("--what-if", dest="what_if", choices=[*WHAT_IFS, *attn.ATTN_WHAT_IFS],
                   help="one of the course's exercises: " +
                        "; ".join(f"{k}: {w.text}" for k, w in WHAT_IFS.items()) +
                        "; with --attention: " + "; ".join(f"{k}: {w.text}" for k, w in attn.ATTN_WHAT_IFS.items()))
    p.add_argument("--l2-bw", type=doors.number(float, 0.01, 10_000), dest="l2_bytes_per_ns", metavar="B_PER_NS",
                   help="per-SM L2->SMEM bandwidth in bytes/ns, 0.01..10000 (default: unlimited)")
    p.add_argument("--load-latency-ns", type=doors.number(float, 1, MAX_NS, "ns"), dest="load_latency_ns",
                   help=f"TMA load latency, 1..{MAX_NS:.0f} ns (default 800)")
    p.add_argument("--mma-ns", type=doors.number(float, 1, MAX_NS, "ns"), dest="mma_ns",
                   help=f"wgmma time per 128x128x64 k-tile, 1..{MAX_NS:.0f} ns (default 280)")
    p.add_argument("--consumer-gap-ns", type=doors.number(float, 0, MAX_NS, "ns"), dest="consumer_gap_ns",
                   help=f"a consumer's shortest wgmma issue-to-issue time, 0..{MAX_NS:.0f} ns (default 411)")
    a = p.add_argument_group("attention (the fused attention steps A2-A5 on one SM)")
    a.add_argument("--attention", choices=[*attn.ATTN_STEPS, "all"],
                   help="simulate an attention step (or all four) instead of a GEMM step")
    a.add_argument("--head-dim", type=int, choices=(64, 128, 256), dest="head_dim", help="head dim (default 128)")
    a.add_argument("--seq-len", type=doors.number(int, 1, MAX_SEQ_LEN), dest="seq_len",
                   help=f"keys per tile, 1..{MAX_SEQ_LEN}: ceil(S / BN) key blocks (default {attn.DEFAULT_SEQ_LEN})")
    a.add_argument("--softmax-ns-per-elem", type=doors.number(float, 0, 100, "ns"), dest="softmax_ns_per_elem",
                   help="a warpgroup's softmax time per score element, alone on the SM, 0..100 ns "
                        f"(default {attn.SOFTMAX_NS_PER_ELEM:.4f})")
    a.add_argument("--record", metavar="FILE",
                   help="a `bench --attention` record: print the prediction beside its non-causal fp16 rows")
    if not parents:
        p.add_argument("--out-dir", "--out", dest="out_dir", default=DEFAULT_OUT, metavar="DIR",
                       help=f"output folder (default {DEFAULT_OUT}/)")
    p.add_argument("--json", action="store_true", help="print the KPIs as JSON (alone on stdout) instead of the table")
    p.set_defaults(fn=run, func=run)
    return p


def _step_key(text: str) -> str:
    """A step the simulator models (checked when the arguments are parsed)."""
    try:
        p = params_for_step(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    if p.depth > MAX_DEPTH:  # the cap --depth has: a variant's ring is no way around it
        raise argparse.ArgumentTypeError(f"{text}: depth {p.depth} is over {MAX_DEPTH}, the most ring stages "
                                         "simulated (as --depth)")
    return p.key


def check_work(step: int | str | None, overrides: dict) -> None:
    """Refuse runs whose page would be too large to open (see MAX_WORK_*)."""
    steps = [step] if step is not None else simulated_steps()
    work = max(p.k_tiles * p.tiles_per_cta for p in (params_for_step(s, **overrides) for s in steps))
    cap = MAX_WORK_ONE if step is not None else MAX_WORK_ALL
    if work > cap:
        more = "" if step is not None else f"; pass --step to go up to {MAX_WORK_ONE}"
        raise doors.CliError(f"{work} k-tiles per CTA (k-tiles x tiles per CTA) is too many: at most {cap} "
                             f"{'for one step' if step is not None else 'when simulating every step'}, "
                             f"since the page holds every event{more}")


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
    """KPIs as a narrow table (fits 80 columns); the MMA side's top stall of each row below it."""
    from rich import box
    from rich.console import Console
    from rich.table import Table
    rows = [_row(r) for r in results]
    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False, collapse_padding=True,
              caption="busy: tensor-core busy fraction; steady: the same between fill and drain",
              caption_justify="left")
    for c in ("step", "style", "depth", "busy", "steady", "fill", "drain", "makespan", "verdict"):
        t.add_column(c, justify="left" if c in ("style", "verdict") else "right", no_wrap=True)
    for d in rows:
        t.add_row(_step_cell(d) + ("*" if d["what_if"] else ""), d["style"].replace("specialized", "sp."),
                  str(d["depth"]), f"{d['busy']:.1%}", f"{d['steady']:.1%}", _fmt_ns(d["fill_ns"]),
                  _fmt_ns(d["drain_ns"]), _fmt_ns(d["makespan_ns"]),
                  d["verdict"] if d["verdict"] == "ok" else f"[bold red]{d['verdict']}[/]")
    console = Console()
    console.print(t)
    for d in rows:
        which = f"step {_step_cell(d)}" + (f" with the what-if {d['what_if']} (*)" if d["what_if"] else "")
        if d["top_stall"]:
            console.print(f"{which}: longest MMA-side wait while the tensor core idles: {d['top_stall']}",
                          markup=False, highlight=False)


def page_stem(step: str | None, what_if: str | None) -> str:
    """The file names of a `gemm-ladder simulate` run: simulate[_<what-if> | _step<key>]."""
    if what_if:
        return f"simulate_{what_if}"
    return "simulate" + (f"_step{step.replace(':', '_')}" if step is not None else "")


def _write(out_dir: str | Path, results: list[SimResult], pair: tuple[int, int] | None,
           subtitle: str, page_name: str = PAGE_NAME, trace_name: str = TRACE_NAME) -> tuple[Path, Path]:
    out = Path(out_dir)
    tls = [r.timeline for r in results]
    page = write_page(tls, out / page_name, title="GEMM ladder - mbarrier choreography",
                      pair=pair, subtitle=subtitle)
    trace = write_chrome_trace(tls, out / trace_name)
    return page, trace


_SUBTITLE = ("discrete-event model of the mbarrier pipelines (gemm_ladder.choreography.sim), H200 estimates: "
             "wgmma {mma:.0f} ns per 128x128x64 k-tile, a consumer's issue gap {gap:.0f} ns, "
             "TMA latency {lat:.0f} ns{bw}")


def _subtitle(p) -> str:
    bw = f", {p.l2_bytes_per_ns:g} B/ns per SM" if p.l2_bytes_per_ns else ", bandwidth unlimited"
    return _SUBTITLE.format(mma=p.mma_ns, gap=p.consumer_gap_ns, lat=p.load_latency_ns, bw=bw)


def _simulate_all(overrides: dict, step: int | str | None, tick: Callable[[str], None]):
    """Every simulated step (or one), and with no ``step`` the depth sweep of the first
    warp-specialized step and each what-if. Returns (results, text lines, the pair of
    timelines the page shows side by side)."""
    steps = [step] if step is not None else simulated_steps()
    results = []
    for s in steps:
        p = params_for_step(s, **overrides)
        tick(f"simulating step {p.key}")
        results.append(simulate(p))
    lines = ["choreography simulator (no GPU): tensor-core busy fraction per step"]
    lines += ["  " + _text_line(r) for r in results]
    pair: tuple[int, int] = (0, -1)
    if step is None:
        lock = max(i for i, r in enumerate(results) if r.params.lockstep)
        ws = next(i for i, r in enumerate(results) if not r.params.lockstep)
        pair = (lock, ws)
        p_ws = results[ws].params
        sweep = []
        for d in range(1, min(depth_needed(p_ws) + 2, MAX_DEPTH) + 1):
            tick(f"simulating step {p_ws.key} at depth {d}")
            r = simulate(params_for_step(p_ws.key, **dict(overrides, depth=d)))
            sweep.append(f"{d}: {r.kpis['tensor_core_busy']:.0%}")
        lines.append(f"  step {p_ws.key} busy vs depth (depth needed by the model: {depth_needed(p_ws)}): "
                     + ", ".join(sweep))
        lines.append("what-ifs (the course's exercises):")
        for name in WHAT_IFS:
            tick(f"simulating the what-if {name}")
            wo = {k: v for k, v in overrides.items() if not (name == "depth-1" and k == "depth")}
            try:
                r = run_what_if(name, **wo)
            except ValueError as exc:  # the overrides leave its step without what it breaks (e.g. K too short)
                lines.append(f"  {name}: not run with these parameters - {exc}")
                continue
            results.append(r)
            lines.append(f"  {name} (step {_step_cell(_row(r))}): {r.verdict} - {r.explanation}")
    return results, lines, pair


def simulate_report(out_dir: str | Path, step: int | str | None = None, tick: Callable[[str], None] | None = None,
                    **overrides: Any) -> str:
    """Simulate every step the simulator models (or one ``step``) with the default parameters (plus
    ``overrides``), and with no ``step`` also each of the course's what-ifs; write
    ``out_dir/choreography.html`` and ``out_dir/choreography_trace.json``; return a
    short text summary (KPIs per step, what-if verdicts and explanations). ``tick(text)``
    hears what is being simulated (for a progress display)."""
    results, lines, pair = _simulate_all(overrides, step, tick or (lambda _text: None))
    page, trace = _write(out_dir, results, pair, _subtitle(results[0].params))
    lines.append(f"wrote {page} and {trace}")
    return "\n".join(lines)


def _json_rows(results: list[SimResult]) -> str:
    return json.dumps([dict(_row(r), kpis=r.kpis, explanation=r.explanation) for r in results], default=str)


def run(args: argparse.Namespace) -> int:
    """Run ``gemm-ladder simulate`` with parsed ``args``; returns the exit code. With
    ``--json`` stdout holds the JSON alone; the paths written go to stderr."""
    if getattr(args, "attention", None) or getattr(args, "what_if", None) in attn.ATTN_WHAT_IFS:
        return run_attention(args)
    ov = _overrides(args)
    what_if = getattr(args, "what_if", None)
    step = getattr(args, "step", None)
    as_json = getattr(args, "json", False)
    try:
        given = [f"--{k.replace('_', '-')}" for k in ATTN_ONLY if getattr(args, k, None) is not None]
        if given:
            raise doors.CliError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for --attention")
        s = step if step is not None or not what_if else WHAT_IFS[what_if].default_step
        check_work(s, ov)
        out = doors.out_dir(getattr(args, "out_dir", None) or DEFAULT_OUT)
        with doors.status("simulating") as tick:
            if what_if:
                wo = {k: v for k, v in ov.items() if not (what_if == "depth-1" and k == "depth")}
                res = run_what_if(what_if, s, **wo)
                results = [res, simulate(params_for_step(s, **wo))]
                pair, subtitle = (0, 1), _subtitle(res.params)
                title = f"what-if {what_if} on step {s} (beside the correct kernel)"
            elif step is not None:
                results = [simulate(params_for_step(step, **ov))]
                pair, subtitle, title = (0, -1), _subtitle(results[0].params), results[0].params.title
            else:
                results, lines, pair = _simulate_all(ov, None, tick)
                subtitle, title = _subtitle(results[0].params), ""
            tick("writing the page")
            stem = page_stem(step, what_if)
            page, trace = _write(out, results, pair, subtitle, f"{stem}.html", f"{stem}_trace.json")
    except (ValueError, doors.CliError) as exc:
        print(f"gemm-ladder simulate: error: {exc}", file=sys.stderr)
        return 2
    if as_json:
        print(_json_rows(results))
        print(f"wrote {page} and {trace}", file=sys.stderr)
        return 0
    if step is None and not what_if:
        print("\n".join(lines))
    else:
        _print_table(results, title)
        res = results[0]
        if what_if:
            print(f"what-if {what_if}: {WHAT_IFS[what_if].text}")
        if what_if or res.verdict != "ok":
            print(f"verdict: {res.verdict}")
            print(res.explanation)
        if what_if and WHAT_IFS[what_if].why:
            print(f"why: {WHAT_IFS[what_if].why}")
    print(f"wrote {page} and {trace}")
    return 0


ATTN_ONLY = ("head_dim", "seq_len", "softmax_ns_per_elem", "record")
GEMM_ONLY = ("step", "k_tiles", "tiles_per_cta", "mma_ns", "consumer_gap_ns")


def check_gemm_only(args: argparse.Namespace, step: str | None, what_if: str | None) -> None:
    """Refuse the GEMM steps' options on an attention run, naming what made it one: --attention,
    or (without it) an attention what-if."""
    given = [f"--{k.replace('_', '-')}" for k in GEMM_ONLY if getattr(args, k, None) is not None]
    if not given:
        return
    verb = "is" if len(given) == 1 else "are"
    if step is None and what_if:
        w = attn.ATTN_WHAT_IFS[what_if]
        raise doors.CliError(f"the what-if {what_if} breaks an attention step (default {w.default_step}; choose "
                             f"with --attention {'|'.join(attn.ATTN_STEPS)}), not a GEMM step: {', '.join(given)} "
                             f"{verb} for the GEMM steps")
    raise doors.CliError(f"{', '.join(given)} {verb} for the GEMM steps, not for --attention")


def _attn_row(r: SimResult, seq_len: int) -> dict:
    p, k = r.params, r.kpis
    grid = attn.grid_tflops(p, k["makespan_ns"], seq_len) if r.ok else dict(tflops=0.0, waves=0, tiles=0)
    return dict(step=p.step, head_dim=p.head_dim, bn=p.bn, blocks=p.blocks, consumers=p.consumers, depth=p.depth,
                ctas_per_sm=p.ctas_per_sm, what_if=r.what_if or "", verdict=r.verdict,
                busy=k["tensor_core_busy"], softmax_busy=k.get("softmax_busy", 0.0), cuda_core_busy=k["cuda_core_busy"],
                makespan_ns=k["makespan_ns"], per_block_ns=k["per_block_ns"], predicted_tflops=grid["tflops"],
                waves=grid["waves"], seq_len=seq_len)


def run_attention(args: argparse.Namespace) -> int:
    """``gemm-ladder simulate --attention STEP``: one attention step (or all four, or a what-if
    beside the correct step) on one SM; writes the page and the trace, prints the KPIs and the
    predicted TFLOP/s (and, with --record, the prediction beside a record)."""
    step, what_if, as_json = args.attention, getattr(args, "what_if", None), getattr(args, "json", False)
    D = getattr(args, "head_dim", None) or 128
    S = getattr(args, "seq_len", None) or attn.DEFAULT_SEQ_LEN
    ov = {k: getattr(args, k, None) for k in ("depth", "load_latency_ns", "l2_bytes_per_ns", "softmax_ns_per_elem")}
    try:
        check_gemm_only(args, step, what_if)
        if what_if and what_if not in attn.ATTN_WHAT_IFS:
            raise doors.CliError(f"the what-if {what_if} breaks a GEMM step; with --attention choose from "
                                 f"{', '.join(attn.ATTN_WHAT_IFS)}")
        if what_if and step == "all":
            raise doors.CliError("a what-if runs on one attention step, not on all")
        steps = list(attn.ATTN_STEPS) if step == "all" else [step or attn.ATTN_WHAT_IFS[what_if].default_step]
        out = doors.out_dir(getattr(args, "out_dir", None) or DEFAULT_OUT)
        with doors.status("simulating") as tick:
            results = [attn.simulate_attention(steps[0], what_if, head_dim=D, seq_len=S, **ov)] if what_if else []
            for st in steps:
                tick(f"simulating attention {st}")
                results.append(attn.simulate_attention(st, head_dim=D, seq_len=S, **ov))
            cmp = attn.compare_with_record(args.record, D, S, **ov) if getattr(args, "record", None) else None
            tick("writing the page")
            stem = (f"simulate_{what_if}" if what_if else "simulate_attention" + ("" if step == "all" else f"_{step}")
                    + ("" if D == 128 else f"_d{D}"))
            p0 = results[-1].params
            bw = f"{p0.l2_bytes_per_ns:g} B/ns per SM" if p0.l2_bytes_per_ns else "bandwidth unlimited"
            sub = (f"discrete-event model of the attention steps (gemm_ladder.choreography.sim.attention), H200: "
                   f"tensor core {p0.tc_flop_per_ns:.0f} FLOP/ns per SM (989 TFLOP/s), softmax "
                   f"{p0.softmax_ns_per_elem:.4f} ns "
                   f"per score per warpgroup (MUFU 16 ex2/clk assumed), wgmma issue {p0.mma_issue_ns:.0f} ns and wait "
                   f"{p0.mma_wait_ns:.0f} ns (the GEMM's fit), TMA latency {p0.load_latency_ns:.0f} ns, {bw}")
            tls = [r.timeline for r in results]
            pair = (0, len(tls) - 1) if len(tls) > 1 else (0, -1)
            page = write_page(tls, out / f"{stem}.html", title="attention - mbarrier choreography", pair=pair,
                              subtitle=sub)
            trace = write_chrome_trace(tls, out / f"{stem}_trace.json")
    except (ValueError, doors.CliError) as exc:
        print(f"gemm-ladder simulate: error: {exc}", file=sys.stderr)
        return 2
    rows = [_attn_row(r, S) for r in results]
    if as_json:
        print(json.dumps([dict(d, kpis=r.kpis, explanation=r.explanation) for d, r in zip(rows, results)], default=str))
        print(f"wrote {page} and {trace}", file=sys.stderr)
        return 0
    for d in rows:
        head = f"attention {d['step']} (D {d['head_dim']}, BN {d['bn']}, {d['blocks']} blocks, depth {d['depth']}"
        head += (f", {d['ctas_per_sm']} CTAs per SM" if d["ctas_per_sm"] > 1 else "") + ")"
        head += f" what-if {d['what_if']}" if d["what_if"] else ""
        tail = (f", predicted {d['predicted_tflops']:.0f} TFLOP/s at S {S} ({d['waves']} waves)"
                if d["verdict"] == "ok" else "")
        per = f" ({_fmt_ns(d['per_block_ns'])} per block)" if d["verdict"] == "ok" else ""
        print(f"{head}: tensor-core busy {d['busy']:.1%}, softmax busy {d['softmax_busy']:.1%} "
              f"(CUDA cores {d['cuda_core_busy']:.1%}), makespan {_fmt_ns(d['makespan_ns'])}{per}{tail}, "
              f"verdict {d['verdict']}")
    if what_if:
        w = attn.ATTN_WHAT_IFS[what_if]
        print(f"what-if {what_if}: {w.text}")
        print(f"verdict: {results[0].verdict}")
        print(results[0].explanation)
        print(f"why: {w.why}")
    if cmp is not None:
        print(attn.format_comparison(cmp))
    print(f"wrote {page} and {trace}")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Stand-alone entry (``python -m gemm_ladder.cli.simulate``), for development."""
    parser = doors.OneLineParser(prog="gemm-ladder")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    args = parser.parse_args(["simulate"] + list(sys.argv[1:] if argv is None else argv))
    return run(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
