"""The compile report: every step built for sm_90a through the JIT, what ptxas said, and
which instruction classes its SASS holds. Needs no GPU."""
from __future__ import annotations

from . import sass
from ..runtime.jit import KernelBuildError
from ..runtime.steps import SASS_MEANING, Step

REPORT_CLASSES = ("HGMMA", "FFMA", "UTMALDG", "UTMASTG", "SYNCS", "STSM", "USETMAXREG", "LDG.E.128", "BAR")


def compile_report(steps: list[Step], *, bf16: bool = False) -> list[dict]:
    rows = []
    for st in steps:
        row = {"step": st.key, "label": st.label, "dtype": "bfloat16" if bf16 else "float16"}
        if problem := st.smem_problem():
            row.update(ok=False, failure="smem over limit", error=problem)
            rows.append(row)
            continue
        try:
            k = st.compile(bf16=bf16)
            r = k.report
            if problem := st.smem_problem(r.shared_bytes):
                row.update(ok=False, failure="smem over limit", error=problem)
                rows.append(row)
                continue
            row.update(ok=True, registers=r.registers, static_smem=r.shared_bytes,
                       dynamic_smem=st.dynamic_smem, spill_bytes=r.spill_bytes,
                       stack_frame=r.stack_frame_bytes, warnings=r.warnings,
                       compile_s=round(k.seconds, 3), cached=k.from_cache)
            try:
                ops = sass.opcodes(sass.disassemble(k.cubin))
                row["sass"] = sass.classes(ops, REPORT_CLASSES)
                row["claims_missing"] = [c for c in st.claims if sass.count_class(ops, c) == 0]
            except sass.SassUnavailable as e:
                row["sass_error"] = str(e)
        except KernelBuildError as e:
            row.update(ok=False, failure="build failed", error=str(e))
        rows.append(row)
    return rows


def print_report(rows: list[dict], console) -> None:
    from rich.table import Table
    t = Table(title="compile report (sm_90a, NVRTC)", show_lines=False)
    for col in ("step", "regs", "smem KB", "spill", "warn", "compile s") + REPORT_CLASSES + ("claims",):
        t.add_column(col, justify="right" if col != "step" else "left")
    for r in rows:
        if not r.get("ok"):
            t.add_row(r["label"], *["-"] * (5 + len(REPORT_CLASSES)), "[red]" + r["failure"])
            continue
        smem = (r["static_smem"] + r["dynamic_smem"]) / 1024
        s = r.get("sass", {})
        claims = "[red]missing " + ",".join(r["claims_missing"]) if r.get("claims_missing") else (
            "ok" if "sass" in r else "[yellow]no SASS tool")
        t.add_row(r["label"], str(r["registers"]), f"{smem:.0f}", str(r["spill_bytes"]), str(len(r["warnings"])),
                  f"{r['compile_s']:.2f}" + ("*" if r["cached"] else ""),
                  *[str(s.get(c, "-")) for c in REPORT_CLASSES], claims)
    console.print(t)
    console.print("[dim]* = loaded from the JIT cache.  " + "; ".join(
        f"{c}: {SASS_MEANING.get(c, '')}" for c in REPORT_CLASSES[:7]) + "[/dim]")
    for r in rows:
        if not r.get("ok"):
            console.print(f"[red]step {r['step']}: {r['error']}")
