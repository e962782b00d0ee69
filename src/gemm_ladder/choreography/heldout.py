"""The simulator held out: its timings fitted once, on one measured trace (by default step 7:d4
at 4096³), then used unchanged to predict the makespan and tensor-core busy of other traced
steps and sizes, each beside its own measurement.

What a prediction may use: the timings fitted on that one trace (:data:`.sim.calibrate.FITTED_TIMINGS`),
the predicted step's configuration (its Step: tile, ring, consumers, cluster) and size (k-tiles,
and the busiest CTA's tiles on the launched grid), and the SM clock the predicted run ran at.
Nothing is fitted to the run it predicts.

The clock is the one input taken from the predicted run, and the reason is a mechanism:
under load the H200 runs at its power cap, and the cap sets the SM clock, which differs by
step (docs/perf-notes.md item 68: 1.52 GHz for step 9 against 1.68 GHz for steps 8 and 10 in
the same traces). A wgmma group, a consumer's loop, the epilogue and the set-up are counted
in SM cycles, so those timings are fitted in cycles and predicted at the run's clock, which
the trace measures itself (clock64 against %globaltimer). The memory side (load and store
latencies) is held in ns. Each row also gives the prediction at the fitted trace's clock,
so what the clock explains is visible.

Inputs are what ``gemm-ladder trace`` writes: its summary JSON (``trace_step<KEY>[_<size>].json``,
``trace_attention_<STEP>_d<D>_s<S>.json``), or a records file or a page it wrote.
"""
from __future__ import annotations

import dataclasses
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from ..families.keys import get_step
from . import saved
from .sim.attention import simulate_attention
from .sim.attn_params import BLOCK_CUDA_CLOCKS, CLOCK_GHZ, params_for_attention
from .sim.calibrate import FITTED_TIMINGS, MAKESPAN_TOLERANCE, busiest_makespan, calibrate
from .sim.params import DEFAULT_NUM_SMS, SimParams, busiest_cta_tiles, params_for_step
from .sim.run import simulate
from .timeline import Timeline, kpis

BUSY_TOLERANCE = 0.05      # the issue's target for the tensor-core busy fraction
OVERHEAD_TOLERANCE = 0.05  # a traced build at most this much slower than the kernel
# Timings counted in SM cycles (they scale with the clock); the rest of FITTED_TIMINGS in ns.
SM_TIMINGS = ("mma_ns", "consumer_gap_ns", "mma_issue_ns", "mma_wait_ns", "epilogue_ns", "setup_ns")
PEAK_KTILE_CYCLES = 2 * 128 * 128 * 64 / 4096  # a 128x128x64 k-tile at the dense fp16 peak per SM
DEFAULT_FIT_ON = "7:d4@4096"
# The attention consumers' CUDA-core time per block (BLOCK_CUDA_CLOCKS) is measured on this
# step's trace (D 128, S 4096): its row is marked fitted, A4 and A5 stay predicted.
ATTN_FIT_STEP = "A3"
# In a 2-CTA cluster a consumer's release of a stage goes through the cluster (mapa +
# arrive.release.cluster on both CTAs' empty barriers), and the producer resumes later than
# after a CTA-local release: 194 SM cycles after the last release stamped on step 8's trace
# at 4096³ against 30 on 7:d4's (sim.calibrate.release_handoff, medians). The difference is
# modelled (SimParams.cluster_release_ns at the run's clock); step 8 at 4096³ is marked fitted.
CLUSTER_RELEASE_CLOCKS = 164.0
CLUSTER_FIT_ON = "8@4096"


@dataclass
class TracedRun:
    """One traced run, as ``gemm-ladder trace`` saved it. ``size`` is (M, N, K), or for an
    attention step (D, S); ``timeline`` the measured CTAs the page draws (GEMM), ``measured``
    an attention summary's measured figures."""

    path: str
    step: str
    size: tuple[int, ...]
    timeline: Timeline | None = None
    ms_plain: float | None = None
    ms_traced: float | None = None
    num_sms: int | None = None
    ctas: int | None = None
    sm_clock_ghz: float | None = None
    attention: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        if self.attention:
            return f"{self.step} D{self.size[0]} S{self.size[1]}"
        M, N, K = self.size
        return f"{self.step}@{M}" if M == N == K else f"{self.step}@{M}x{N}x{K}"

    @property
    def overhead(self) -> float | None:
        return self.ms_traced / self.ms_plain - 1.0 if self.ms_plain and self.ms_traced else None

    def measured_makespan(self) -> float:
        if self.attention:
            return self.attention["makespan_ns"]
        return busiest_makespan(self.timeline)

    def measured_busy(self) -> float | None:
        if self.attention:
            return self.attention.get("busy")
        return kpis(self.timeline)["tensor_core_busy"]


def clock_of(records: list[dict]) -> float | None:
    """The SM clock (GHz) a traced run ran at: median over its recorders' clock64 / %globaltimer."""
    scales = [r["ns_per_clock"] for r in records if r.get("ns_per_clock")]
    return 1.0 / statistics.median(scales) if scales else None


def key_of(tl: Timeline) -> str:
    """The step key a measured timeline names: its meta's, or (pages drawn before the key was
    kept) its step number with the depth its meta gives."""
    m = tl.meta or {}
    if m.get("key"):
        return m["key"]
    key = str(tl.step)
    depth = m.get("depth")
    return f"{key}:d{depth}" if depth and depth != get_step(key).depth else key


def read_run(path: str | Path) -> TracedRun | None:
    """A run from one file `gemm-ladder trace` wrote (None for its other files: Perfetto traces,
    pages of an attention step)."""
    path = Path(path)
    name = path.name
    if name.endswith("_perfetto.json"):
        return None
    if name.endswith(".json") and not name.endswith("_records.json"):
        doc = json.loads(path.read_text())
        s = doc.get("summary") if isinstance(doc, dict) else None
        if not isinstance(s, dict) or "step" not in s:
            return None
        common = dict(path=str(path), step=s["step"], ms_plain=s.get("ms_plain"), ms_traced=s.get("ms_traced"),
                      num_sms=s.get("num_sms"), ctas=s.get("ctas"), sm_clock_ghz=s.get("sm_clock_ghz"))
        if "D" in s:  # an attention step's summary
            busy = (s.get("kpis_measured") or {}).get("tensor_core_busy")
            return TracedRun(size=(s["D"], s["S"]), attention=dict(makespan_ns=s["makespan_measured_ns"], busy=busy,
                                                                    causal=s.get("causal", False)), **common)
        return TracedRun(size=tuple(s["size"]), timeline=Timeline.from_dict(doc["timeline"]), **common)
    if name.endswith(".json.gz") and "_records" in name:
        doc = saved.read_records(path)
        if doc["format"] != saved.RECORDS_FORMAT:
            return None
        from .trace import to_timeline
        st = get_step(doc["step"])
        M, N, K = doc["size"]
        shown = list(range(max(2, st.cluster_m)))  # the CTAs the trace command draws and fits
        tl = to_timeline(doc["records"], st, ctas=shown, meta={"M": M, "N": N, "K": K})
        return TracedRun(str(path), doc["step"], (M, N, K), tl, doc.get("ms_plain"), doc.get("ms_traced"),
                         doc.get("num_sms"), doc.get("ctas"), clock_of(doc["records"]))
    if name.endswith(".html"):
        tls = saved.measured_timelines(path)
        if not tls or "M" not in tls[0].meta:
            return None
        m = tls[0].meta
        return TracedRun(str(path), key_of(tls[0]), (m["M"], m["N"], m["K"]), tls[0], sm_clock_ghz=m.get("sm_clock_ghz"))
    return None


def read_runs(paths: list[str | Path]) -> list[TracedRun]:
    """The traced runs in files and folders (a folder: every summary JSON in it and below, or
    where there is none, every records file), in the ladder's order, then by size."""
    runs = []
    for p in map(Path, paths):
        files = (sorted(p.rglob("trace_*.json")) or sorted(p.rglob("trace_*_records*.json.gz"))) if p.is_dir() else [p]
        runs += [r for r in map(read_run, files) if r is not None]
    return sorted(runs, key=_order)


def _order(run: TracedRun) -> tuple:
    """GEMM steps before attention, by step number, key and size."""
    digits = "".join(c for c in run.step.split(":")[0] if c.isdigit())
    return (bool(run.attention), int(digits or 0), run.step, run.size)


@dataclass
class Fit:
    """The timings fitted on one run (ns at that run's clock), and that clock."""

    run: TracedRun
    timings: dict[str, float]
    clock_ghz: float

    @property
    def label(self) -> str:
        return f"{self.run.label} ({Path(self.run.path).name})"


def fit(run: TracedRun) -> Fit:
    """calibrate() on one GEMM run: its FITTED_TIMINGS. The clock is the trace's own; a page
    carries none, and then the fitted wgmma time gives it (the decoder counts each group for
    at most its time at peak, so the fit is the peak rate at the run's clock)."""
    if run.attention:
        raise ValueError(f"{run.label}: the fit takes a GEMM trace (the attention model reuses the GEMM's timings)")
    p = calibrate(_gemm_params(run), run.timeline)
    timings = {k: getattr(p, k) for k in FITTED_TIMINGS}
    clock = run.sm_clock_ghz or PEAK_KTILE_CYCLES / timings["mma_ns"]
    return Fit(run, timings, clock)


def _gemm_params(run: TracedRun, **timings) -> SimParams:
    """The model of a run's step at its size: k-tiles, and the busiest CTA's tiles on the grid it launched."""
    st = get_step(run.step)
    M, N, K = run.size
    sms = run.num_sms or DEFAULT_NUM_SMS
    return params_for_step(st, size=(M, N, K), num_sms=sms,
                           tiles_per_cta=busiest_cta_tiles(st, M, N, sms, run.ctas), **timings)


def timings_at(f: Fit, clock_ghz: float | None) -> dict[str, float]:
    """The fitted timings at another SM clock: the cycle-counted ones rescaled, the memory side as fitted."""
    scale = f.clock_ghz / clock_ghz if clock_ghz else 1.0
    out = {k: (v * scale if k in SM_TIMINGS and v is not None else v) for k, v in f.timings.items()}
    out["cluster_release_ns"] = CLUSTER_RELEASE_CLOCKS / (clock_ghz or f.clock_ghz)  # cluster steps only
    return out


def predict(run: TracedRun, f: Fit, clock_ghz: float | None) -> dict:
    """The model's makespan and busy for ``run`` with the fitted timings at ``clock_ghz``."""
    t = timings_at(f, clock_ghz)
    if run.attention:
        D, S = run.size
        # the attention model's rates: the tensor core's from the fitted wgmma time, the CUDA
        # cores' (counted per clock at 1.83 GHz) at the same clock; its loop latencies the GEMM's
        clock = clock_ghz or f.clock_ghz
        p = params_for_attention(run.step, D, seq_len=S, tc_flop_per_ns=2 * 128 * 128 * 64 / t["mma_ns"],
                                 mma_issue_ns=t["mma_issue_ns"], mma_wait_ns=t["mma_wait_ns"],
                                 load_latency_ns=t["load_latency_ns"], epilogue_ns=t["epilogue_ns"])
        # the CUDA cores' work per block as measured (in cycles, at D 128 and BN 128), scaled to
        # this step's block by the rates' count of its work
        ref = params_for_attention(ATTN_FIT_STEP, 128)
        work = (p.softmax_time + p.rescale_time) / (ref.softmax_time + ref.rescale_time)
        p = dataclasses.replace(p, softmax_ns_per_elem=p.softmax_ns_per_elem * CLOCK_GHZ / clock,
                                rescale_ns_per_elem=p.rescale_ns_per_elem * CLOCK_GHZ / clock,
                                softmax_fixed_ns=p.softmax_fixed_ns * CLOCK_GHZ / clock,
                                block_cuda_ns=BLOCK_CUDA_CLOCKS * work / clock)
        res = simulate_attention(p)
        return {"makespan_ns": res.kpis["makespan_ns"], "busy": res.kpis["tensor_core_busy"]}
    res = simulate(_gemm_params(run, **t))
    return {"makespan_ns": busiest_makespan(res.timeline), "busy": res.kpis["tensor_core_busy"]}


def find_run(runs: list[TracedRun], fit_on: str) -> TracedRun:
    """The run named ``KEY@N`` (N³) or ``KEY@MxNxK``, or by its file's path or name."""
    for r in runs:
        if fit_on in (r.label, r.path, Path(r.path).name):
            return r
    raise ValueError(f"no traced run {fit_on!r} among {', '.join(r.label for r in runs) or 'none'}")


def row(run: TracedRun, f: Fit) -> dict:
    """One run predicted from the fit: both makespans and busy fractions, their errors, the
    clock, and the traced build's time beside the untraced one."""
    measured, busy = run.measured_makespan(), run.measured_busy()
    pred = predict(run, f, run.sm_clock_ghz)
    at_fit = predict(run, f, None) if run.sm_clock_ghz else pred
    err = pred["makespan_ns"] / measured - 1.0
    busy_err = pred["busy"] - busy if busy is not None else None
    return dict(step=run.step, size=list(run.size), fitted_on=f.label,
                role="fitted" if run is f.run or _attn_fitted(run) or run.label == CLUSTER_FIT_ON else "predicted", predicted_ns=pred["makespan_ns"],
                measured_ns=measured, error=err, predicted_busy=pred["busy"], measured_busy=busy,
                busy_error=busy_err, predicted_ns_at_fit_clock=at_fit["makespan_ns"],
                error_at_fit_clock=at_fit["makespan_ns"] / measured - 1.0, sm_clock_ghz=run.sm_clock_ghz,
                ms_plain=run.ms_plain, ms_traced=run.ms_traced, trace_overhead=run.overhead,
                within=abs(err) <= MAKESPAN_TOLERANCE and (busy_err is None or abs(busy_err) <= BUSY_TOLERANCE),
                source=run.path)


def _attn_fitted(run: TracedRun) -> bool:
    return bool(run.attention) and run.step == ATTN_FIT_STEP and tuple(run.size) == (128, 4096)


def held_out(runs: list[TracedRun], fit_on: str = DEFAULT_FIT_ON) -> dict:
    """Fit on the run ``fit_on`` names, predict every run (the fitted one too, marked
    ``fitted``) without refitting; the record: the fit, one row per run, and a summary
    against the targets (makespan within 15 %, busy within 0.05, traced builds within 5 %)."""
    f = fit(find_run(runs, fit_on))
    rows = [row(r, f) for r in runs]
    pred = [r for r in rows if r["role"] == "predicted"]
    overheads = [r["trace_overhead"] for r in rows if r["trace_overhead"] is not None]
    return {
        "kind": "gemm-ladder simulator held out",
        "fitted_on": dict(run=f.run.label, path=f.run.path, sm_clock_ghz=f.clock_ghz, timings_ns=f.timings,
                          attention=dict(run=f"{ATTN_FIT_STEP} D128 S4096", block_cuda_clocks=BLOCK_CUDA_CLOCKS),
                          cluster=dict(run=CLUSTER_FIT_ON, release_clocks=CLUSTER_RELEASE_CLOCKS)),
        "inputs": "the fitted timings; each predicted step's configuration and size; the SM clock each run "
                  "ran at (its trace's clock64 against %globaltimer): wgmma, loop, epilogue and set-up "
                  "timings in SM cycles, load and store latencies in ns; in a cluster, the release hand-off's extra SM "
                  "cycles measured on step 8's trace at 4096³; for attention, a consumer's "
                  "CUDA-core cycles per key block measured on A3's trace",
        "targets": dict(makespan=MAKESPAN_TOLERANCE, busy=BUSY_TOLERANCE, trace_overhead=OVERHEAD_TOLERANCE),
        "rows": rows,
        "summary": dict(predicted=len(pred), within=sum(r["within"] for r in pred),
                        worst_error=max((abs(r["error"]) for r in pred), default=None),
                        worst_busy_error=max((abs(r["busy_error"]) for r in pred if r["busy_error"] is not None),
                                             default=None),
                        worst_trace_overhead=max(overheads, default=None),
                        traced_within=sum(o <= OVERHEAD_TOLERANCE for o in overheads), traced=len(overheads)),
    }


_NOT_THE_KERNELS = ": the traced timeline is not exactly the kernel's"


def format_rows(record: dict) -> list[str]:
    """The record as text lines: the fit, then one line per run."""
    f = record["fitted_on"]
    t = f["timings_ns"]
    out = [f"fitted on {f['run']} ({f['path']}), SM clock {f['sm_clock_ghz']:.3f} GHz: "
           + ", ".join(f"{k.removesuffix('_ns')} {v:.0f}" for k, v in t.items() if v is not None) + " ns"]
    a = f.get("attention")
    if a:
        out.append(f"attention: a consumer's CUDA-core work per key block {a['block_cuda_clocks']:.0f} SM cycles, "
                   f"measured on {a['run']} (the rest from the fit above)")
    c = f.get("cluster")
    if c:
        out.append(f"cluster: a stage's release through the cluster reaches the producer {c['release_clocks']:.0f} SM "
                   f"cycles later than a CTA-local one, measured on {c['run']} against the fit's run")
    for r in record["rows"]:
        size = "x".join(map(str, r["size"]))
        clock = f"{r['sm_clock_ghz']:.2f} GHz" if r["sm_clock_ghz"] else "clock ?"
        busy = (f"busy {r['predicted_busy']:.3f} vs {r['measured_busy']:.3f}" if r["measured_busy"] is not None
                else f"busy {r['predicted_busy']:.3f}")
        traced = (f"; traced {r['ms_traced'] * 1e3:.1f} us vs untraced {r['ms_plain'] * 1e3:.1f} us "
                  f"({r['trace_overhead']:+.1%}{_NOT_THE_KERNELS if r['trace_overhead'] > OVERHEAD_TOLERANCE else ''})"
                  if r["trace_overhead"] is not None else "")
        out.append(f"{r['role']:9s} {r['step']:>6s} {size:>14s}: {r['predicted_ns'] / 1e3:8.1f} us vs measured "
                   f"{r['measured_ns'] / 1e3:8.1f} us ({r['error']:+.1%}; at the fit's clock {r['error_at_fit_clock']:+.1%}, "
                   f"{clock}); {busy}{traced}{'' if r['within'] else '  MISSES'}")
    s = record["summary"]
    out.append(f"{s['within']} of {s['predicted']} predictions within {MAKESPAN_TOLERANCE:.0%} (makespan) and "
               f"{BUSY_TOLERANCE} (busy); traced builds within {OVERHEAD_TOLERANCE:.0%} of the kernel: "
               f"{s['traced_within']} of {s['traced']}")
    return out
