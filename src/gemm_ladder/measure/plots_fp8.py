"""The fp8 record's roofline (matplotlib, Agg): y = achieved TFLOP/s, x = FLOP per byte with the
operands once in fp8 and C once in bf16 (the compulsory traffic), both logarithmic.

Roofs: the datasheet's dense fp8 peak (twice fp16's) and its fp16 peak, and the measured HBM
copy rate (cuda/device.py). Points: for each shape, every row of the record: ours per scale
mode (promoted filled, fast accumulation open) and torch._scaled_mm's beside them (crosses);
the ladder's step 11 as a star.
"""
from __future__ import annotations

import math
from pathlib import Path

from ..cuda.device import H200

FP8_DATASHEET_TFLOPS = 1979.0  # H200 SXM datasheet, dense fp8 tensor cores (twice the fp16 rate)
MODE_COLORS = {"tensor": "tab:blue", "row": "tab:green", "block": "tab:orange"}


def fp8_intensity(M: int, N: int, K: int) -> float:
    """FLOP per byte with A and B read once in fp8 and C written once in bf16."""
    return 2.0 * M * N * K / (M * K + N * K + 2 * M * N)


def _ok(r: dict) -> bool:
    return bool(r.get("ok")) and math.isfinite(r.get("tflops", math.nan))


def fp8_roofline_figure(result: dict, title: str = ""):
    """(fig, ax, info): info["points"] counts our plotted rows."""
    from .plots import _mpl
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=110)
    ax.set_xscale("log")
    ax.set_yscale("log")
    rows = [r for r in result.get("rows", []) if _ok(r)]
    xs = [fp8_intensity(r["M"], r["N"], r["K"]) for r in rows]
    xlo, xhi = min(xs + [10.0]) / 2, max(xs + [2000.0]) * 2
    ax.set_xlim(xlo, xhi)
    ax.axhline(FP8_DATASHEET_TFLOPS, color="k", ls="--", lw=1.2,
               label=f"fp8 datasheet peak {FP8_DATASHEET_TFLOPS:.0f} TFLOP/s")
    ax.axhline(H200.peak_tflops, color="0.5", ls=":", lw=1, label=f"fp16 datasheet peak {H200.peak_tflops:.0f}")
    tbs = H200.copy_tbs
    ridge = FP8_DATASHEET_TFLOPS / tbs
    ax.plot([xlo, ridge], [xlo * tbs, FP8_DATASHEET_TFLOPS], color="tab:red", lw=1.5,
            label=f"HBM copy {tbs:.2f} TB/s (measured), ridge {ridge:.0f} FLOP/B")
    info = {"points": 0}
    for mode, color in MODE_COLORS.items():
        for fast in (False, True):
            rs = [(x, r) for x, r in zip(xs, rows)
                  if r["mode"] == mode and r["fast_accum"] == fast and r.get("entry") != "11"]
            if not rs:
                continue
            style = {"color": color} if not fast else {"facecolors": "none", "edgecolors": color}
            sc = ax.scatter([x for x, _ in rs], [r["tflops"] for _, r in rs], s=26, zorder=4,
                            label=f"ours, {mode}{', fast' if fast else ', promoted'}", **style)
            sc.set_gid(f"fp8-{mode}{'-fast' if fast else ''}")
            info["points"] += len(rs)
    theirs = [(x, r) for x, r in zip(xs, rows) if math.isfinite(r.get("scaled_mm_tflops", math.nan))]
    if theirs:
        sc = ax.scatter([x for x, _ in theirs], [r["scaled_mm_tflops"] for _, r in theirs], s=16, marker="x",
                        color="0.4", zorder=3, label="torch._scaled_mm (each row's reference)")
        sc.set_gid("fp8-scaled-mm")
    step11 = [(x, r) for x, r in zip(xs, rows) if r.get("entry") == "11"]
    if step11:
        sc = ax.scatter([x for x, _ in step11], [r["tflops"] for _, r in step11], s=90, marker="*",
                        color="tab:purple", edgecolor="k", zorder=5, label="step 11")
        sc.set_gid("fp8-step11")
    ax.set_xlabel("FLOP per byte (A and B once in fp8, C once in bf16)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title or f"fp8 roofline (commit {str(result.get('commit', '?'))[:7]})")
    ax.grid(True, which="both", alpha=.25)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig, ax, info


def write_fp8_roofline(result: dict, path: Path | str) -> Path:
    from .plots import _mpl
    path = Path(path)
    fig, _, _ = fp8_roofline_figure(result)
    fig.savefig(path)
    _mpl().close(fig)
    return path
