"""The fp8 promotion's build variants without a GPU (families/fp8.py PROMOTION_VARIANTS): each
builds every scale mode with no spill and no wgmma that ptxas serializes (its C75xx notes come
as "info" lines, which the JIT's strict check does not read, so the log is read here); the
overlapped promotion keeps a k-tile's four MMAs under one arrive and waits with one group in
flight; the library's own builds are untouched by the new switches."""
import pytest

from gemm_ladder.families import fp8
from gemm_ladder.families.common import ConfigError
from gemm_ladder.measure import sass
from sass_util import sass_or_skip

OVERLAPPED = ("fp8:128x128p", "fp8:128x128pc1", "fp8:128x128sk")  # the library's entries built with okt
BUILDS = [(fp8.with_fields(fp8.get(key), name, **fp8.PROMOTION_VARIANTS[name]), mode)
          for key, name in [("fp8:128x128p", "late"), ("fp8:128x256p", "late")]
          for mode in ("tensor", "row", "block")] + \
         [(fp8.get(key), mode) for key in OVERLAPPED for mode in ("tensor", "row", "block")]




@pytest.mark.parametrize("e,mode", BUILDS, ids=[f"{e.key}-{m}" for e, m in BUILDS])
def test_variant_builds_without_spills_or_serialized_wgmma(e, mode):
    k = e.compile(variant=fp8.Variant(mode, "bfloat16"))
    assert k.report.spill_bytes == 0 and k.report.stack_frame_bytes == 0
    assert not [ln for ln in k.log.splitlines() if "C75" in ln], k.log
    ops = sass.opcodes(sass_or_skip(k.cubin))
    # serialized wgmma: one arrive (and a wait) per instruction; a k-tile's four k-slices share one
    assert sass.count_class(ops, "QGMMA") == 4 * sass.count_class(ops, "WARPGROUP.ARRIVE")


def test_overlap_waits_with_a_group_in_flight():
    e = fp8.get("fp8:128x128p")
    assert e.overlap_kt
    text = sass_or_skip(e.compile(variant=fp8.Variant("block", "bfloat16")).cubin)
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in text
    plain = fp8.with_fields(e, "plain", overlap_kt=False)
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" not in sass_or_skip(plain.compile(variant=fp8.Variant("block", "bfloat16")).cubin)


@pytest.mark.parametrize("key", OVERLAPPED)
def test_overlapped_entries_build_row_wise_with_a_16_bit_bias(key):
    """Two partials spill beside row-wise column factors (not in split-K's epilogue) or a bias:
    those builds keep one partial."""
    k = fp8.get(key).compile(variant=fp8.Variant("row", "bfloat16", bias=True))
    assert k.report.spill_bytes == 0 and k.report.stack_frame_bytes == 0
    assert not [ln for ln in k.log.splitlines() if "C75" in ln], k.log
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" not in sass_or_skip(k.cubin)


@pytest.mark.parametrize("key", OVERLAPPED)
@pytest.mark.parametrize("out", ["bfloat16", "float16", "float32"])
def test_overlapped_entries_build_block_scales_with_a_bias(key, out):
    k = fp8.get(key).compile(variant=fp8.Variant("block", out, bias=True))
    assert k.report.spill_bytes == 0 and k.report.stack_frame_bytes == 0


def test_variants_refuse_what_they_cannot_build_and_leave_the_library_alone():
    with pytest.raises(ConfigError, match="one piece"):
        fp8.with_fields(fp8.get("fp8:128x256p"), "okt", overlap_kt=True).compile(variant=fp8.Variant("block"))
    for e in fp8.ENTRIES.values():  # only the 128-wide promoted entries overlap; none reads scales late
        assert ("GL_FP8_OVERLAP_KT" in e.kernel_defines()) == (e.key in OVERLAPPED)
        assert "GL_FP8_LATE_SCALES" not in e.kernel_defines()
    assert fp8.with_fields(fp8.get("fp8:128x128p"), "okt", overlap_kt=True).key == "fp8:128x128p-okt"
