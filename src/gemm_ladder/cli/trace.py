"""``gemm-ladder trace``: a measured in-kernel timeline of a step beside the simulator's (with
``--attention``: of an attention step beside the attention model's). ``gemm-ladder calibrate``
(no GPU) is in calibrate_cli."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..choreography import saved, sim, trace, viz
from ..choreography.timeline import kpis
from ..families.keys import get_step
from . import doors


def trace_command(args, console) -> int:
    """Each size in turn: the traced run, its records, page, Perfetto trace and summary."""
    st = get_step(args.step)
    if not st.uses_tma:
        console.print(f"[red]step {st.key} has no tracing hooks (the TMA steps have)[/red]")
        return 2
    rc = 0
    for size in args.size:
        rc = max(rc, trace_one(st, size, args, console))
    return rc


def trace_stem(key: str, size: tuple[int, int, int]) -> str:
    """The files' stem: trace_step<KEY>, and the size unless it is the default 4096³."""
    stem = f"trace_step{key.replace(':', '_')}"
    return stem if tuple(size) == (4096, 4096, 4096) else stem + "_" + "x".join(map(str, size))


def trace_one(st, size: tuple[int, int, int], args, console) -> int:
    from ..choreography import story
    from ..choreography.heldout import OVERHEAD_TOLERANCE, clock_of
    (M, N, K) = size
    res = trace.measure(st, M, N, K, events=args.events, reps=getattr(args, "reps", None) or 20,
                        decode_ctas=getattr(args, "ctas", None))
    clock = clock_of(res["records"])
    size_meta = {"M": M, "N": N, "K": K, "ms_plain": res["ms_plain"], "ms_traced": res["ms_traced"],
                 "sm_clock_ghz": clock}
    full = trace.to_timeline(res["records"], st, meta=size_meta)
    shown_ctas = list(range(max(2, st.cluster_m)))   # the first cluster (or CTAs 0 and 1)
    shown = trace.to_timeline(res["records"], st, ctas=shown_ctas, meta=dict(size_meta, shown_ctas=shown_ctas))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = trace_stem(st.key, size)
    records_path = saved.write_records(out / f"{stem}_records.json.gz", st.key, (M, N, K), res["records"],
                                       num_sms=res["num_sms"], ctas=res["blocks"],
                                       events_per_slot=res["events_per_slot"], correct=res["correct"],
                                       ms_plain=res["ms_plain"], ms_traced=res["ms_traced"])
    summary = {"step": st.key, "size": [M, N, K], "correct": res["correct"], "rel_err": res["rel_err"],
               "ms_plain": res["ms_plain"], "ms_traced": res["ms_traced"], "trace_overhead": res["overhead"],
               "timeline_is_the_kernels": res["overhead"] <= OVERHEAD_TOLERANCE, "timing_reps": res.get("reps"),
               "ctas": res["blocks"], "decoded_ctas": res.get("decoded_ctas", res["blocks"]),
               "num_sms": res["num_sms"], "sm_clock_ghz": clock, "events_per_slot": res["events_per_slot"],
               "slots_full": res["overflow"], "records": records_path.name, "kpis_measured": kpis(full)}
    try:  # the model fitted to the CTAs shown, and the model predicting them (the same account as calibrate's)
        told = story.tell(shown)
        summary.update(calibration=told["calibration"], prediction=told["prediction"], story=told["lines"],
                       sim_calibrated=True)
        simres = told["fitted"]
    except ValueError as e:  # the measured configuration is not one the model takes
        told = None
        summary["sim_calibrated"] = False
        summary["sim_fit_error"] = str(e)
        simres = sim.simulate(sim.params_for_step(st, size=(M, N, K), num_sms=res["num_sms"]))
    summary["kpis_simulated"] = simres.kpis
    title = f"step {st.key} at {M}x{N}x{K}: simulated vs measured"
    if told is None:
        _write_outputs(out, stem, summary, shown, simres, title)
    else:
        (out / f"{stem}.json").write_text(json.dumps({"summary": summary, "timeline": shown.to_dict()}, default=float))
        if not getattr(args, "no_page", False):  # at 8192³ the page and the Perfetto trace are tens of MB
            story.write_page(shown, told, out / f"{stem}.html", title=title)
            viz.write_chrome_trace([shown], out / f"{stem}_perfetto.json")
    print_kpis(summary, console)
    _warn_overflow(res, console)
    console.print(f"records: {records_path} (the same account without a GPU: gemm-ladder calibrate {records_path})")
    return 0 if res["correct"] and not res["overflow"] else 1


def _write_outputs(out, stem: str, summary: dict, shown, simres, title: str) -> None:
    """The summary and drawn timeline (JSON), the page (simulated beside measured, its subtitle the
    traced build against the kernel: past 5 % it says the timeline is not the kernel's), the Perfetto trace."""
    from ..choreography.story import overhead_note
    (out / f"{stem}.json").write_text(json.dumps({"summary": summary, "timeline": shown.to_dict()}, default=float))
    note = overhead_note(summary.get("ms_plain"), summary.get("ms_traced")).removeprefix("; ")
    viz.write_page([simres.timeline, shown], out / f"{stem}.html", title=title, subtitle=note)
    viz.write_chrome_trace([shown], out / f"{stem}_perfetto.json")


def _warn_overflow(res: dict, console) -> None:
    if res["overflow"]:
        console.print(f"[red]{len(res['overflow'])} trace slots filled up (events lost): pass --events[/red]")


def print_kpis(summary: dict, console) -> None:
    from rich.table import Table
    t = Table(title=f"step {summary['step']} at {'x'.join(map(str, summary['size']))}: measured vs simulated")
    t.add_column("KPI")
    t.add_column("measured", justify="right")
    t.add_column("simulated" + (" (fitted to this trace)" if summary.get("sim_calibrated") else " (defaults)"),
                 justify="right")
    km, ks = summary["kpis_measured"], summary.get("kpis_simulated", {})
    for key in ("tensor_core_busy", "tensor_core_busy_steady", "fill_ns", "drain_ns", "makespan_ns"):
        fm = km.get(key)
        fs = ks.get(key)
        fmt = (lambda v: f"{v:.3f}") if "busy" in key else (lambda v: f"{v / 1000:.1f} us")
        t.add_row(key, fmt(fm) if isinstance(fm, (int, float)) else "-", fmt(fs) if isinstance(fs, (int, float)) else "-")
    console.print(t)
    console.print(f"traced kernel {summary['ms_traced']:.4f} ms vs untraced {summary['ms_plain']:.4f} ms "
                  f"(overhead {summary['trace_overhead'] * 100:+.1f}%); output "
                  f"{'correct' if summary['correct'] else 'WRONG'}")
    for line in summary.get("story", []):
        console.print(line, markup=False, highlight=False)


ATTN_FLAGS = (("head_dim", "--head-dim"), ("seq_len", "--seq-len"), ("causal", "--causal"))


def check_attention_args(args) -> None:
    """trace's flags: --attention takes --head-dim, --seq-len, --causal, --events (not --step or
    --size), and those three need --attention; a head dim the step lacks is refused. One
    CliError line each, before any work."""
    if args.attention is None:
        given = [flag for name, flag in ATTN_FLAGS if getattr(args, name, None) not in (None, False)]
        if given:
            raise doors.CliError(f"{', '.join(given)} {'is' if len(given) == 1 else 'are'} for an attention trace: "
                                 "add --attention A2..A5")
        return
    given = [flag for name, flag in (("step", "--step"), ("size", "--size"), ("ctas", "--ctas"))
             if getattr(args, name, None) is not None]
    if given:
        raise doors.CliError(f"--attention traces an attention step: give it without {', '.join(given)} (it takes "
                             "--head-dim, --seq-len, --causal, --events, --out-dir)")
    from ..families.attention import get
    from ..families.common import ConfigError
    try:
        get(args.attention, args.head_dim or 128)
    except ConfigError as e:
        raise doors.CliError(str(e)) from None


def attention_trace_command(args, console) -> int:
    """``gemm-ladder trace --attention STEP``: the traced build on about one wave of tiles, its
    timeline (the CTAs of block 0's SM) beside the attention model's for the same step and
    shape, the KPIs of both and the makespans' ratio; the records, the page, the Perfetto
    trace and a JSON summary under the output folder."""
    from ..choreography import attention_trace as at
    from ..choreography.heldout import clock_of
    from ..choreography.sim import attention as sim_attn
    key, D = args.attention, args.head_dim or 128
    S, causal = args.seq_len or at.TRACE_SEQ_LEN, bool(args.causal)
    st = at.step_of(key, D)
    res = at.measure_attention(key, D, S, causal, events=args.events, reps=getattr(args, "reps", None) or 20)
    meta = {"D": D, "S": S, "causal": causal, "B": res["B"], "H": res["H"]}
    full = at.attention_timeline(res["records"], st, meta)
    km = at.measured_kpis(full, st, S)
    simres = sim_attn.simulate_attention(key, head_dim=D, seq_len=S)
    shown_ids = at.shown_blocks(res["records"], simres.params.ctas_per_sm)
    shown = at.attention_timeline(res["records"], st, meta, ctas=shown_ids,
                                  title=f"attention {key} (measured, D {D}, S {S}{', causal' if causal else ''})")
    ks = {k: v for k, v in simres.kpis.items() if not isinstance(v, (dict, list))}
    # causal tiles differ in length: block 0 has the longest (all keys), the one the model draws
    mk_meas = km["makespan_ns_max"] if causal else km["makespan_ns"]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"trace_attention_{key}_d{D}_s{S}" + ("_causal" if causal else "")
    records_path = saved.write_records(out / f"{stem}_records.json.gz", key, (res["B"], res["H"], S), res["records"],
                                       fmt=saved.ATTENTION_RECORDS_FORMAT, D=D, causal=causal,
                                       num_sms=res["num_sms"], ctas=res["blocks"],
                                       events_per_slot=res["events_per_slot"], correct=res["correct"],
                                       ms_plain=res["ms_plain"], ms_traced=res["ms_traced"])
    summary = {"step": key, "D": D, "S": S, "causal": causal, "B": res["B"], "H": res["H"], "tiles": res["tiles"],
               "ctas": res["blocks"], "num_sms": res["num_sms"], "sm_clock_ghz": clock_of(res["records"]),
               "correct": res["correct"], "max_abs_err": res["max_abs_err"],
               "tolerance": res["tolerance"], "ms_plain": res["ms_plain"], "ms_traced": res["ms_traced"],
               "trace_overhead": res["overhead"], "events_per_slot": res["events_per_slot"],
               "slots_full": res["overflow"], "records": records_path.name, "shown_blocks": shown_ids,
               "spans_recorded": km["spans_recorded"], "kpis_measured": {k: v for k, v in km.items() if k != "per_sm"},
               "kpis_measured_per_sm": km["per_sm"], "kpis_simulated": ks,
               "makespan_measured_ns": mk_meas, "makespan_simulated_ns": ks["makespan_ns"],
               "makespan_ratio": mk_meas / ks["makespan_ns"] if ks["makespan_ns"] else None,
               "makespan_measured_is": "the longest SM's (causal)" if causal else "the median SM's",
               "simulated": "one tile of S keys on one SM, non-causal (the model has no mask)"}
    _write_outputs(out, stem, summary, shown, simres, f"attention {key}, D {D}, S {S}: simulated vs measured")
    print_attention_kpis(summary, console)
    _warn_overflow(res, console)
    console.print(f"wrote {out / stem}.html, .json, _perfetto.json and {records_path.name}")
    return 0 if res["correct"] and not res["overflow"] else 1


def print_attention_kpis(summary: dict, console) -> None:
    from rich.table import Table
    s = summary
    t = Table(title=f"attention {s['step']}, D {s['D']}, S {s['S']}{', causal' if s['causal'] else ''} "
                    f"(B {s['B']}, H {s['H']}, {s['ctas']} CTAs): measured (mean over SMs) vs simulated")
    for col, just in (("KPI", "left"), ("measured", "right"), ("simulated", "right")):
        t.add_column(col, justify=just)
    km, ks = s["kpis_measured"], s["kpis_simulated"]
    for key in ("tensor_core_busy", "tensor_core_busy_steady", "softmax_busy", "cuda_core_busy", "per_block_ns",
                "makespan_ns", "tflops_steady"):
        fmt = ((lambda v: f"{v:.3f}") if "busy" in key else (lambda v: f"{v:.0f}") if key == "tflops_steady"
               else (lambda v: f"{v / 1000:.2f} us"))
        t.add_row(key, *(fmt(v) if isinstance(v, (int, float)) else "-" for v in (km.get(key), ks.get(key))))
    console.print(t)
    ratio = f"{s['makespan_ratio']:.2f}" if s["makespan_ratio"] else "-"
    console.print(f"makespan measured ({s['makespan_measured_is']}) / simulated: {ratio}")
    err = f"{s['max_abs_err']:.2e}" if s["max_abs_err"] is not None else "non-finite"
    console.print(f"traced kernel {s['ms_traced']:.4f} ms vs untraced {s['ms_plain']:.4f} ms "
                  f"(overhead {s['trace_overhead'] * 100:+.1f}%); output "
                  f"{'correct' if s['correct'] else 'WRONG'} (max |error| {err}, tolerance {s['tolerance']:.2e})")
    if not s["spans_recorded"]:
        console.print(s["kpis_measured"]["note"])
