"""What `gemm-ladder bench --attention` decides and reports without a GPU: the cases (16k tokens
per call at hidden 2048), their FLOPs, which steps run at each, the ladder table and the summary
with its targets. No torch here: the record's numbers come from bench_attention.py.

A case is (dtype, head dim D, sequence length S, causal). Each call holds 16384 tokens: B =
16384 // S sequences (at least 1) of H = 2048 // D heads. FLOPs 4·B·H·S²·D (two GEMMs of
2·S²·D per head), half of that when causal.
"""
from __future__ import annotations

import math

TOKENS = 16384
HIDDEN = 2048
SEQLENS = (1024, 4096, 16384)
HEAD_DIMS = (64, 128, 256)  # the family's own list (families.attention.HEAD_DIMS) wins: head_dims()
DTYPES = ("float16", "bfloat16")
STEP_KEYS = ("A1", "A2", "A3", "A4", "A5")
LIBRARY_STEP = "lib"  # gemm_ladder.attention without a step: the library's build for the shape
LIBRARY_LABEL = "the library's choice (gemm_ladder.attention, step=None)"
BACKENDS = ("cudnn", "flash", "efficient")  # torch SDPA's, each forced with sdpa_kernel
BACKEND_TITLES = {"cudnn": "cuDNN", "flash": "flash", "efficient": "efficient"}
A1_LABEL = "S = QK^T through the library's GEMM, softmax in torch, O = PV (the baseline)"
A1_DEFAULT_MAX_S = 4096  # without --attn-steps, A1 runs at S <= 4k only
A1_MAX_BYTES = 8e9  # A1 materializes S (B·H·S² elements of 2 bytes): past this it is skipped

# Targets, judged on the best step of each case (the fastest that passed its check).
TARGET_SEQLENS = (4096, 16384)  # where the cuDNN targets apply
CUDNN_TARGETS = {128: 1.00, 64: 1.00, 256: 0.95}  # head dim -> best / cuDNN at least
FLASH_TARGET = 1.8  # best / flash at least, at every case


def _family():
    """(gemm_ladder.families.attention, None), or (None, why it cannot be imported)."""
    try:
        from ..families import attention
    except Exception as e:  # absent, or broken while it is being written: its steps are skipped
        return None, f"{type(e).__name__}: {e}"
    return attention, None


def family_problem() -> str | None:
    return _family()[1]


def head_dims() -> tuple[int, ...]:
    fam, _ = _family()
    return tuple(getattr(fam, "HEAD_DIMS", HEAD_DIMS))


def fused_steps() -> dict[str, str]:
    """The family's fused steps present now: key -> label (empty when the family is missing)."""
    fam, _ = _family()
    steps = getattr(fam, "STEPS", {})
    return {key: str(getattr(st, "label", key)) for key, st in sorted(steps.items())}


def library_builds() -> dict[str, tuple[int, ...]]:
    """The family's library builds present now: key -> the head dims each takes."""
    fam, _ = _family()
    return {key: tuple(d for d, _ in st.blocks) for key, st in sorted(getattr(fam, "LIBRARY", {}).items())}


def step_arg(key: str) -> str | None:
    """What the bench passes as gemm_ladder.attention's step for a row's key."""
    return None if key == LIBRARY_STEP else key


def case_shape(S: int, D: int) -> tuple[int, int]:
    """(B, H): 16k tokens per call (B = 16384 // S, at least 1), hidden 2048 (H = 2048 // D)."""
    return max(1, TOKENS // S), max(1, HIDDEN // D)


def flops(B: int, H: int, S: int, D: int, causal: bool) -> float:
    """4·B·H·S²·D: QK^T and PV, 2·S²·D each per head; causal computes half of it."""
    f = 4.0 * B * H * S * S * D
    return f / 2 if causal else f


def a1_bytes(B: int, H: int, S: int) -> int:
    """What A1 materializes: S = QK^T, B·H·S² elements of 2 bytes."""
    return B * H * S * S * 2


def requested_steps(requested: list[str] | None, present: dict[str, str]) -> tuple[list[str], list[dict]]:
    """The steps to run (in ladder order) and those asked for that the family lacks: each skipped
    with its reason. requested None: A1 and every fused step present."""
    wanted = ["A1", *present, LIBRARY_STEP] if requested is None else list(dict.fromkeys(requested))
    run, missing = [], []
    for key in sorted(wanted, key=lambda k: (STEP_KEYS.index(k) if k in STEP_KEYS else len(STEP_KEYS), k)):
        if key in ("A1", LIBRARY_STEP) or key in present:
            run.append(key)
        else:
            missing.append({"step": key, "reason": f"{key} is not in gemm_ladder.families.attention.STEPS "
                                                   f"(present: {', '.join(present) or 'none'})"})
    return run, missing


def a1_skip_reason(B: int, H: int, S: int, default: bool) -> str | None:
    """Why A1 does not run at this case (None: it runs)."""
    if default and S > A1_DEFAULT_MAX_S:
        return f"A1 runs at S <= {A1_DEFAULT_MAX_S} by default (it materializes S); --attn-steps A1 asks for it"
    if a1_bytes(B, H, S) > A1_MAX_BYTES:
        return f"A1 would materialize S: {a1_bytes(B, H, S) / 1e9:.1f} GB > {A1_MAX_BYTES / 1e9:.0f} GB"
    return None


def case_key(r: dict) -> tuple:
    return (DTYPES.index(r["dtype"]) if r["dtype"] in DTYPES else 9, r["D"], r["S"], bool(r["causal"]))


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if isinstance(x, (int, float)) and x > 0 and math.isfinite(x)]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def _timed_ok(r: dict) -> bool:
    return bool(r.get("ok")) and isinstance(r.get("tflops"), (int, float))


def best_per_case(rows: list[dict], cases: list[dict]) -> list[dict]:
    """Per case (in table order): the fastest step that passed its check, and its ratios."""
    out = []
    for c in sorted(cases, key=case_key):
        mine = [r for r in rows if case_key(r) == case_key(c) and _timed_ok(r)]
        b = max(mine, key=lambda r: r["tflops"], default=None)
        out.append({"dtype": c["dtype"], "D": c["D"], "S": c["S"], "causal": bool(c["causal"]),
                    "step": b["step"] if b else None, "tflops": b["tflops"] if b else None,
                    "ratio_to_cudnn": b.get("ratio_to_cudnn") if b else None,
                    "ratio_to_flash": b.get("ratio_to_flash") if b else None})
    return out


def targets(best: list[dict]) -> list[dict]:
    """Every target the run's cases can be judged on: x cuDNN at D in CUDNN_TARGETS for S in
    TARGET_SEQLENS, x flash at every case. got None (no step ran, or the backend refused the
    case) counts as unmeasured, not met."""
    out = []
    for b in best:
        where = {k: b[k] for k in ("dtype", "D", "S", "causal")}
        if b["D"] in CUDNN_TARGETS and b["S"] in TARGET_SEQLENS:
            out.append({**where, "against": "cudnn", "need": CUDNN_TARGETS[b["D"]], "got": b["ratio_to_cudnn"],
                        "step": b["step"]})
        out.append({**where, "against": "flash", "need": FLASH_TARGET, "got": b["ratio_to_flash"], "step": b["step"]})
    for t in out:
        t["met"] = t["got"] is not None and t["got"] >= t["need"]
    return out


def summary(rows: list[dict], cases: list[dict], labels: dict[str, str] | None = None) -> dict:
    """Per step: geomean (and worst) ratio to cuDNN and to flash over the rows that ran; the best
    step per case; the targets and how many are met."""
    steps = {}
    for key in sorted({r["step"] for r in rows}, key=lambda k: (STEP_KEYS.index(k) if k in STEP_KEYS else 9, k)):
        mine = [r for r in rows if r["step"] == key]
        ok = [r for r in mine if _timed_ok(r)]
        to_cudnn = [r["ratio_to_cudnn"] for r in ok if r.get("ratio_to_cudnn") is not None]
        steps[key] = {"label": (labels or {}).get(key, key), "rows": len(mine), "ok": len(ok),
                      "geomean_to_cudnn": _geomean(to_cudnn), "worst_to_cudnn": min(to_cudnn, default=None),
                      "geomean_to_flash": _geomean([r["ratio_to_flash"] for r in ok
                                                    if r.get("ratio_to_flash") is not None])}
    best = best_per_case(rows, cases)
    ts = targets(best)
    return {"steps": steps, "best": best, "targets": ts, "targets_met": sum(t["met"] for t in ts),
            "targets_total": len(ts), "targets_unmeasured": sum(t["got"] is None for t in ts),
            "all_ok": all(r.get("ok") for r in rows)}


# ---- text ------------------------------------------------------------------------------
def seqlen_text(S: int) -> str:
    return f"{S // 1024}k" if S % 1024 == 0 else str(S)


def case_text(c: dict) -> str:
    dt = {"float16": "fp16", "bfloat16": "bf16"}.get(c["dtype"], c["dtype"])
    return f"{dt} D{c['D']} S{seqlen_text(c['S'])} {'causal' if c['causal'] else 'full'}"


def _num(v, spec: str = ".0f") -> str:
    return format(v, spec) if isinstance(v, (int, float)) and math.isfinite(v) else "-"


def ladder_table(rows: list[dict], cases: list[dict]) -> list[str]:
    """One line per case: TFLOP/s per step ('fail': ran and failed its check; '-': not run) and
    per SDPA backend ('n/a': it refused the case), then the best step and its ratios."""
    steps = sorted({r["step"] for r in rows}, key=lambda k: (STEP_KEYS.index(k) if k in STEP_KEYS else 9, k))
    best = {case_key(b): b for b in best_per_case(rows, cases)}
    head = ["case".ljust(22)] + [s.rjust(6) for s in steps] + [BACKEND_TITLES[b].rjust(9) for b in BACKENDS] \
        + ["best".rjust(4), "xcuDNN".rjust(6), "xflash".rjust(6)]
    lines = [" ".join(head), "-" * len(" ".join(head))]
    for c in sorted(cases, key=case_key):
        by_step = {r["step"]: r for r in rows if case_key(r) == case_key(c)}
        cells = [case_text(c).ljust(22)]
        for s in steps:
            r = by_step.get(s)
            cells.append(("-" if r is None else _num(r.get("tflops")) if r.get("ok") else "fail").rjust(6))
        for b in BACKENDS:
            cells.append(("n/a" if c.get(f"{b}_error") else _num(c.get(f"{b}_tflops"))).rjust(9))
        b = best.get(case_key(c), {})
        cells += [(b.get("step") or "-").rjust(4), _num(b.get("ratio_to_cudnn"), ".2f").rjust(6),
                  _num(b.get("ratio_to_flash"), ".2f").rjust(6)]
        lines.append(" ".join(cells))
    return lines


def summary_lines(s: dict) -> list[str]:
    out = []
    for key, st in s["steps"].items():
        label = st["label"].removeprefix(f"{key}: ")
        out.append(f"{key:>3} ({label}): {st['ok']}/{st['rows']} cases ran; geomean x cuDNN "
                   f"{_num(st['geomean_to_cudnn'], '.3f')} (worst {_num(st['worst_to_cudnn'], '.3f')}), "
                   f"x flash {_num(st['geomean_to_flash'], '.3f')}")
    missed = [t for t in s["targets"] if not t["met"]]
    out.append(f"targets met: {s['targets_met']}/{s['targets_total']}"
               + (f" ({s['targets_unmeasured']} unmeasured)" if s["targets_unmeasured"] else ""))
    for t in missed:
        out.append(f"  missed: {case_text(t)} x {BACKEND_TITLES[t['against']]} >= {t['need']:.2f}: "
                   f"best {t['step'] or '-'} {_num(t['got'], '.3f')}")
    return out
