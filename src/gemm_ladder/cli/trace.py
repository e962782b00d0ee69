"""``gemm-ladder trace``: a measured in-kernel timeline of a step beside the simulator's."""
from __future__ import annotations

import json
from pathlib import Path

from ..choreography import sim, trace, viz
from ..choreography.timeline import kpis
from ..runtime.steps import get_step


def trace_command(args, console) -> int:
    st = get_step(args.step)
    if not st.uses_tma:
        console.print(f"[red]step {st.key} has no tracing hooks (the TMA steps have)[/red]")
        return 2
    (M, N, K) = args.size[0]
    res = trace.measure(st, M, N, K, events=args.events)
    full = trace.to_timeline(res["records"], st, meta={"M": M, "N": N, "K": K})
    shown = trace.to_timeline(res["records"], st, ctas=[0, 1], meta={"M": M, "N": N, "K": K, "shown_ctas": [0, 1]})
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    summary = {"step": st.key, "size": [M, N, K], "correct": res["correct"], "rel_err": res["rel_err"],
               "ms_plain": res["ms_plain"], "ms_traced": res["ms_traced"], "trace_overhead": res["overhead"],
               "kpis_measured": kpis(full)}
    try:  # the model with its mma time and load latency fitted to this measurement
        simres = sim.simulate_like(shown, fit=True)
        summary["sim_calibrated"] = True
    except ValueError as e:  # the measured configuration is not one the model takes
        summary["sim_calibrated"] = False
        summary["sim_fit_error"] = str(e)
        simres = sim.simulate(sim.params_for_step(st, size=(M, N, K), num_sms=res["num_sms"]))
    summary["kpis_simulated"] = simres.kpis
    stem = f"trace_step{st.key.replace(':', '_')}"
    (out / f"{stem}.json").write_text(json.dumps({"summary": summary, "timeline": shown.to_dict()}, default=float))
    viz.write_page([simres.timeline, shown], out / f"{stem}.html", title=f"step {st.key}: simulated vs measured")
    viz.write_chrome_trace([shown], out / f"{stem}_perfetto.json")
    print_kpis(summary, console)
    return 0 if res["correct"] else 1


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
