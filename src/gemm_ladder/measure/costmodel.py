"""The cost model held to the suite's measurements: for every shape of a suite record (the
kernel path), the time the model predicts for the kernel it picks (families/cost_model.py,
`predict_us`) beside the time measured. The model's two fitted constants were fitted on the
squares; every other row is held out. `scripts/costmodel_record.py` writes the record;
`gemm-ladder explain --measured` shows a shape's row; a CPU test guards the newest record.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from ..families import cost_model
from ..library import select

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"  # in a checkout of the repository
FITTED_ON = "squares"  # the suite group the prediction's constants were fitted on


def rows_from_suite(suite: dict) -> list[dict]:
    """One row per shape and dtype of a kernel-path suite record: the model's pick and its
    predicted time, the measured kernel and time."""
    out = []
    for r in suite["rows"]:
        if not r.get("ok"):
            continue
        M, N, K, dtype = r["M"], r["N"], r["K"], r["dtype"]
        ch = select.choose(M, N, K, dtype, b_misaligned=cost_model.contiguous_b_misaligned(N, K))
        predicted, measured = ch.pick.predicted_us, r["ms"] * 1e3
        out.append({"shape": f"{M}x{N}x{K}", "dtype": dtype, "group": r.get("group", ""),
                    "kernel": ch.pick.key, "measured_kernel": r["kernel"].split()[0],
                    "predicted_us": round(predicted, 3), "measured_us": round(measured, 3),
                    "error": round(predicted / measured - 1, 4),
                    "fitted_on": "fitted" if r.get("group") == FITTED_ON else "held out"})
    return out


def summary(rows: list[dict]) -> dict:
    def stats(sel):
        errs = [r["error"] for r in sel]
        return {"rows": len(errs), "worst": max(errs, key=abs) if errs else math.nan,
                "geomean_abs_error": (math.exp(sum(abs(math.log1p(e)) for e in errs) / len(errs)) - 1) if errs
                else math.nan,
                "over_25pct": sum(abs(e) > 0.25 for e in errs)}
    return {"all": stats(rows), "held_out": stats([r for r in rows if r["fitted_on"] == "held out"]),
            "fitted": stats([r for r in rows if r["fitted_on"] == "fitted"])}


def newest(kind: str) -> Path | None:
    """The newest record of a kind in this checkout's results (by date in the name), or None."""
    found = sorted(RESULTS.glob(f"*_h200_{kind}_*.json")) if RESULTS.is_dir() else []
    return found[-1] if found else None


def measured_row(M: int, N: int, K: int, dtype: str) -> tuple[dict | None, Path | None]:
    """The newest cost-model record's row for this shape and dtype, if one holds it."""
    path = newest("costmodel")
    if path is None:
        return None, None
    for r in json.loads(path.read_text())["rows"]:
        if r["shape"] == f"{M}x{N}x{K}" and r["dtype"] == dtype:
            return r, path
    return None, path
