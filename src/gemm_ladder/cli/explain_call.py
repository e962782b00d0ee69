"""What `gemm-ladder explain` says the library's call does: which kernel runs and what it
copies first, decided by the library's own functions on stand-ins of the call's operands
(meta tensors: shapes, strides and an aligned address, no memory), so that the explanation
and the call cannot disagree:

- the layouts the kernel choice sees: fastconfig.operand_layouts with both major-nesses
  allowed, as fastpath.resolve_step;
- the kernel: fastpath.kernel_for, the function resolve_step calls;
- the copies: operand_layouts with what that kernel reads (common.reads_mn), as the
  configuration (fastconfig.Config) builds them, and staging.copy_geometry for the launches.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import doors


@dataclass(frozen=True)
class CallPlan:
    call: str  # the library function and how it takes b
    b_mn: bool  # b can be read N-major (what select.step_for is told)
    b_misaligned: bool  # b's rows, as read, are not whole 32-byte sectors
    a_mn: bool
    run: object  # the kernel the call runs (a Step or a kernel-family entry); None: none takes the shape
    a_op: object  # layout.Operand of a and b as `run` reads them
    b_op: object


def operands(M: int, N: int, K: int, dtype: str, b_row_major: bool, ldb: int | None):
    """a (M, K) contiguous and b as the call is given it ((K, N) row-major, else (N, K)) with
    row stride `ldb` (default: contiguous), as meta tensors; a stride shorter than b's rows
    is refused in one line."""
    import torch
    tdt = torch.bfloat16 if dtype == "bfloat16" else torch.float16
    shape = (K, N) if b_row_major else (N, K)
    if ldb is not None and ldb < shape[1]:
        what = "a row-major (K, N) b's rows of N" if b_row_major else "an (N, K) b's rows of K"
        raise doors.CliError(f"--ldb {ldb} is shorter than {what} = {shape[1]} elements: rows would overlap")
    a = torch.empty((M, K), dtype=tdt, device="meta")
    b = torch.empty_strided(shape, (shape[1] if ldb is None else ldb, 1), dtype=tdt, device="meta")
    return a, b


def plan_call(M: int, N: int, K: int, dtype: str, sms: int, b_row_major: bool, ldb: int | None) -> CallPlan:
    """The kernel the library's call runs for these operands and how it reads them (module
    docstring)."""
    from ..families.common import ShapeError, reads_mn
    from ..library import fastconfig, fastpath
    a, b = operands(M, N, K, dtype, b_row_major, ldb)
    kind = "mm" if b_row_major else "nt"
    a_in, b_in = fastconfig.operand_layouts(kind, a, b, (True, True), M, N, K)  # as resolve_step
    a_mn, b_mn = fastconfig.mn_flags(a_in, b_in)
    mis = fastpath.b_rows_misaligned(b_in)
    try:
        run = fastpath.kernel_for(kind, a, b, M, N, K, sms)  # the call's own decision
    except ShapeError:  # no kernel: `explain` says so from the candidates
        run = None
    a_op, b_op = fastconfig.operand_layouts(kind, a, b, reads_mn(run), M, N, K)  # as fastconfig.Config
    call = "matmul(a, b) with b row-major (K, N)" if b_row_major else "matmul_nt(a, b) with b (N, K)"
    return CallPlan(call, b_mn, mis, a_mn, run, a_op, b_op)


def runs_line(plan: CallPlan, pick_key: str, M: int, N: int, K: int) -> str:
    """The kernel the call runs, and why it is not the selection's pick when it differs
    (select.step_for's rules 2 and 3)."""
    line = f"{plan.call} runs: {plan.run.key}"
    if plan.run.key == pick_key:
        return line
    from ..families.common import reads_mn
    from ..families.keys import get_step
    a_ok, b_ok = reads_mn(get_step(pick_key))
    unread = [w for w, need, ok in (("an M-major a", plan.a_mn, a_ok), ("an N-major b", plan.b_mn, b_ok))
              if need and not ok]
    why = (f"{pick_key} does not read {' or '.join(unread)}" if unread
           else f"{pick_key} does not take {M}x{N}x{K} with b read {'N' if plan.b_mn else 'K'}-major")
    return f"{line}, not the pick ({why}: select.step_for)"


def predicted_line(plan: CallPlan, M: int, N: int, K: int, dev) -> str:
    """The model's time for the kernel that runs, reading b as it does."""
    from ..families import cost_model
    from ..library import fastpath
    s = cost_model.score(plan.run, M, N, K, dev, fastpath.b_rows_misaligned(plan.b_op), plan.b_op.read_mn)
    return f"predicted: {s.predicted_us:.1f} us for {plan.run.key} (the model's time: docs/suite.md)"


def staging_lines(plan: CallPlan, dev) -> list[str]:
    """What the call copies before the kernel, why, and what the copies cost in the
    selection's model: the bytes read and written at the measured copy rate (a transposing
    copy at TRANSPOSE_COPY_TBS), and COPY_LAUNCH_US per launch — one `gl_stage_copy` when
    every copy is plain, else one torch copy each (library/staging.py)."""
    from ..families import cost_model
    from ..library import staging
    staged = [(name, op) for name, op in (("a", plan.a_op), ("b", plan.b_op)) if not op.direct]
    if not staged:
        return ["the call reads a and b in place (no copy)"]
    lines, total = [], 0.0
    for name, op in staged:
        written = (op.k if op.stage_mn else op.rows) * op.staged_ld
        nbytes = cost_model.ELEMENT_BYTES * (op.rows * op.k + written)
        transpose = op.major == "MN" and not op.stage_mn
        tbs = cost_model.TRANSPOSE_COPY_TBS if transpose else dev.copy_tbs
        us = nbytes / (tbs * 1e12) * 1e6
        total += us
        lines.append(f"the call copies {name} first ({op.why}): {nbytes / 1e6:.2f} MB read and written, "
                     f"~{us:.1f} us at {tbs} TB/s" + (" (a transpose)" if transpose else ""))
    plain = all(staging.copy_geometry(op) is not None for _, op in staged)
    launches = 1 if plain else len(staged)
    total += launches * cost_model.COPY_LAUNCH_US
    lines.append(f"copies: {launches} launch{'es' if launches > 1 else ''} (~{cost_model.COPY_LAUNCH_US:.0f} us "
                 f"each of host work and launch), ~{total:.1f} us in all before the GEMM")
    return lines
