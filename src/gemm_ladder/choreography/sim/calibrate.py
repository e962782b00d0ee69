"""Fitting the model's timings to a measured timeline, and simulating what it measured."""
from __future__ import annotations

import dataclasses
import statistics
from typing import Any

from ..timeline import Timeline, union_length
from .params import SimParams, params_for_step
from .run import SimResult, simulate


def _median_duration(measured: Timeline, kind: str) -> float | None:
    durations = [s.dur for s in measured.spans if s.kind == kind and s.dur > 0]
    return statistics.median(durations) if durations else None


def calibrate(params: SimParams, measured: Timeline) -> SimParams:
    """Fit the model's timing parameters to a measured :class:`Timeline`.

    * ``mma_ns``: per CTA, the union of its ``mma`` spans divided by their
      number (tensor-core time per k-tile, robust to overlapping issue->wait
      spans), median over CTAs, rescaled to a 128x128x64 k-tile.
    * ``load_latency_ns``: median ``load`` span duration, less the bandwidth
      transfer time of one piece when ``l2_bytes_per_ns`` is set.
    * ``epilogue_ns`` / ``store_latency_ns``: median ``epilogue`` / ``store``
      span durations, rescaled the same way the model scales them.

    Parameters without matching spans are left as they are.
    """
    upd: dict[str, float] = {}
    per_cta = []
    for c in sorted({s.cta for s in measured.spans}):
        mm = [s for s in measured.spans if s.cta == c and s.kind == "mma"]
        if mm:
            per_cta.append(union_length((s.start, s.end) for s in mm) / len(mm))
    scale = (params.tile_m * params.tile_n * params.tile_k) / (128 * 128 * 64)
    if per_cta:
        upd["mma_ns"] = statistics.median(per_cta) / scale
    lat = _median_duration(measured, "load")
    if lat is not None:
        upd["load_latency_ns"] = max(0.0, lat - params.transfer_ns(params.a_bytes))
    epi = _median_duration(measured, "epilogue")
    if epi is not None:
        area = (params.tile_m * params.tile_n) / (128 * 128)
        upd["epilogue_ns"] = epi * params.chunks / area
    store = _median_duration(measured, "store")
    if store is not None:
        upd["store_latency_ns"] = max(0.0, store - params.transfer_ns(params.store_chunk_bytes))
    return dataclasses.replace(params, **upd)


def simulate_like(measured: Timeline, fit: bool = True, **overrides: Any) -> SimResult:
    """Simulate the configuration a measured timeline describes (its step and the
    ``depth``/``k_tiles``/``tiles_per_cta`` in its meta; k_tiles and tiles_per_cta
    are inferred from the wgmma spans' ``k``/``tile`` when the meta lacks them),
    optionally calibrated to it, so the two can be shown side by side."""
    m = measured.meta or {}
    kw = {k: m.get(k) for k in ("depth", "k_tiles", "tiles_per_cta")}
    # not in the meta: infer from the spans (k and tile indices of the wgmma spans)
    mm = [s for s in measured.spans if s.kind == "mma"]
    if kw["k_tiles"] is None and any(s.k is not None for s in mm):
        kw["k_tiles"] = 1 + max(s.k for s in mm if s.k is not None)
    if kw["tiles_per_cta"] is None and any(s.tile is not None for s in mm):
        per_cta: dict[int, set] = {}
        for s in mm:
            if s.tile is not None:
                per_cta.setdefault(s.cta, set()).add(s.tile)
        kw["tiles_per_cta"] = max(len(t) for t in per_cta.values())   # tile ids may be global
    kw.update(overrides)
    p = params_for_step(m.get("key") or measured.step, **kw)
    if fit:
        p = calibrate(p, measured)
    res = simulate(p, title=f"{p.title}, depth {p.depth} (simulated{', calibrated' if fit else ''})")
    return res
