"""``gemm-ladder trace``: a measured in-kernel timeline of a step beside the simulator's (with
``--attention``: of an attention step beside the attention model's); ``gemm-ladder calibrate``:
the simulator calibrated to saved traces, checked against them (no GPU)."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..choreography import saved, sim, trace, viz
from ..choreography.sim.calibrate import MAKESPAN_TOLERANCE, check_calibration
from ..choreography.timeline import kpis
from ..families.keys import get_step
from . import doors


def trace_command(args, console) -> int:
    st = get_step(args.step)
    if not st.uses_tma:
        console.print(f"[red]step {st.key} has no tracing hooks (the TMA steps have)[/red]")
        return 2
    (M, N, K) = args.size[0]
    res = trace.measure(st, M, N, K, events=args.events)
    size_meta = {"M": M, "N": N, "K": K}
    full = trace.to_timeline(res["records"], st, meta=size_meta)
    shown_ctas = list(range(max(2, st.cluster_m)))   # the first cluster (or CTAs 0 and 1)
    shown = trace.to_timeline(res["records"], st, ctas=shown_ctas, meta=dict(size_meta, shown_ctas=shown_ctas))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"trace_step{st.key.replace(':', '_')}"
    records_path = saved.write_records(out / f"{stem}_records.json.gz", st.key, (M, N, K), res["records"],
                                       num_sms=res["num_sms"], ctas=res["blocks"],
                                       events_per_slot=res["events_per_slot"], correct=res["correct"],
                                       ms_plain=res["ms_plain"], ms_traced=res["ms_traced"])
    summary = {"step": st.key, "size": [M, N, K], "correct": res["correct"], "rel_err": res["rel_err"],
               "ms_plain": res["ms_plain"], "ms_traced": res["ms_traced"], "trace_overhead": res["overhead"],
               "ctas": res["blocks"], "events_per_slot": res["events_per_slot"],
               "slots_full": res["overflow"], "records": records_path.name, "kpis_measured": kpis(full)}
    try:  # the model with its timings fitted to the CTAs shown, and its makespan checked
        summary["calibration"] = check_calibration(shown)
        simres = sim.simulate_like(shown, fit=True)
        summary["sim_calibrated"] = True
    except ValueError as e:  # the measured configuration is not one the model takes
        summary["sim_calibrated"] = False
        summary["sim_fit_error"] = str(e)
        simres = sim.simulate(sim.params_for_step(st, size=(M, N, K), num_sms=res["num_sms"]))
    summary["kpis_simulated"] = simres.kpis
    _write_outputs(out, stem, summary, shown, simres, f"step {st.key}: simulated vs measured")
    print_kpis(summary, console)
    _warn_overflow(res, console)
    console.print(f"records: {records_path} (check the model on them: gemm-ladder calibrate {records_path})")
    return 0 if res["correct"] and not res["overflow"] else 1


def _write_outputs(out, stem: str, summary: dict, shown, simres, title: str) -> None:
    """The summary and drawn timeline (JSON), the page (simulated beside measured), the Perfetto trace."""
    (out / f"{stem}.json").write_text(json.dumps({"summary": summary, "timeline": shown.to_dict()}, default=float))
    viz.write_page([simres.timeline, shown], out / f"{stem}.html", title=title)
    viz.write_chrome_trace([shown], out / f"{stem}_perfetto.json")


def _warn_overflow(res: dict, console) -> None:
    if res["overflow"]:
        console.print(f"[red]{len(res['overflow'])} trace slots filled up (events lost): pass --events[/red]")


def print_kpis(summary: dict, console) -> None:
    from rich.table import Table
    t = Table(title=f"step {summary['step']} at {'x'.join(map(str, summary['size']))}: measured vs simulated")
    t.add_column("KPI")
    t.add_column("measured", justify="right")
    t.add_column("simulated" + (" (fitted to this trace)" if summary.get("sim_calibrated") else ""),
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
    if "calibration" in summary:
        console.print(calibration_line("this run", summary["calibration"]))


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
    given = [flag for name, flag in (("step", "--step"), ("size", "--size")) if getattr(args, name, None) is not None]
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
    from ..choreography.sim import attention as sim_attn
    key, D = args.attention, args.head_dim or 128
    S, causal = args.seq_len or at.TRACE_SEQ_LEN, bool(args.causal)
    st = at.step_of(key, D)
    res = at.measure_attention(key, D, S, causal, events=args.events)
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
               "ctas": res["blocks"], "correct": res["correct"], "max_abs_err": res["max_abs_err"],
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


def calibration_line(source: str, c: dict) -> str:
    f = c["fitted"]
    return (f"{source}: step {c['step']} depth {c['depth']}, {c['tiles_per_cta']} tiles x {c['k_tiles']} k-tiles: "
            f"busiest CTA measured {c['measured_makespan_ns'] / 1000:.1f} us, calibrated model "
            f"{c['simulated_makespan_ns'] / 1000:.1f} us ({c['error']:+.1%}, "
            f"{'within' if c['within'] else 'OUTSIDE'} {c['tolerance']:.0%}); busy {c['busy_measured']:.3f} "
            f"measured vs {c['busy_simulated']:.3f}; fitted mma {f['mma_ns']:.0f} ns, consumer gap "
            f"{f['consumer_gap_ns']:.0f} ns (issue {f['mma_issue_ns']:.0f}, wait {f['mma_wait_ns']:.0f}), "
            f"load {f['load_latency_ns']:.0f} ns, epilogue "
            f"{f['epilogue_ns']:.0f} ns, store {f['store_latency_ns']:.0f} ns")


def calibrate_command(args) -> int:
    """Check the calibrated simulator against each saved trace; exit 1 if one is outside
    the tolerance, 2 if a file cannot be read (before any is checked)."""
    json_path = doors.out_file(args.json) if args.json is not None else None
    traces = []
    for path in args.files:
        doors.input_file(path)
        try:
            traces.append((path, saved.measured_timelines(path, ctas=list(range(args.ctas)) if args.ctas else None)))
        except OSError as e:
            raise doors.CliError(f"cannot read {path}: {e.strerror or e}") from None
        except (ValueError, KeyError) as e:  # the reader's messages start with the path
            why = str(e).removeprefix(f"{path}: ")
            raise doors.CliError(f"{path}: not a measured trace `gemm-ladder trace` wrote ({why})") from None
    ok, rows = True, []
    for path, tls in traces:
        for tl in tls:
            c = check_calibration(tl, tolerance=args.tolerance)
            rows.append(dict(c, file=str(path)))
            print(calibration_line(str(path), c))
            ok = ok and c["within"]
    if json_path:
        doors.write_text(json_path, json.dumps(rows, indent=1, default=float))
    return 0 if ok and rows else 1


def add_calibrate_parser(sub) -> argparse.ArgumentParser:
    c = sub.add_parser("calibrate", help="check the calibrated simulator against saved traces (no GPU)",
                       description="Fit the simulator's timings to each saved measured trace (the "
                                   "*_records.json.gz, trace JSON or page that `gemm-ladder trace` wrote), "
                                   "simulate the measured configuration and compare the busiest CTA's "
                                   "makespan.")
    c.add_argument("files", nargs="+", help="saved traces: *_records.json.gz, trace JSON, page or *_perfetto.json")
    c.add_argument("--tolerance", type=doors.number(float, 0, 100, low_open=True), default=MAKESPAN_TOLERANCE,
                   help=f"largest relative makespan error accepted (default {MAKESPAN_TOLERANCE})")
    c.add_argument("--ctas", type=doors.number(int, 1, 1 << 20), help="records files: decode only the first N CTAs "
                                                                    "(default all; the first CTAs compute the most tiles)")
    c.add_argument("--json", metavar="FILE", help="also write the results here")
    c.set_defaults(fn=calibrate_command)
    return c
