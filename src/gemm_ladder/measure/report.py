"""The compile report: every step built for sm_90a through the JIT (and, in the main job, the
fp8 family's entries with their default call variant), what ptxas said, and which
instruction classes its SASS holds. Needs no GPU."""
from __future__ import annotations

from ..cuda.jit import KernelBuildError
from ..families.common import SASS_MEANING
from ..families.ladder_step import Step
from . import sass

REPORT_CLASSES = ("HGMMA", "QGMMA", "FFMA", "UTMALDG", "UTMASTG", "SYNCS", "STSM", "USETMAXREG", "LDG.E.128", "BAR")


def compile_report(steps: list[Step], *, bf16: bool = False, progress=None) -> list[dict]:
    """One row per step. `progress`: a rich Progress to advance per step, or None."""
    rows = []
    task = progress.add_task("compiling", total=len(steps)) if progress else None
    for st in steps:
        if progress:
            progress.update(task, description=f"step {getattr(st, 'report_key', st.key)}: compile + SASS")
        rows.append(_report_row(st, bf16))
        if progress:
            progress.advance(task)
    return rows


def _report_row(st, bf16: bool) -> dict:
    row = {"step": getattr(st, "report_key", st.key), "label": st.label, "dtype": "bfloat16" if bf16 else "float16"}
    if problem := st.smem_problem():
        return dict(row, ok=False, failure="smem over limit", error=problem)
    try:
        k = st.compile(bf16=bf16)
    except KernelBuildError as e:
        return dict(row, ok=False, failure="build failed", error=str(e))
    r = k.report
    if problem := st.smem_problem(r.shared_bytes):
        return dict(row, ok=False, failure="smem over limit", error=problem)
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
    return row


def print_report(rows: list[dict], console) -> None:
    """Two narrow tables (a build table, then SASS counts by step key) so the report reads
    in an 80-column terminal."""
    from rich import box
    from rich.table import Table
    narrow = dict(box=box.SIMPLE_HEAD, title_justify="left", show_edge=False, collapse_padding=True)
    build = Table(title="compile report (sm_90a, NVRTC)", **narrow)
    # the step's label wraps (the fp8 and attention builds' run long): the figures keep their columns
    build.add_column("step", justify="left", max_width=36)
    for col in ("regs", "smem KB", "spill", "warn", "build s", "SASS claims"):
        build.add_column(col, justify="left" if col == "SASS claims" else "right", no_wrap=True)
    counts = Table(title="SASS instruction classes (count per kernel)", **narrow)
    for col in ("step",) + REPORT_CLASSES:
        counts.add_column(col, justify="left" if col == "step" else "right", no_wrap=True)
    for r in rows:
        if not r.get("ok"):
            build.add_row(r["label"], *["-"] * 5, "[red]" + r["failure"])
            continue
        smem = (r["static_smem"] + r["dynamic_smem"]) / 1024
        claims = "[red]missing " + ",".join(r["claims_missing"]) if r.get("claims_missing") else (
            "ok" if "sass" in r else "[yellow]no SASS tool")
        build.add_row(r["label"], str(r["registers"]), f"{smem:.0f}", str(r["spill_bytes"]), str(len(r["warnings"])),
                      f"{r['compile_s']:.2f}" + ("*" if r["cached"] else ""), claims)
        if "sass" in r:
            counts.add_row(r["step"], *[str(r["sass"].get(c, "-")) for c in REPORT_CLASSES])
    console.print(build)
    console.print("[dim]* = loaded from the JIT cache; SASS claims: the instruction classes each step "
                  "must hold are there.[/dim]")
    if counts.rows:
        console.print()
        console.print(counts)
        console.print("[dim]" + "; ".join(f"{c}: {SASS_MEANING.get(c, '')}" for c in REPORT_CLASSES) + "[/dim]")
    for r in rows:
        if not r.get("ok"):
            console.print(f"[red]step {r['step']}: {r['error']}")
