"""The fp8 promotion's build variants without a GPU (families/fp8.py PROMOTION_VARIANTS): each
builds every scale mode with no spill and no wgmma that ptxas serializes (its C75xx notes come
as "info" lines, which the JIT's strict check does not read, so the log is read here); the
overlapped promotions keep each group's four MMAs under one arrive and wait with one group in
flight; the library's own builds are untouched by the new switches."""
from collections import Counter

import pytest

from gemm_ladder.families import fp8
from gemm_ladder.families.common import ConfigError
from gemm_ladder.measure import sass
from sass_util import sass_or_skip

# the library's entries built with okt: the 128-wide promoted tiles, and the 64-row tiles
OVERLAPPED = ("fp8:128x128p", "fp8:128x128pc1", "fp8:128x128sk", "fp8:64x64pc1", "fp8:64x64sk",
              "fp8:64x128sk", "fp8:64x128pc1")
PIECES = fp8.with_fields(fp8.get("fp8:128x256p"), "op4", **fp8.PROMOTION_VARIANTS["op4"])
BUILDS = [(fp8.with_fields(fp8.get(key), name, **fp8.PROMOTION_VARIANTS[name]), mode)
          for key, name in [("fp8:128x128p", "late"), ("fp8:128x256p", "late"), ("fp8:128x256p", "op4"),
                            ("fp8:128x256p", "rows")]
          for mode in ("tensor", "row", "block")] + \
         [(fp8.get(key), mode) for key in OVERLAPPED for mode in fp8.get(key).modes]




@pytest.mark.parametrize("e,mode", BUILDS, ids=[f"{e.key}-{m}" for e, m in BUILDS])
def test_variant_builds_without_spills_or_serialized_wgmma(e, mode):
    k = e.compile(variant=fp8.Variant(mode, "bfloat16"))
    assert k.report.spill_bytes == 0 and k.report.stack_frame_bytes == 0
    assert not [ln for ln in k.log.splitlines() if "C75" in ln], k.log
    ops = sass.opcodes(sass_or_skip(k.cubin))
    # serialized wgmma: one arrive (and a wait) per instruction; a k-tile's four k-slices share one
    assert sass.count_class(ops, "QGMMA") == 4 * sass.count_class(ops, "WARPGROUP.ARRIVE")


def test_rows_changes_only_how_block_scales_are_addressed():
    """rows changes only where the block scales' addresses come from: per-tensor and row-wise
    builds are the as-is ones, and the block build loses the per-k-tile index arithmetic."""
    rows = fp8.with_fields(fp8.get("fp8:128x256p"), "rows", **fp8.PROMOTION_VARIANTS["rows"])
    assert rows.kernel_defines()["GL_FP8_SCALE_ROWS"] == 1
    base, var = (e.compile(variant=fp8.Variant("tensor", "bfloat16")) for e in (fp8.get("fp8:128x256p"), rows))
    assert base.cubin == var.cubin or sass_or_skip(base.cubin) == sass_or_skip(var.cubin)
    block = [sass.opcodes(sass_or_skip(e.compile(variant=fp8.Variant("block", "bfloat16")).cubin))
             for e in (fp8.get("fp8:128x256p"), rows)]
    assert sum(block[1].values()) < sum(block[0].values())


def test_overlap_waits_with_a_group_in_flight():
    e = fp8.get("fp8:128x128p")
    assert e.overlap_kt
    text = sass_or_skip(e.compile(variant=fp8.Variant("block", "bfloat16")).cubin)
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in text
    plain = fp8.with_fields(e, "plain", overlap_kt=False)
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" not in sass_or_skip(plain.compile(variant=fp8.Variant("block", "bfloat16")).cubin)


@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
def test_pieces_overlap_keeps_a_group_in_flight_in_the_k_loop(mode):
    """op4's steady k-loop, one k-tile per pass: four 64-column pieces of four MMAs each under
    one arrive, a wait with one group in flight after each (none that waits for all), and the
    128 adds (block: FFMAs by the factors) that promote them; four block-scale loads."""
    assert PIECES.key == "fp8:128x256p-op4" and PIECES.claims[-1] == "QGMMA.64x64x32.F32.E4M3.E4M3"
    text = sass_or_skip(PIECES.compile(variant=fp8.Variant(mode, "bfloat16")).cubin)
    body = sass.mma_loop_body(text)
    ops = Counter(t.split()[1] if t.startswith("@") else t.split()[0] for t in body)
    assert sass.count_class(ops, "QGMMA.64x64x32") == 16
    assert ops["WARPGROUP.ARRIVE"] == 4
    assert sum(t.startswith("WARPGROUP.DEPBAR.LE gsb0, 0x1") for t in body) == 4
    assert sass.mma_loop_full_waits(text) == 0
    promote = "FFMA" if mode == "block" else "FADD"
    assert sass.count_class(ops, promote) == 128 and sass.count_class(ops, "LDG") == (4 if mode == "block" else 0)
    # B's block scale stays in a vector register: no R2UR waiting for a load just issued
    assert sass.count_class(ops, "R2UR") == 0


@pytest.mark.parametrize("out,bias", [("bfloat16", True), ("float16", False), ("float32", True)])
@pytest.mark.parametrize("mode", ["tensor", "block"])
def test_pieces_overlap_builds_every_output_and_bias(mode, out, bias):
    k = PIECES.compile(variant=fp8.Variant(mode, out, bias=bias))
    assert k.report.spill_bytes == 0 and k.report.stack_frame_bytes == 0
    assert not [ln for ln in k.log.splitlines() if "C75" in ln], k.log


@pytest.mark.parametrize("key", OVERLAPPED)
def test_overlapped_entries_build_row_wise_with_a_16_bit_bias(key):
    """On 128-wide tiles two partials spill beside row-wise column factors (not in split-K's
    epilogue) or a bias: those builds keep one partial. 64-wide tiles keep both (a wait with
    one group in flight)."""
    e = fp8.get(key)
    k = e.compile(variant=fp8.Variant("row", "bfloat16", bias=True))
    assert k.report.spill_bytes == 0 and k.report.stack_frame_bytes == 0
    assert not [ln for ln in k.log.splitlines() if "C75" in ln], k.log
    assert ("WARPGROUP.DEPBAR.LE gsb0, 0x1" in sass_or_skip(k.cubin)) == (e.bn == 64)


@pytest.mark.parametrize("key", [k for k in OVERLAPPED if "block" in fp8.get(k).modes])
@pytest.mark.parametrize("out", ["bfloat16", "float16", "float32"])
def test_overlapped_entries_build_block_scales_with_a_bias(key, out):
    k = fp8.get(key).compile(variant=fp8.Variant("block", out, bias=True))
    assert k.report.spill_bytes == 0 and k.report.stack_frame_bytes == 0


def test_variants_refuse_what_they_cannot_build_and_leave_the_library_alone():
    with pytest.raises(ConfigError, match="one piece"):
        fp8.with_fields(fp8.get("fp8:128x256p"), "okt", overlap_kt=True).compile(variant=fp8.Variant("block"))
    op4 = fp8.PROMOTION_VARIANTS["op4"]
    with pytest.raises(ConfigError, match="order one promotion two ways"):  # 128 x 128: okt's tile
        fp8.with_fields(fp8.get("fp8:128x128p"), "op2", pieces=2, overlap_pieces=True).compile()
    with pytest.raises(ConfigError, match="not 32"):
        fp8.with_fields(fp8.get("fp8:128x128p"), "op4", **op4, overlap_kt=False).compile()
    with pytest.raises(ConfigError, match="192 do not fit"):  # two 128-column partials beside the sum
        fp8.with_fields(fp8.get("fp8:128x256p"), "op2", pieces=2, overlap_pieces=True).compile()
    with pytest.raises(ConfigError, match="promotion every k-tile"):
        fp8.with_fields(fp8.get("fp8:128x256"), "op4", **op4).compile()
    with pytest.raises(ConfigError, match="spill"):  # the tile's own refusal holds
        PIECES.compile(variant=fp8.Variant("row", "bfloat16", bias=True))
    for e in fp8.ENTRIES.values():  # only the 128-wide promoted entries overlap k-tiles, only the block
        # scales' 128 x 256 entry pieces (op4's build); none reads scales late
        assert ("GL_FP8_OVERLAP_KT" in e.kernel_defines()) == (e.key in OVERLAPPED)
        assert "GL_FP8_LATE_SCALES" not in e.kernel_defines() and "GL_FP8_SCALE_ROWS" not in e.kernel_defines()
        assert ("GL_FP8_OVERLAP_PIECES" in e.kernel_defines()) == (e.key == "fp8:128x256pb")
    pb = fp8.get("fp8:128x256pb")
    assert {k: v for k, v in pb.kernel_defines().items()} == PIECES.kernel_defines() and pb.modes == ("block",)
    assert fp8.with_fields(fp8.get("fp8:128x128p"), "okt", overlap_kt=True).key == "fp8:128x128p-okt"
    assert PIECES.kernel_defines()["GL_FP8_PIECES"] == 4 and PIECES.kernel_defines()["GL_FP8_OVERLAP_PIECES"] == 1
