"""The cost model held to the suite's measurements: for every shape of a suite record (the
kernel path), the time the model predicts for the kernel it picks (families/cost_model.py,
`predict_us`) beside the time measured. The model's two fitted constants were fitted on the
squares; every other row is held out. The streaming constants of docs/perf-notes.md item 85
were fitted on half A of the shapes (`half`) and are held to half B. `scripts/costmodel_record.py`
writes the record; `gemm-ladder explain --measured` shows a shape's row; a CPU test guards the
newest record.
"""
from __future__ import annotations

import json
import math
import zlib
from pathlib import Path

from ..cuda.device import CARDS
from ..families import cost_model
from ..library import select

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"  # in a checkout of the repository
FITTED_ON = "squares"  # the suite group the prediction's constants were fitted on


def half(shape: str) -> str:
    """"A" or "B": the half of the suite's shapes ("MxNxK", both dtypes alike, by crc32) a row
    falls in. The constants of docs/perf-notes.md item 85 were fitted on half A."""
    return "AB"[zlib.crc32(shape.encode()) % 2]


def card_device(token: str, copy_tbs: float | None = None) -> cost_model.Device:
    """The model's Device for a card of cuda/device.CARDS ("h100"): its datasheet facts, and the copy
    rate `copy_tbs` (TB/s) where a record measured it (else the card's own figure)."""
    f = CARDS[token]
    return cost_model.Device(sms=f.sms, peak_tflops=f.peak_tflops, hbm_tbs=f.hbm_tbs, source=f.source,
                             copy_tbs=f.copy_tbs if copy_tbs is None else copy_tbs)


def rows_from_suite(suite: dict, card=None) -> list[dict]:
    """One row per shape and dtype of a kernel-path suite record: the model's pick and its
    predicted time, the measured kernel and time. From a suite run with --autotune (every
    accepted candidate timed, `autotune_ms`) the pick's time is its own among them, and the
    row also holds every candidate's predicted and measured time, the fastest one and what
    the pick lost to it (`pick_loss`: the pick's time over the fastest's). card: another GPU's
    facts (a cost_model.Device): the library picked by the H200's, so each row predicts, with the
    card's, the kernel the record ran, where the H200's pick is the one it ran."""
    out = []
    for r in suite["rows"]:
        if not r.get("ok"):
            continue
        M, N, K, dtype = r["M"], r["N"], r["K"], r["dtype"]
        ch = select.choose(M, N, K, dtype, b_misaligned=cost_model.contiguous_b_misaligned(N, K))
        tuned = {k: v * 1e3 for k, v in r.get("autotune_ms", {}).items() if v == v}
        if tuned and ch.pick.key not in tuned:
            continue  # the pick did not run in that record: nothing to compare
        if card is not None:  # the same candidates scored with the card's facts
            if tuned or r["kernel"].split()[0] != ch.pick.key:
                continue  # only kernel-path rows that ran the H200's pick
            on_card = select.choose(M, N, K, dtype, device=card, b_misaligned=cost_model.contiguous_b_misaligned(N, K))
            ch.pick = next(s for s in on_card.scores if s.key == ch.pick.key)
        predicted = ch.pick.predicted_us
        measured = tuned[ch.pick.key] if tuned else r["ms"] * 1e3
        row = {"shape": f"{M}x{N}x{K}", "dtype": dtype, "group": r.get("group", ""),
               "kernel": ch.pick.key, "measured_kernel": ch.pick.key if tuned else r["kernel"].split()[0],
               "predicted_us": round(predicted, 3), "measured_us": round(measured, 3),
               "error": round(predicted / measured - 1, 4),
               "fitted_on": "fitted" if r.get("group") == FITTED_ON else "held out",
               "half": half(f"{M}x{N}x{K}")}
        if tuned:
            scores = {s.key: s for s in ch.scores if s.accepted}
            best = min(tuned, key=tuned.get)
            row.update({"best_kernel": best, "best_us": round(tuned[best], 3),
                        "pick_loss": round(measured / tuned[best], 4),
                        "candidates": {k: {"predicted_us": round(scores[k].predicted_us, 3), "measured_us": round(v, 3)}
                                       for k, v in sorted(tuned.items()) if k in scores}})
        out.append(row)
    return out


def summary(rows: list[dict]) -> dict:
    def stats(sel):
        errs = [r["error"] for r in sel]
        return {"rows": len(errs), "worst": max(errs, key=abs) if errs else math.nan,
                "geomean_abs_error": (math.exp(sum(abs(math.log1p(e)) for e in errs) / len(errs)) - 1) if errs
                else math.nan,
                "over_25pct": sum(abs(e) > 0.25 for e in errs)}
    out = {"all": stats(rows), "held_out": stats([r for r in rows if r["fitted_on"] == "held out"]),
           "fitted": stats([r for r in rows if r["fitted_on"] == "fitted"]),
           "half_b": stats([r for r in rows if r.get("half") == "B"])}
    cands = [{"error": c["predicted_us"] / c["measured_us"] - 1, "small_m": k.startswith("smallm")}
             for r in rows for k, c in r.get("candidates", {}).items()]
    if cands:  # every candidate's prediction, not only the pick's
        out["candidates"] = stats(cands)
        out["candidates_small_m"] = stats([c for c in cands if c["small_m"]])
    picks = [r for r in rows if "pick_loss" in r]
    if picks:  # the pick against the fastest candidate measured, per group and over all
        def pick_stats(sel):
            losses = [r["pick_loss"] for r in sel]
            return {"shapes": len(losses), "within_3pct": round(sum(x <= 1.03 for x in losses) / len(losses), 4),
                    "geomean_loss": round(math.exp(sum(map(math.log, losses)) / len(losses)), 4),
                    "worst": max(sel, key=lambda r: r["pick_loss"])["shape"], "worst_loss": max(losses)}
        out["pick"] = {"all": pick_stats(picks),
                       **{g: pick_stats([r for r in picks if r["group"] == g])
                          for g in sorted({r["group"] for r in picks})}}
    return out


def newest(kind: str) -> Path | None:
    """The newest record of a kind in this checkout's results: by the date in its name, then
    by the time it was written (`written`, in records that carry it; those that do not count
    as older on their date), or None."""
    found = sorted(RESULTS.glob(f"*_h200_{kind}_*.json")) if RESULTS.is_dir() else []  # the H200's records

    def written(p: Path) -> str:
        try:
            return json.loads(p.read_text()).get("written", "")
        except (OSError, ValueError):
            return ""
    return max(found, key=lambda p: (p.name[:10], written(p)), default=None)


def measured_row(M: int, N: int, K: int, dtype: str) -> tuple[dict | None, Path | None]:
    """The newest cost-model record's row for this shape and dtype, if one holds it."""
    path = newest("costmodel")
    if path is None:
        return None, None
    for r in json.loads(path.read_text())["rows"]:
        if r["shape"] == f"{M}x{N}x{K}" and r["dtype"] == dtype:
            return r, path
    return None, path
