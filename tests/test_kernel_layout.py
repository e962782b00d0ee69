"""The kernels' house rules, checked without a GPU: each ladder step differs from the one before
it by its forced move (the diff sizes are printed and bounded), every switch's default lives in
one header and the Python table names each one, header names are unique across the kernel
folders (includes are looked up by bare name), and no code outside the pipeline header
touches an mbarrier by hand."""
from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest

from gemm_ladder.families.switches import SWITCHES

KERNELS = Path(__file__).resolve().parents[1] / "src" / "gemm_ladder" / "kernels"
LADDER = sorted(KERNELS.glob("ladder/step*.cu"), key=lambda p: int(re.search(r"step(\d+)", p.name).group(1)))
GEMM_LADDER = LADDER[:10]  # steps 1-10; step 11 (fp8) builds on step 9, not on step 10's ping-pong
# The warp-specialized steps build on each other one move at a time; the course's steps
# 1-6 each rewrite more (a new kind of kernel per step), so only 7 -> 10 are bounded here.
MAX_CHANGED_LINES = 120


def changed_lines(a: Path, b: Path) -> int:
    diff = difflib.unified_diff(a.read_text().splitlines(), b.read_text().splitlines(), lineterm="", n=0)
    return sum(1 for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---"))


def test_ladder_steps_diff_by_their_forced_move(capsys):
    sizes = {f"{a.stem} -> {b.stem}": changed_lines(a, b) for a, b in zip(GEMM_LADDER, GEMM_LADDER[1:])}
    sizes[f"{LADDER[8].stem} -> {LADDER[10].stem}"] = changed_lines(LADDER[8], LADDER[10])
    with capsys.disabled():
        print("\nlines changed from each ladder step to the next:")
        for pair, n in sizes.items():
            print(f"  {pair}: {n}")
    assert len(LADDER) == 11
    for pair, n in list(sizes.items())[-4:]:  # 7 -> 8, 8 -> 9, 9 -> 10, 9 -> 11
        assert n <= MAX_CHANGED_LINES, f"{pair} changes {n} lines"


ATTENTION = [KERNELS / "attention" / f for f in ("attn_a2_fused.cu", "attn_a3_warp_specialized.cu",
                                                 "attn_a4_pingpong.cu", "attn_a5_intra_overlap.cu")]


def test_attention_steps_diff_by_their_forced_move(capsys):
    """A3 -> A4 -> A5 each change one thing (A2 -> A3 rewrites the kernel around roles; what the
    warp-specialized steps share lives in attn_warpspec.cuh)."""
    sizes = {f"{a.stem} -> {b.stem}": changed_lines(a, b) for a, b in zip(ATTENTION, ATTENTION[1:])}
    with capsys.disabled():
        print("\nlines changed from each attention step to the next:")
        for pair, n in sizes.items():
            print(f"  {pair}: {n}")
    for pair, n in list(sizes.items())[1:]:  # A3 -> A4, A4 -> A5
        assert n <= MAX_CHANGED_LINES, f"{pair} changes {n} lines"


def _defaults(text: str) -> set[str]:
    return set(re.findall(r"#ifndef\s+(GL_\w+)\s*\n\s*#define\s+\1\b", text))


def test_every_switch_default_lives_in_the_ablations_header():
    header = (KERNELS / "common" / "gl_ablations.cuh").read_text()
    assert _defaults(header) == set(SWITCHES), "gl_ablations.cuh and families/switches.py name different switches"
    for path in KERNELS.rglob("*.cu*"):
        if path.name == "gl_ablations.cuh":
            continue
        text = path.read_text()
        assert not _defaults(text), f"{path.relative_to(KERNELS)} defaults {sorted(_defaults(text))}"
        assert "GL_ABLATE" not in text or path.parent.name != "ladder", \
            f"{path.relative_to(KERNELS)}: a ladder step reads a switch; its mechanism's header should"


def test_header_names_are_unique_across_the_kernel_folders():
    names = [p.name for p in KERNELS.rglob("*.cuh")]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)


@pytest.mark.parametrize("path", sorted(p for p in KERNELS.rglob("*.cu*") if p.name != "gl_mbarrier.cuh"),
                         ids=lambda p: str(p.relative_to(KERNELS)))
def test_barrier_instructions_only_through_their_wrappers(path):
    """mbarrier PTX is written once (gl_mbarrier.cuh, gl_cluster.cuh for remote arrives); the
    rings' barriers are touched only by the pipeline object (gl_pipeline.cuh)."""
    text = path.read_text()
    if path.name != "gl_cluster.cuh":  # its remote arrives are the other wrappers
        assert not re.search(r'"mbarrier\.', text), f"{path.name} writes mbarrier PTX itself"
    if path.parent.name in ("ladder", "gemm", "smallm"):
        for verb in ("mbar_arrive", "mbar_wait", "mbar_init", "mbar_try_wait"):
            assert verb not in text, f"{path.relative_to(KERNELS)} calls {verb} by hand"


def test_generated_wgmma_wrappers_are_current():
    """The checked-in wrapper headers are what tools/gen_wgmma.py writes (no hand edits)."""
    import importlib.util
    tool = Path(__file__).resolve().parents[1] / "tools" / "gen_wgmma.py"
    spec = importlib.util.spec_from_file_location("gen_wgmma", tool)
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for path, text in gen.texts().items():
        assert path.read_text() == text, f"{path.name} differs from tools/gen_wgmma.py's output: rerun it"
