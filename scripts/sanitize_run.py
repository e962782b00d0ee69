#!/usr/bin/env python3
"""The program compute-sanitizer watches (scripts/sanitize.sh), and the reader of its logs.

Run mode: every ladder step's and gemm family entry's strict run_step, the small-M split-K
family (through matmul_nt(step=key), at its own decode-like shapes, one of them long enough
in K to split and run the reduction kernel), and matmul, at each given
shape the target accepts, once per dtype. Inputs are made on the host and copied over (initialized memory
for initcheck); the reference is computed on the host (no cuBLAS kernels in the log). Each
case is framed by BEGIN/END lines and synchronized before END, so the sanitizer's reports
land inside the frame of the case that caused them.

  --output preinit   the output starts as zeros copied from the host: initcheck then checks
                     what the kernels read (it does not track TMA bulk stores, so an output
                     written only by TMA would read as "uninitialized" afterwards)
  --output poison    the output starts as NaN: every element must be written (the check
                     initcheck cannot make for TMA-stored outputs)

Summary mode (--summarize LOG...): reports per tool x target, compute-sanitizer's own
ERROR SUMMARY lines, and a JSON record.
"""
from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests")]

DEFAULT_SHAPES = "256x384x320,129x264x72,129x257x72"
# The small-M family's shapes: a tile edge in M and N, a K edge, and a K that splits.
DEFAULT_FAMILY_SHAPES = ("16x384x320,65x264x72,8x512x4096,96x1000x4096,80x4096x4096,200x512x512,136x264x128,"
                         "136x520x72,264x1000x1000,"  # multicast pairs (an odd row-block count)
                         "128x512x4096")  # shared A: clusters along N, 8 pieces through the workspace
TAG = "[sanitize]"
# A compute-sanitizer report starts with "========= " and a non-blank; these heads are not reports.
_NOT_REPORTS = ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY",
                "Target application returned", "This tool", "Note:")


def parse_shapes(spec: str) -> list[tuple[int, int, int]]:
    return [tuple(int(x) for x in s.lower().split("x")) for s in spec.split(",") if s.strip()]


def plan(step_spec: str, shapes, with_matmul: bool, tool: str, family_shapes=()):
    """[(target, step or family entry or None, shape)]; steps 2-3 get their one-tile edge
    shape too; the gemm family's entries (Steps) run at the steps' shapes, the small-M family's
    ('smallm', ...) at family_shapes."""
    import gemm_ladder
    from gemm_ladder.families.gemm import ENTRIES as GEMM_ENTRIES
    from gemm_ladder.families.smallm import FAMILIES
    keys = ([str(k) for k in gemm_ladder.STEPS] + list(gemm_ladder.VARIANTS) + list(GEMM_ENTRIES) + list(FAMILIES)
            if step_spec == "all" else [k.strip() for k in step_spec.split(",") if k.strip()])
    cases = []
    for key in keys:
        base, _, move = key.partition("~")  # smallm:n64~b_early: the build static_b=True runs
        st = gemm_ladder.get_step(base)
        if move:
            from gemm_ladder.library.fastpath import b_early
            if move != "b_early" or b_early(st) is st:
                raise SystemExit(f"{TAG} {key!r}: the only move is ~b_early, on a small-M entry without multicast")
            st = b_early(st)
        if base in FAMILIES:
            cases += [(f"family:{key}", st, s) for s in family_shapes if st.accepts(*s)]
            continue
        mine = [s for s in shapes if st.accepts(*s)]
        if st.tile_multiple and (st.bm, st.bn, st.bk) not in mine:
            mine.append((st.bm, st.bn, st.bk))
        cases += [(f"step:{st.key}", st, s) for s in mine]
    if with_matmul:
        for s in shapes:
            if tool == "initcheck" and s[1] % 8:
                print(f"{TAG} SKIP target=matmul shape={'x'.join(map(str, s))}: N % 8 != 0 routes the output "
                      "through an internal TMA-stored buffer, which initcheck cannot see written; the poison run "
                      "checks it", flush=True)
                continue
            cases.append(("matmul", None, s))
    return cases


def run_case(target, st, shape, dtype_name, output, seed):
    """Returns (ok, detail)."""
    import torch

    import gemm_ladder
    import fuzz_check as fc
    from gemm_ladder.library.runner import run_step
    M, N, K = shape
    dtype = getattr(torch, dtype_name)
    g = torch.Generator().manual_seed(seed)
    a_h = torch.randn(M, K, generator=g).to(dtype)
    bt_h = torch.randn(N, K, generator=g).to(dtype)
    out_h = torch.zeros(M, N, dtype=dtype) if output == "preinit" else torch.full((M, N), float("nan"), dtype=dtype)
    a, bt, out = a_h.cuda(), bt_h.cuda(), out_h.cuda()
    if target.startswith("family:"):
        res = gemm_ladder.matmul_nt(a, bt, out=out, step=st)
    elif st is not None:
        res = run_step(st, a, bt, out)
    else:
        res = gemm_ladder.matmul(a, bt.T, out=out)
    torch.cuda.synchronize()
    if res.data_ptr() != out.data_ptr():
        return False, "the result is not the out= tensor"
    got = out.cpu().double()
    written = int(torch.isfinite(got).sum())
    ref = a_h.double() @ bt_h.double().T
    scale = float(a_h.double().norm(dim=1).max() * bt_h.double().norm(dim=0).max())
    tol, _ = fc.tolerance(dtype_name, K, float(ref.abs().max()), scale, math.inf)  # the worst-case bound
    err = float((got - ref).abs().max()) if written == M * N else math.inf
    ok = written == M * N and err <= tol
    return ok, f"written={written}/{M * N} max_err={err:.3g} tol={tol:.3g}"


def run(args) -> int:
    import torch
    if not torch.cuda.is_available():
        print(f"{TAG} no CUDA GPU", file=sys.stderr)
        return 2
    shapes = parse_shapes(args.shapes)
    cases = plan(args.steps, shapes, not args.no_matmul, args.tool, parse_shapes(args.family_shapes))
    bad = 0
    for dtype in args.dtypes.split(","):
        for i, (target, st, shape) in enumerate(cases):
            frame = (f"tool={args.tool} target={target} shape={'x'.join(map(str, shape))} dtype={dtype} "
                     f"output={args.output}")
            print(f"{TAG} BEGIN {frame}", flush=True)
            try:
                ok, detail = run_case(target, st, shape, dtype, args.output, seed=1000 + i)
            except Exception as e:  # reported in the frame; the run goes on
                ok, detail = False, f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
            bad += not ok
            print(f"{TAG} END {frame} result={'ok' if ok else 'FAIL'} {detail}", flush=True)
    print(f"{TAG} DONE tool={args.tool} cases={len(cases) * len(args.dtypes.split(','))} failed={bad}", flush=True)
    return 1 if bad else 0


# ---- reading the logs ----------------------------------------------------------------------------
def _is_report(line: str) -> bool:
    if not line.startswith("========= ") or line[10:11].isspace() or not line[10:].strip():
        return False
    return not line[10:].startswith(_NOT_REPORTS)


def read_log(path: Path) -> dict:
    """One tool's log -> {tool, error_summary, racecheck_summary, rc, targets, reports_outside_cases}."""
    tool = re.search(r"sanitizer_(\w+)\.log$", path.name)
    rec = {"log": path.name, "tool": tool.group(1) if tool else path.stem, "error_summary": None,
           "racecheck_summary": None, "rc": None, "done": False, "targets": {}, "reports_outside_cases": 0,
           "first_reports": []}
    current = None
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(f"{TAG} BEGIN "):
            kv = dict(t.split("=", 1) for t in line.split()[2:] if "=" in t)
            current = kv["target"]
            t = rec["targets"].setdefault(current, {"cases": 0, "ok": 0, "reports": 0, "shapes": []})
            t["cases"] += 1
            t["shapes"].append(f"{kv['shape']}/{kv['dtype']}")
        elif line.startswith(f"{TAG} END "):
            if current is not None and " result=ok" in line:
                rec["targets"][current]["ok"] += 1
            current = None
        elif line.startswith(f"{TAG} DONE"):
            rec["done"] = True
        elif line.startswith("========= ERROR SUMMARY"):
            rec["error_summary"] = line.strip()
        elif line.startswith("========= RACECHECK SUMMARY"):
            rec["racecheck_summary"] = line.strip()
        elif line.startswith("rc="):
            rec["rc"] = int(line[3:].strip() or -1)
        elif _is_report(line):
            if current is None:
                rec["reports_outside_cases"] += 1
            else:
                rec["targets"][current]["reports"] += 1
            if len(rec["first_reports"]) < 5:
                rec["first_reports"].append(f"[{current or 'outside cases'}] {line.strip()}")
    return rec


def summarize(paths: list[Path], json_out: str | None) -> int:
    recs = [read_log(p) for p in paths]
    clean = True
    lines = []
    for r in recs:
        for target, t in r["targets"].items():
            verdict = "clean" if t["reports"] == 0 and t["ok"] == t["cases"] else "NOT CLEAN"
            clean &= verdict == "clean"
            lines.append(f"sanitizer {r['tool']:<9} {target:<10} {t['cases']} cases: {t['reports']} reports, "
                         f"{t['ok']}/{t['cases']} results ok -> {verdict}")
        n_err = re.search(r"ERROR SUMMARY: (\d+) error", r["error_summary"] or "")
        # racecheck ends with its own summary ("RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)")
        n_race = re.search(r"\((\d+) errors?, (\d+) warnings?\)", r["racecheck_summary"] or "")
        tool_ok = ((r["error_summary"] is None and r["tool"] == "poison")
                   or (n_err is not None and n_err.group(1) == "0")
                   or (r["tool"] == "racecheck" and n_race is not None and n_race.groups() == ("0", "0")))
        tool_ok &= r["done"] and r["reports_outside_cases"] == 0 and r["rc"] in (0, None)
        clean &= tool_ok
        lines.append(f"sanitizer {r['tool']:<9} {(r['error_summary'] or 'no ERROR SUMMARY line').removeprefix('========= ')}"
                     + (f" | {r['racecheck_summary'].removeprefix('========= ')}" if r["racecheck_summary"] else "")
                     + f" | reports outside cases: {r['reports_outside_cases']} | rc={r['rc']}"
                     + ("" if r["done"] else " | INCOMPLETE (no DONE line)") + (" -> ok" if tool_ok else " -> NOT OK"))
        lines += [f"    {x}" for x in r["first_reports"]]
    lines.append(f"sanitizer: {'all clean' if clean else 'PROBLEMS FOUND'} ({len(recs)} logs)")
    print("\n".join(lines))
    if json_out:
        Path(json_out).write_text(json.dumps({"clean": clean, "logs": recs}, indent=1) + "\n")
    return 0 if clean else 1


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", default="all")
    p.add_argument("--shapes", default=DEFAULT_SHAPES)
    p.add_argument("--family-shapes", default=DEFAULT_FAMILY_SHAPES)
    p.add_argument("--dtypes", default="float16,bfloat16")
    p.add_argument("--output", choices=("preinit", "poison"), default="preinit")
    p.add_argument("--tool", default="none", help="the compute-sanitizer tool watching (labels the log)")
    p.add_argument("--no-matmul", action="store_true")
    p.add_argument("--summarize", nargs="+", metavar="LOG")
    p.add_argument("--json")
    args = p.parse_args(argv)
    if args.summarize:
        return summarize([Path(x) for x in args.summarize], args.json)
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
