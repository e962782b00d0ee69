"""The attention steps (A2-A5) in the simulator: run one SM's CTAs through a tile, the KPIs
(tensor-core busy, softmax busy), the predicted TFLOP/s of a benchmark case, and the
comparison of those predictions with a recorded benchmark.

The model is not fitted to any attention measurement: its rates come from the H200's datasheet
peak and stated assumptions (:mod:`.attn_params`), its loop latencies from the GEMM model's
calibration on a traced GEMM. :func:`compare_with_record` reads a record only to put the
prediction beside it."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from ...cuda.device import H200
from ..timeline import Span, Timeline, kpis, lane_cta, merge_intervals
from .attn_params import (ATTN_STEPS, ATTN_WHAT_IFS, DEFAULT_SEQ_LEN, SOFTMAX_NS_PER_ELEM, AttnParams, get_attn_what_if,
                          params_for_attention)
from .attn_roles import EMPTY, FULL, AttnEngine, consumer, producer, team
from .run import SimResult

RECORD_TOKENS = 16384  # the record's cases: 16384 tokens per call (B = 16384 // S) ...
RECORD_HIDDEN = 2048   # ... and hidden 2048 (H = 2048 // D)


def _make_barriers(e: AttnEngine) -> None:
    """The kernels' barriers, with their init counts and arrivers (gl_pipeline.cuh's Pipeline
    and OrderedBarrier, attn_warpspec.cuh's WsTiles::init, attn_a2_fused.cu)."""
    p = e.p
    for c in range(p.ctas_per_sm if p.lockstep else 1):
        if p.lockstep:
            team_lane = [e.lane(c, "team")]
            e.make_bar(c, "q_full", 0, 1, team_lane)
            for s in range(p.depth):
                e.make_bar(c, "kv_full", s, 1, team_lane)
            continue
        prod = [e.lane(c, "producer")]
        cons = [e.lane(c, f"consumer{i}") for i in range(p.consumers)]
        warps = p.warps_per_consumer * p.consumers
        e.make_bar(c, "q_full", 0, 1, prod)
        e.make_bar(c, "q_empty", 0, warps, cons)
        for ring in ("K", "V"):
            for s in range(p.depth):
                e.make_bar(c, FULL[ring], s, 1, prod)
                e.make_bar(c, EMPTY[ring], s, warps, cons)
        if p.pingpong:
            for i in range(p.consumers):
                prev = [cons[(i - 1) % p.consumers]]  # the consumer before passes the turn
                e.make_bar(c, "turn", i, p.warps_per_consumer, cons)
                e.arrivers[(c, "turn", i)] = prev


def _lanes(e: AttnEngine) -> list[str]:
    p = e.p
    if p.lockstep:
        return [ln for c in range(p.ctas_per_sm) for ln in (e.lane(c, "team"), e.lane(c, "tma"))]
    return [e.lane(0, "producer"), *(e.lane(0, f"consumer{i}") for i in range(p.consumers)), e.lane(0, "tma")]


def simulate_attention(params: AttnParams | str = "A4", what_if: str | None = None, *, head_dim: int = 128,
                       seq_len: int | None = None, title: str | None = None, **overrides: Any) -> SimResult:
    """Run one SM through one tile per CTA of attention step ``params`` (an :class:`AttnParams`, or
    a step A2..A5 whose model :func:`params_for_attention` gives at ``head_dim`` and ``seq_len``);
    ``overrides`` (None values ignored) replace fields. Never hangs: a what-if's deadlock (or a
    hazard) is the verdict, with a one-sentence explanation. ValueError for a bad step, head dim
    or value, or a what-if the step lacks the barrier of."""
    if isinstance(params, AttnParams):
        ov = {k: v for k, v in overrides.items() if v is not None}
        p = dataclasses.replace(params, **ov) if ov else params
    else:
        p = params_for_attention(params, head_dim, seq_len=seq_len, **overrides)
    w = get_attn_what_if(what_if, p.step) if what_if else None
    if w is not None and not w.modelled:
        raise ValueError(f"{what_if} changes numbers, not the schedule: the simulator has nothing to show; "
                         f"on the GPU: gemm-ladder deadlock --what-if {what_if}")
    e = AttnEngine(p, what_if)
    _make_barriers(e)
    if p.lockstep:
        for c in range(p.ctas_per_sm):
            e.spawn(e.lane(c, "team"), team(e, c))
    else:
        e.spawn(e.lane(0, "producer"), producer(e, 0))
        for i in range(p.consumers):
            e.spawn(e.lane(0, f"consumer{i}"), consumer(e, 0, i))
    e.run()
    if e.verdict == "early_release":  # close the waits open when the simulation stopped
        for pr in e.procs:
            if pr.blocked is not None:
                b, parity, t0, label = pr.blocked
                e.spans.append(Span(pr.lane, "wait", t0, e.now, stage=b.stage, phase=parity, barrier=b.name,
                                    cta=lane_cta(pr.lane), label=f"{label} (simulation stopped)"))
    e.spans.sort(key=lambda s: (s.start, s.end, s.lane))
    if title is None:
        title = p.title + (f" - what-if {what_if}" if what_if else "")
    barriers = sorted({(name, b.count, len(set(e.arrivers.get((b.cta, name), []))))
                       for (c, name, s), b in e.bars.items()})
    meta = dict(
        family="attention", key=p.step, style="lockstep" if p.lockstep else "warp-specialized",
        depth=p.depth, blocks=p.blocks, tiles_per_cta=1, tile=[p.bm, p.bn, p.head_dim],
        num_ctas=p.ctas_per_sm if p.lockstep else 1, ctas_per_sm=p.ctas_per_sm if p.lockstep else 1,
        num_consumers=p.consumers, pingpong=p.pingpong, params=p.to_dict(),
        what_if=what_if, what_if_text=w.text if w else "", why=w.why if w else "",
        verdict=e.verdict, explanation=e.explanation, hazard_t=e.hazard_t,
        barriers=[dict(name=n, count=c, arrivers=a) for n, c, a in barriers], barrier_log=e.log,
        smem_slots=2 * p.depth, slots="the K ring's stages are SMEM slots 0..D-1, the V ring's D..2D-1")
    tl = Timeline(source="sim", step=int(p.step[1:]), title=title, lanes=_lanes(e), spans=e.spans,
                  handoffs=sorted(e.handoffs, key=lambda h: (h.t_release, h.dst_lane)), meta=meta)
    k = kpis(tl)
    k.update(attention_kpis(tl, p))
    return SimResult(timeline=tl, kpis=k, verdict=e.verdict, explanation=e.explanation,
                     params=p, what_if=what_if)  # type: ignore[arg-type]


def attention_kpis(tl: Timeline, p: AttnParams) -> dict:
    """The SM's figures beside :func:`kpis`' (whose ``softmax_busy`` is a warpgroup's share of
    time on the CUDA cores, mean over warpgroups; every CTA of the model runs on one SM):
    ``cuda_core_busy`` (some warpgroup on them), ``per_block_ns`` (makespan / blocks),
    ``tflops_steady`` (the SM's rate times the H200's 132 SMs, every SM busy)."""
    spans = tl.spans
    if not spans:
        return dict(softmax_busy=0.0, cuda_core_busy=0.0, per_block_ns=0.0, tflops_steady=0.0)
    t0, t1 = min(s.start for s in spans), max(s.end for s in spans)
    mk = t1 - t0
    soft = [(s.start, s.end) for s in spans if s.kind == "softmax"]
    cores = sum(b - a for a, b in merge_intervals(soft))
    done = tl.meta.get("verdict", "ok") == "ok"
    tiles = p.ctas_per_sm if p.lockstep else 1
    return dict(
        cuda_core_busy=cores / mk if mk > 0 else 0.0,
        per_block_ns=mk / p.blocks,
        tflops_steady=(tiles * p.tile_flops / mk * H200.sms / 1e3) if done and mk > 0 else 0.0,
    )


def run_attention_what_if(name: str, step: str | None = None, head_dim: int = 128, **overrides: Any) -> SimResult:
    """One of :data:`ATTN_WHAT_IFS` on ``step`` (default: the what-if's own, A4)."""
    w = get_attn_what_if(name)
    return simulate_attention(step or w.default_step, what_if=name, head_dim=head_dim, **overrides)


# ---- predictions ---------------------------------------------------------------------------

def grid_tflops(p: AttnParams, makespan_ns: float, seq_len: int = DEFAULT_SEQ_LEN, *, tokens: int = RECORD_TOKENS,
                hidden: int = RECORD_HIDDEN, num_sms: int = H200.sms) -> dict:
    """A non-causal benchmark case's TFLOP/s from one simulated tile (the record's cases: B =
    tokens // S, H = hidden // D): the grid of every tile runs in waves of num_sms x CTAs-per-SM
    tiles, each as long as the simulated tile (``makespan_ns``). FLOPs are the benchmark's
    4 B H S^2 D."""
    B, H = max(1, tokens // seq_len), max(1, hidden // p.head_dim)
    tiles = -(-seq_len // p.bm) * H * B
    waves = -(-tiles // (num_sms * p.ctas_per_sm))
    flops = 4 * B * H * seq_len * seq_len * p.head_dim
    return dict(tiles=tiles, waves=waves, tflops=flops / (waves * makespan_ns) / 1e3 if makespan_ns > 0 else 0.0)


def predict(step: str, head_dim: int = 128, seq_len: int = DEFAULT_SEQ_LEN, **overrides: Any) -> dict:
    """The model's figures and TFLOP/s (:func:`grid_tflops`) for step ``step`` at ``head_dim``, one
    tile of ``seq_len`` keys (ceil(S / BN) blocks) per CTA."""
    p = params_for_attention(step, head_dim, seq_len=seq_len, **overrides)
    r = simulate_attention(p)
    if r.verdict != "ok":
        raise ValueError(f"{step} at D {head_dim}: {r.verdict}: {r.explanation}")
    mk = r.kpis["makespan_ns"]
    return dict(step=step, D=head_dim, S=seq_len, bn=p.bn, bm=p.bm, blocks=p.blocks, ctas_per_sm=p.ctas_per_sm,
                makespan_ns=mk, per_block_ns=mk / p.blocks, tensor_core_busy=r.kpis["tensor_core_busy"],
                softmax_busy=r.kpis["softmax_busy"], tflops_steady=r.kpis["tflops_steady"],
                **grid_tflops(p, mk, seq_len))


def predictions(head_dims: tuple[int, ...] = (64, 128, 256), seq_len: int = DEFAULT_SEQ_LEN,
                **overrides: Any) -> list[dict]:
    return [predict(st, d, seq_len, **overrides) for d in head_dims for st in ATTN_STEPS]


GAINS = (("A3", "A2"), ("A4", "A3"), ("A5", "A4"))


def gain_ratios(tflops: dict[str, float]) -> dict[str, float]:
    """{"A3/A2": x, "A4/A3": y, "A5/A4": z} from {step: TFLOP/s}."""
    return {f"{a}/{b}": tflops[a] / tflops[b] for a, b in GAINS if tflops.get(a) and tflops.get(b)}


def read_record(path: str | Path) -> list[dict]:
    """The rows of a `gemm-ladder bench --attention` record (step, D, S, causal, dtype, tflops,
    and the SM clock sampled during the case)."""
    try:
        d = json.loads(Path(path).read_text())
        rows = d["rows"] if isinstance(d, dict) else d
        return [dict(step=r["step"], D=int(r["D"]), S=int(r["S"]), causal=bool(r["causal"]), dtype=r["dtype"],
                     tflops=float(r["tflops"]), ok=r.get("ok", True),
                     sm_clock_mhz=(r.get("gpu") or {}).get("sm_clock_mhz")) for r in rows]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"cannot read the attention record {path}: {e}") from None


def compare_with_record(path: str | Path, head_dim: int = 128, seq_len: int = DEFAULT_SEQ_LEN,
                        dtype: str = "float16", **overrides: Any) -> dict:
    """Predicted against measured per step (non-causal ``dtype`` at ``head_dim``, ``seq_len``),
    and the gain ratios A3/A2, A4/A3, A5/A4 of both. The record is read for the comparison only:
    nothing of it goes into the model."""
    rec = {r["step"]: r for r in read_record(path)
           if r["D"] == head_dim and r["S"] == seq_len and not r["causal"] and r["dtype"] == dtype and r["ok"]}
    rows = []
    for st in ATTN_STEPS:
        pr = predict(st, head_dim, seq_len, **overrides)
        m = rec.get(st)
        rows.append(dict(pr, measured=m["tflops"] if m else None, sm_clock_mhz=m["sm_clock_mhz"] if m else None,
                         error=(pr["tflops"] / m["tflops"] - 1) if m else None))
    pred = gain_ratios({r["step"]: r["tflops"] for r in rows})
    meas = gain_ratios({r["step"]: r["measured"] for r in rows if r["measured"]})
    return dict(head_dim=head_dim, seq_len=seq_len, dtype=dtype, rows=rows,
                ratios=[dict(ratio=k, predicted=v, measured=meas.get(k)) for k, v in pred.items()])


def format_comparison(cmp: dict) -> str:
    """The comparison as a markdown table (predicted, measured, error; then the ratios)."""
    out = [f"attention, D {cmp['head_dim']}, S {cmp['seq_len']}, {cmp['dtype']}, non-causal: the model's "
           "prediction (not fitted) against the record", "",
           "| step | BN | blocks | per block (model) | TC busy (model) | softmax busy (model) | predicted TFLOP/s "
           "| measured TFLOP/s | predicted / measured | SM clock (record) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in cmp["rows"]:
        meas = f"{r['measured']:.0f}" if r["measured"] else "-"
        err = f"{r['error']:+.0%}" if r["error"] is not None else "-"
        clk = f"{r['sm_clock_mhz']:.0f} MHz" if r["sm_clock_mhz"] else "-"
        out.append(f"| {r['step']} | {r['bn']} | {r['blocks']} | {r['per_block_ns']:.0f} ns | "
                   f"{r['tensor_core_busy']:.0%} | {r['softmax_busy']:.0%} | {r['tflops']:.0f} | {meas} | {err} "
                   f"| {clk} |")
    out += ["", "| gain | predicted | measured |", "|---|---:|---:|"]
    for g in cmp["ratios"]:
        m = f"{g['measured']:.2f}" if g["measured"] else "-"
        out.append(f"| {g['ratio']} | {g['predicted']:.2f} | {m} |")
    return "\n".join(out)


__all__ = ["AttnParams", "ATTN_STEPS", "ATTN_WHAT_IFS", "params_for_attention", "simulate_attention",
           "run_attention_what_if", "attention_kpis", "grid_tflops", "predict", "predictions", "gain_ratios",
           "read_record", "compare_with_record", "format_comparison", "SOFTMAX_NS_PER_ELEM", "DEFAULT_SEQ_LEN"]
