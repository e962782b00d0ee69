#!/usr/bin/env python3
"""Write benchmarks/results/INDEX.md: for each kind of record, which file is current and which
older ones exist.

Records are named `<date>_<gpu>_<kind>_<commit>[_<suffix>].<ext>` (e.g.
`2026-11-30_h200_suite_all-matmul_e2fc8fc.json`, `..._api_51375bf_log.txt`). The files of one
run (its JSON, log, plots) share date, kind and commit and form one record. The current record
of a kind is the newest by date, per card (the H200 first, then any other card that ran that
kind); records of the same date are ordered by the time of the commit they name (read from git,
so the order is the history's, not the hashes'), then by name. A commit that is not in HEAD's
history sorts before the known ones of its date.

    python scripts/results_index.py           # (re)write the index
    python scripts/results_index.py --check   # exit 1 if the checked-in index is stale

The output depends only on the file names under benchmarks/results/ and on the commit times in
HEAD's history, so it is the same in every full clone. A kind the tables below do not name goes
to the "Other" section under its own name.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path("benchmarks") / "results"
INDEX = "INDEX.md"

NAME = re.compile(r"^(?P<date>\d{4}-\d{2}-\d{2})_(?:(?P<gpu>h100|h200|h20|gh200|gpu)_)?(?P<rest>.+?)"
                  r"\.(?P<ext>json\.gz|tar\.gz|json|txt|log|png|csv|html|md)$")
COMMIT = re.compile(r"^[0-9a-f]{7,40}(-dirty)?$")

# Sections in order; each rule: (kind pattern, title). The first rule that matches a kind wins.
SECTIONS: list[tuple[str, list[tuple[str, str]]]] = [
    ("Ladder", [
        (r"ladder_4096_fp16", "Ladder, 4096³ fp16"),
        (r"ladder_4096_bf16", "Ladder, 4096³ bf16"),
        (r"ladder_8192_2048", "Ladder, 8192³ and 2048³"),
        (r"sweep_.*", "Shape sweep of one step"),
        (r"bench_logs", "Ladder runs' console logs"),
    ]),
    ("Shape suite", [
        (r"suite_all", "Suite, kernel path (`bench --suite all`)"),
        (r"suite_all-matmul", "Suite through `matmul` (`--call matmul`)"),
        (r"suite_all-matmul_nt", "Suite through `matmul_nt` (`--call matmul_nt`)"),
        (r"suite_all-tune", "Suite, every candidate kernel timed per shape (`--autotune`)"),
        (r"suite_llm", "Suite, transformer shapes only (`--suite llm`)"),
        (r"suite_llm_ab2?", "Suite `llm`, old and new tree in one process run"),
        (r"suite_logs", "Suite runs' console logs, kernel path"),
        (r"suite_logs_matmul", "Suite runs' console logs, through `matmul`"),
    ]),
    ("Library", [
        (r"api", "`bench --api`: host µs per call, call forms against the kernel"),
        (r"host_profile(_.*)?", "Host profile of one call (`scripts/host_profile.py`)"),
    ]),
    ("Models", [
        (r"costmodel", "The cost model's predictions and picks beside the measured candidates "
                       "(`scripts/costmodel_record.py`)"),
        (r"sim_heldout", "The simulator fitted on one trace, predicting the others"),
    ]),
    ("Decode chain", [
        (r"decode_chain", "One layer's decode GEMMs in a CUDA graph against cuBLAS's (`bench --decode-chain`)"),
    ]),
    ("fp8", [
        (r"fp8", "The fp8 family against torch._scaled_mm (`bench --fp8`)"),
    ]),
    ("Attention", [
        (r"attention", "The attention steps against torch SDPA's backends (`gemm-ladder bench --attention`)"),
    ]),
    ("Trust checks", [
        (r"gpu_tests", "GPU tests (`pytest -m gpu`)"),
        (r"gpu_tests_.*|pipeline_tests", "GPU tests, a subset or an extra run"),
        (r"checks", "Debug-build checks (`gemm-ladder check --debug`)"),
        (r"fuzz_fp8", "Fuzzer, the fp8 door (`scripts/fuzz_fp8.py`)"),
        (r"fuzz_attention", "Fuzzer, the attention door (`scripts/fuzz_attention.py`)"),
        (r"fuzz", "Fuzzer (`scripts/fuzz.py`)"),
        (r"sanitizer_fp8_.*", "compute-sanitizer, the fp8 family: one tool's log (`scripts/fp8_sanitize_cases.py`)"),
        (r"sanitizer_attention_.*", "compute-sanitizer, the attention steps: one tool's log "
                                    "(`scripts/attention_sanitize_cases.py`)"),
        (r"sanitizer_summary", "compute-sanitizer, every step and `matmul`: summary"),
        (r"sanitizer_(memcheck|racecheck|synccheck|initcheck|poison)", "compute-sanitizer, every step: one tool's log"),
        (r"sanitizer_smallm_summary", "compute-sanitizer, the small-M family: summary"),
        (r"sanitizer_smallm_.*", "compute-sanitizer, the small-M family: one tool's log"),
        (r"sanitizer_.*", "compute-sanitizer, other"),
        (r"soak", "Soak (`scripts/soak.py`)"),
    ]),
    ("Traces and what-ifs", [
        (r"trace_kpis", "Measured traces' KPIs beside the simulator's"),
        (r"sim_heldout", "The simulator held out: fitted on one trace, predicting the others "
                         "(`gemm-ladder calibrate --held-out`)"),
        (r"whatifs", "The course's what-ifs on the GPU (`gemm-ladder deadlock`)"),
        (r"whatifs_attention", "The attention what-ifs on the GPU (`gemm-ladder deadlock --what-if ...`)"),
        (r"whatifs_.*", "What-ifs, other checks"),
    ]),
    ("Small-M family", [
        (r"smallm", "Small-M benchmark (`scripts/bench_smallm.py`)"),
        (r"smallm_.*", "Small-M probes"),
    ]),
    ("cuBLAS and the kernels", [
        (r"cublas_kernels", "The kernels cuBLAS runs (torch profiler)"),
        (r".*sass_identity", "SASS identity of a build against another"),
    ]),
]
OTHER = "Other"


@dataclass(frozen=True)
class Record:
    kind: str
    date: str
    commit: str  # "" when the name carries none
    files: tuple[str, ...] = field(default=())  # paths relative to benchmarks/results
    gpu: str = ""  # the card that ran it ("h200", "h100"; "" when the name carries none)


def parse(name: str) -> tuple[str, str, str, str] | None:
    """(date, kind, commit, label) of a record file's name, or None when it does not follow
    `<date>_[<gpu>_]<kind>_<commit>[_<suffix>].<ext>`. The label names the file within its
    record: its suffix and extension ("json", "log.txt", "roofline.png")."""
    m = NAME.match(name)
    if not m:
        return None
    tokens = m["rest"].split("_")
    at = next((i for i, t in enumerate(tokens) if i > 0 and COMMIT.match(t)), None)
    if at is None:
        kind, commit, suffix = m["rest"], "", []
    else:
        kind, commit, suffix = "_".join(tokens[:at]), tokens[at], tokens[at + 1:]
    label = "_".join(suffix) + "." + m["ext"] if suffix else m["ext"]
    return m["date"], kind, commit, label


def classify(kind: str) -> tuple[str, str, int]:
    """(section, title, position) of a kind; kinds no rule names go to OTHER."""
    pos = 0
    for section, rules in SECTIONS:
        for pattern, title in rules:
            if re.fullmatch(pattern, kind):
                return section, title, pos
            pos += 1
    return OTHER, f"`{kind}`", pos


def commit_times(root: Path) -> dict[str, int]:
    """Commit time of every commit in HEAD's history, keyed by its 7-character prefix (and the
    full hash). Empty outside a git checkout."""
    try:
        out = subprocess.run(["git", "log", "--format=%H %ct", "HEAD"], cwd=root, capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    times: dict[str, int] = {}
    for line in out.splitlines():
        full, ct = line.split()
        times[full] = int(ct)
        times.setdefault(full[:7], int(ct))
    return times


def collect(results: Path) -> tuple[dict[str, list[Record]], list[str]]:
    """Records by kind (top level and gpu-tests/), and the names that follow no pattern."""
    files: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    loose: list[str] = []
    candidates = [p for p in results.iterdir() if p.is_file() and p.name != INDEX]
    gpu = results / "gpu-tests"
    if gpu.is_dir():
        candidates += [p for p in gpu.iterdir() if p.is_file()]
    for p in candidates:
        rel = p.relative_to(results).as_posix()
        parsed = parse(p.name)
        if parsed is None:
            loose.append(rel)
            continue
        date, kind, commit, _ = parsed
        files[(kind, date, commit, card(p.name))].append(rel)
    by_kind: dict[str, list[Record]] = defaultdict(list)
    for (kind, date, commit, gpu), rels in files.items():
        by_kind[kind].append(Record(kind, date, commit, tuple(sorted(rels)), gpu))
    return by_kind, sorted(loose)


def card(name: str) -> str:
    """The card a record's file name names ("h200", "h100", ...), or "" when it names none."""
    m = NAME.match(name)
    return (m["gpu"] or "") if m else ""


def by_card(records: list[Record]) -> list[tuple[str, list[Record]]]:
    """A kind's records (newest first) grouped by the card that ran them: the H200, the project's
    card, first, then the others by name; each group keeps the order it is given."""
    cards = sorted({r.gpu for r in records}, key=lambda g: (g != "h200", g == "", g))
    return [(g, [r for r in records if r.gpu == g]) for g in cards]


def _card(gpu: str) -> str:
    return gpu.upper() if gpu and gpu != "gpu" else "—"


def newest_first(records: list[Record], times: dict[str, int]) -> list[Record]:
    def key(r: Record):
        ct = times.get(r.commit.removesuffix("-dirty")[:7], -1) if r.commit else -1
        return (r.date, ct, r.commit, r.files)
    return sorted(records, key=key, reverse=True)


def _links(r: Record) -> str:
    out = []
    for rel in r.files:
        label = parse(Path(rel).name)[3]
        out.append(f"[{label}]({rel})")
    return " · ".join(out)


def _commit(r: Record) -> str:
    return f"`{r.commit}`" if r.commit else "—"


def render(results: Path, times: dict[str, int]) -> str:
    by_kind, loose = collect(results)
    ordered = {k: newest_first(v, times) for k, v in by_kind.items()}
    sections: dict[str, list[tuple[int, str, str]]] = defaultdict(list)
    for kind in ordered:
        section, title, pos = classify(kind)
        sections[section].append((pos, kind, title))
    lines = [
        "# Recorded runs: the index",
        "",
        "Generated by `scripts/results_index.py` from the file names in this folder; do not edit by",
        "hand. `python scripts/results_index.py` rewrites it, and a CPU test",
        "(`tests/test_results_index.py`) fails when it is stale. Names follow",
        "`<date>_<gpu>_<kind>_<commit>[_<suffix>].<ext>`; the files of one run form one record. The",
        "current record of a kind is the newest by date, then by the time of the commit it names, on",
        "each card that has run that kind (the H200 first).",
        "",
        "GPU-test logs are in `gpu-tests/`; probe data and logs in `experiments/` (the scripts that",
        "made them in `../probes/`); measured traces in `traces/`.",
        "",
    ]
    order = [s for s, _ in SECTIONS] + [OTHER]
    for section in order:
        if section not in sections:
            continue
        lines += [f"## {section}", "", "| kind | card | current | date | files | older |", "|---|---|---|---|---|---|"]
        for _, kind, title in sorted(sections[section]):
            for gpu, recs in by_card(ordered[kind]):
                cur = recs[0]
                lines.append(f"| {title} (`{kind}`) | {_card(gpu)} | {_commit(cur)} | {cur.date} | {_links(cur)} "
                             f"| {len(recs) - 1} |")
        lines.append("")
    traces = results / "traces"
    if traces.is_dir():
        names = sorted(p.name for p in traces.iterdir() if p.is_file())
        lines += ["## Measured traces (`traces/`)", ""]
        lines += [f"- [{n}](traces/{n})" for n in names]
        lines.append("")
    exp = results / "experiments"
    if exp.is_dir():
        probes = results.parent / "probes"
        lines += ["## Probe data (`experiments/`)", "",
                  "| folder | files | probe scripts |", "|---|---|---|"]
        top = sorted(p.name for p in exp.iterdir() if p.is_file())
        if top:
            lines.append(f"| (top level) | {len(top)} | — |")
        for d in sorted(p for p in exp.iterdir() if p.is_dir()):
            n = sum(1 for p in d.rglob("*") if p.is_file())
            script_dir = probes / d.name
            scripts = (f"[probes/{d.name}/](../probes/{d.name}/)" if script_dir.is_dir() else "—")
            lines.append(f"| [{d.name}/](experiments/{d.name}/) | {n} | {scripts} |")
        lines.append("")
    if loose:
        lines += ["## Files whose names follow no pattern", ""]
        lines += [f"- [{n}]({n})" for n in loose]
        lines.append("")
    lines += ["## Older records", "", "Newest first, per kind: date and commit.", ""]
    for section in order:
        for _, kind, _ in sorted(sections.get(section, [])):
            groups = by_card(ordered[kind])
            for gpu, recs in groups:
                older = recs[1:]
                if not older:
                    continue
                by_date: dict[str, list[str]] = defaultdict(list)
                for r in older:
                    by_date[r.date].append(r.commit or "(no commit)")
                parts = [f"{d}: " + ", ".join(cs) for d, cs in by_date.items()]
                on = f", {_card(gpu)}" if len(groups) > 1 else ""
                lines.append(f"- `{kind}` ({len(older)}{on}): " + "; ".join(parts))
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if the checked-in index differs")
    ap.add_argument("--root", type=Path, default=ROOT, help="repository root (default: this checkout)")
    args = ap.parse_args(argv)
    results = args.root / RESULTS
    text = render(results, commit_times(args.root))
    path = results / INDEX
    if args.check:
        if not path.is_file() or path.read_text() != text:
            print(f"{RESULTS / INDEX} is stale: run python scripts/results_index.py and commit it", file=sys.stderr)
            return 1
        return 0
    path.write_text(text)
    print(f"wrote {RESULTS / INDEX}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
