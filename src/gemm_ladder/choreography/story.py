"""One account of a measured trace, told the same way by its page and by ``gemm-ladder
calibrate``: what was measured (and whether the traced build is the kernel), the model
*fitted* to this trace (in sample: how well the model can describe it), and the model
*predicting* it from timings fitted elsewhere (out of sample: the model's defaults, or the
timings fitted on another trace), each named with where its timings come from."""
from __future__ import annotations

from pathlib import Path

from . import viz
from .heldout import Fit, OVERHEAD_TOLERANCE, key_of, timings_at
from .sim.calibrate import busiest_makespan, calibration_and_run, simulate_like
from .sim.run import SimResult
from .timeline import Timeline, kpis

DEFAULTS_SOURCE = ("the model's defaults (docs/simulator.md: consumer gap, issue and wait fitted on the 7:d4 "
                   "sample at 1.83 GHz, wgmma time the datasheet's peak, the rest estimates)")


def measured_line(tl: Timeline) -> str:
    """What was measured: the step, size, CTAs, the busiest CTA's makespan and busy, and the
    traced build's time against the kernel's where the trace carries them."""
    m = tl.meta or {}
    size = " at " + "x".join(str(m[k]) for k in ("M", "N", "K")) if "M" in m else ""
    ctas = m.get("shown_ctas")
    where = f", CTAs {ctas[0]}-{ctas[-1]}" if ctas else ""
    line = (f"measured: step {key_of(tl)}{size}{where}: busiest CTA {busiest_makespan(tl) / 1000:.1f} us, "
            f"busy {kpis(tl)['tensor_core_busy']:.3f}")
    if m.get("sm_clock_ghz"):
        line += f", SM clock {m['sm_clock_ghz']:.2f} GHz"
    return line + overhead_note(m.get("ms_plain"), m.get("ms_traced"))


def overhead_note(ms_plain: float | None, ms_traced: float | None) -> str:
    """The traced build beside the untraced one, and, past the tolerance, that the timeline is not the kernel's."""
    if not ms_plain or not ms_traced:
        return ""
    over = ms_traced / ms_plain - 1.0
    verdict = ("the timeline is the kernel's" if over <= OVERHEAD_TOLERANCE else
               f"more than {OVERHEAD_TOLERANCE:.0%}: this timeline is the traced build's, not the kernel's")
    return (f"; traced build {ms_traced * 1e3:.1f} us against the untraced kernel's {ms_plain * 1e3:.1f} us "
            f"({over:+.1%}: {verdict})")


def fitted_line(c: dict) -> str:
    """The model fitted to this trace (check_calibration's result), with its fitted timings."""
    f = c["fitted"]
    return (f"fitted to this trace: {c['simulated_makespan_ns'] / 1000:.1f} us ({c['error']:+.1%}, "
            f"{'within' if c['within'] else 'OUTSIDE'} {c['tolerance']:.0%}), busy {c['busy_simulated']:.3f}; "
            f"step {c['step']} depth {c['depth']}, {c['tiles_per_cta']} tiles x {c['k_tiles']} k-tiles; fitted mma "
            f"{f['mma_ns']:.0f} ns, consumer gap {f['consumer_gap_ns']:.0f} ns (issue {f['mma_issue_ns']:.0f}, wait "
            f"{f['mma_wait_ns']:.0f}), load {f['load_latency_ns']:.0f} ns (first {f['first_load_latency_ns'] or 0:.0f}), "
            f"set-up {f['setup_ns']:.0f} ns, epilogue {f['epilogue_ns']:.0f} ns, store {f['store_latency_ns']:.0f} ns")


def predicted_line(p: dict) -> str:
    return (f"predicted from {p['source']}: {p['makespan_ns'] / 1000:.1f} us ({p['error']:+.1%}), "
            f"busy {p['busy']:.3f}")


def predicted(measured: Timeline, fit: Fit | None = None) -> tuple[dict, SimResult]:
    """The model of the measured configuration with timings it was not fitted to: the fit's
    (at this trace's SM clock when the trace carries it, see heldout), or the model's defaults."""
    if fit is None:
        source, short, timings = DEFAULTS_SOURCE, "the model's defaults", {}
    else:
        source, short = f"the timings fitted on {fit.label}", f"the fit on {fit.run.label}"
        timings = timings_at(fit, (measured.meta or {}).get("sm_clock_ghz"))
    res = simulate_like(measured, fit=False, **timings)
    res.timeline.title = res.timeline.title.replace("(simulated, the model's defaults)",
                                                    f"(simulated, predicted from {short})")
    mk = busiest_makespan(res.timeline)
    return dict(source=source, makespan_ns=mk, error=mk / busiest_makespan(measured) - 1.0,
                busy=res.kpis["tensor_core_busy"]), res


def tell(measured: Timeline, fit: Fit | None = None, tolerance: float | None = None) -> dict:
    """The whole account: check_calibration's dict, the prediction's, their simulations and the lines."""
    kw = {} if tolerance is None else {"tolerance": tolerance}
    c, fitted = calibration_and_run(measured, **kw)
    p, pred = predicted(measured, fit)
    lines = [measured_line(measured), fitted_line(c), predicted_line(p)]
    return dict(calibration=c, prediction=p, fitted=fitted, predicted=pred, lines=lines)


def write_page(measured: Timeline, story: dict, path: str | Path, title: str = "") -> Path:
    """The page: the fitted model beside the measured timeline (shown first), the prediction
    a click away; its subtitle is the account's lines, as calibrate prints them."""
    title = title or f"step {key_of(measured)}: simulated vs measured"
    return viz.write_page([story["fitted"].timeline, measured, story["predicted"].timeline], path, title=title,
                          pair=(0, 1), subtitle=" | ".join(story["lines"]))
