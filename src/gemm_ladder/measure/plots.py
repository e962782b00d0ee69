"""Figures of recorded results (matplotlib, Agg: no display): the roofline and the ladder
as a bar chart of x cuBLAS.

Roofline (docs/suite.md): y = achieved TFLOP/s, x = FLOP per byte, both logarithmic.
  - compute roofs: the highest cuBLAS rate measured in the results, and the datasheet peak;
  - memory slopes: the HBM and L2 copy bandwidths measured in the same run (bytes read +
    written), drawn up to the measured roof;
  - ladder steps (one point per step measured at the ladder size, 4096^3 when present) at
    the step's modelled operand intensity (`cost_model.intensity`: tiles and cluster, no L2
    reuse between clusters), so they read against the L2 slope;
  - suite shapes, ours and cuBLAS's, at the compulsory intensity (A + B + C once), so they
    read against the HBM slope.
"""
from __future__ import annotations

import math
from pathlib import Path

from ..families import cost_model
from ..families.keys import get_step

DATASHEET_TFLOPS = 989.0  # H100/H200 SXM dense fp16/bf16 tensor cores, NVIDIA datasheet
LADDER_LABEL = "ladder steps (operand intensity)"
LADDER_SIZE = (4096, 4096, 4096)


def _mpl():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _ok(r: dict) -> bool:
    return bool(r.get("ok")) and isinstance(r.get("ms"), (int, float)) and math.isfinite(r["ms"]) and r["ms"] > 0


def ladder_rows(results: list[dict]) -> list[dict]:
    """The measured rows of the ladder results at one size: 4096^3 if measured, else the
    first size; one row per step (the last measurement of a step wins)."""
    rows = [r for res in results if res.get("kind") == "gemm-ladder bench" for r in res["rows"] if _ok(r)]
    if not rows:
        return []
    sizes = [(r["M"], r["N"], r["K"]) for r in rows]
    size = LADDER_SIZE if LADDER_SIZE in sizes else sizes[0]
    by_step = {r["step"]: r for r in rows if (r["M"], r["N"], r["K"]) == size}
    return list(by_step.values())


def suite_rows(results: list[dict]) -> list[dict]:
    return [r for res in results if res.get("kind") == "gemm-ladder suite" for r in res["rows"] if _ok(r)]


def step_intensity(key: str, M: int, N: int, K: int) -> float:
    try:
        return cost_model.intensity(get_step(key), M, N, K)
    except KeyError:  # a step from another checkout: no facts here
        return math.nan


def compulsory_intensity(M: int, N: int, K: int) -> float:
    return 2.0 * M * N * K / cost_model.compulsory_bytes(M, N, K)


def _memory(results: list[dict]) -> dict:
    mem = {}
    for res in results:
        for k, v in (res.get("memory") or {}).items():
            if k.endswith("_gbs") and isinstance(v, (int, float)) and math.isfinite(v):
                mem[k] = max(v, mem.get(k, 0.0))
    return mem


def _label_column(ax, pts: list[tuple[float, float, str]], gap_decades: float = 0.07) -> None:
    """Label points; points sharing an x (the ladder steps of one tile) get their labels
    stacked to the right, at least `gap_decades` apart, with a leader line."""
    groups: dict[float, list] = {}
    for x, y, text in pts:
        groups.setdefault(round(math.log10(x), 2), []).append((x, y, text))
    for group in groups.values():
        group.sort(key=lambda p: p[1])
        last = -math.inf
        for x, y, text in group:
            ly = max(math.log10(y), last + gap_decades) if len(group) > 1 else math.log10(y)
            last = ly
            ax.annotate(text, (x, y), xytext=(x * 1.35, 10 ** ly), fontsize=8, va="center",
                        arrowprops={"arrowstyle": "-", "color": "0.6", "lw": .6} if len(group) > 1 else None)


def roofline_figure(results: list[dict], title: str = ""):
    """(fig, ax, info): info["ladder_points"] is the number of ladder steps plotted."""
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(10, 6.5), dpi=110)
    ax.set_xscale("log")
    ax.set_yscale("log")
    lad, sui = ladder_rows(results), suite_rows(results)
    cublas = [r["cublas_tflops"] for r in lad + sui if math.isfinite(r.get("cublas_tflops", math.nan))]
    measured_peak = max(cublas) if cublas else math.nan
    mem = _memory(results)
    xs = [step_intensity(r["step"], r["M"], r["N"], r["K"]) for r in lad]
    xs_s = [compulsory_intensity(r["M"], r["N"], r["K"]) for r in sui]
    finite = [x for x in xs + xs_s if math.isfinite(x)]
    xlo = min(finite + [1.0]) / 2
    xhi = max(finite + [4096.0]) * 2
    ax.set_xlim(xlo, xhi)
    roof_top = measured_peak if math.isfinite(measured_peak) else DATASHEET_TFLOPS
    ax.axhline(DATASHEET_TFLOPS, color="0.3", ls="--", lw=1, label=f"datasheet peak {DATASHEET_TFLOPS:.0f} TFLOP/s")
    if math.isfinite(measured_peak):
        ax.axhline(measured_peak, color="k", lw=1.5, label=f"cuBLAS measured peak {measured_peak:.0f} TFLOP/s")
    for key, name, color in (("hbm_copy_gbs", "HBM", "tab:red"), ("l2_copy_gbs", "L2", "tab:purple")):
        if key in mem:
            tbs = mem[key] / 1e3
            ridge = roof_top / tbs
            ax.plot([xlo, ridge], [xlo * tbs, roof_top], color=color, lw=1.5,
                    label=f"{name} copy {tbs:.2f} TB/s (measured), ridge {ridge:.0f} FLOP/B")
    info = {"ladder_points": 0, "suite_points": 0, "measured_peak_tflops": measured_peak, "memory": mem}
    pts = [(x, r) for x, r in zip(xs, lad) if math.isfinite(x)]
    if pts:
        sc = ax.scatter([x for x, _ in pts], [r["tflops"] for _, r in pts], s=46, color="tab:blue",
                        edgecolor="k", zorder=5, label=LADDER_LABEL)
        sc.set_gid("ladder")
        _label_column(ax, [(x, r["tflops"], r["step"]) for x, r in pts])
        info["ladder_points"] = len(pts)
        r0 = pts[0][1]
        info["ladder_size"] = f"{r0['M']}x{r0['N']}x{r0['K']}"
        theirs = [r["cublas_tflops"] for _, r in pts if math.isfinite(r.get("cublas_tflops", math.nan))]
        if theirs:
            x = compulsory_intensity(r0["M"], r0["N"], r0["K"])
            sc = ax.scatter([x], [sorted(theirs)[len(theirs) // 2]], s=60, marker="*", color="k", zorder=5,
                            label=f"cuBLAS at {info['ladder_size']} (A + B + C once)")
            sc.set_gid("ladder-cublas")
    if sui:
        # fp16 filled circles, bf16 open squares: the two dtypes share every x
        styles = {"float16": {"marker": "o", "color": "tab:green"},
                  "bfloat16": {"marker": "s", "facecolors": "none", "edgecolors": "tab:orange"}}
        for dtype in dict.fromkeys(r["dtype"] for r in sui):
            rs = [(x, r) for x, r in zip(xs_s, sui) if r["dtype"] == dtype]
            sc = ax.scatter([x for x, _ in rs], [r["tflops"] for _, r in rs], s=22, alpha=.85,
                            label=f"suite, ours ({dtype})", **styles.get(dtype, {"color": "tab:gray"}))
            sc.set_gid(f"suite-ours-{dtype}")
            info["suite_points"] += len(rs)
        sc = ax.scatter(xs_s, [r["cublas_tflops"] for r in sui], s=18, marker="x", color="0.45",
                        label="suite, cuBLAS")
        sc.set_gid("suite-cublas")
    ax.set_xlabel("FLOP per byte (ladder: modelled operand traffic; suite: A + B + C once)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(title or "Roofline")
    ax.grid(True, which="both", alpha=.25)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig, ax, info


def ladder_bars_figure(results: list[dict], title: str = ""):
    """(fig, ax, info): one bar per ladder step, its median time as a multiple of cuBLAS's."""
    plt = _mpl()
    lad = ladder_rows(results)
    fig, ax = plt.subplots(figsize=(max(6, 0.8 * len(lad) + 2), 4.5), dpi=110)
    keys = [r["step"] for r in lad]
    vals = [r["ratio_to_cublas"] for r in lad]
    bars = ax.bar(range(len(lad)), vals, color=["tab:green" if v >= 1 else "tab:blue" for v in vals],
                  edgecolor="k", label="ours")
    for i, v in enumerate(vals):
        ax.text(i, v, f"{v:.2f}" if v >= 0.01 else f"{v:.3f}", ha="center", va="bottom", fontsize=8)
    ax.axhline(1.0, color="k", ls="--", lw=1, label="cuBLAS")
    ax.set_xticks(range(len(lad)), keys)
    ax.set_xlabel("step")
    ax.set_ylabel("x cuBLAS (cuBLAS median / ours)")
    size = "x".join(map(str, (lad[0]["M"], lad[0]["N"], lad[0]["K"]))) if lad else ""
    ax.set_title(title or f"The ladder against cuBLAS at {size}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig, ax, {"bars": len(lad)}


def write_images(results: list[dict], stem: Path | str) -> list[Path]:
    """Write <stem>_roofline.png and, when ladder rows exist, <stem>_bars.png."""
    plt = _mpl()
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    gpu = next((r.get("gpu", {}).get("torch_name") for r in results if r.get("gpu")), "") or ""
    commits = ", ".join(dict.fromkeys(str(r.get("commit", "?"))[:7] for r in results))
    paths = []
    fig, _, _ = roofline_figure(results, title=f"Roofline {gpu} (commit {commits})".replace("  ", " "))
    paths.append(stem.with_name(stem.name + "_roofline.png"))
    fig.savefig(paths[-1])
    plt.close(fig)
    if ladder_rows(results):
        fig, _, _ = ladder_bars_figure(results)
        paths.append(stem.with_name(stem.name + "_bars.png"))
        fig.savefig(paths[-1])
        plt.close(fig)
    return paths
