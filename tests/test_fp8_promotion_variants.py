"""The fp8 promotion's build variants without a GPU (families/fp8.py PROMOTION_VARIANTS): each
builds every scale mode with no spill and no wgmma that ptxas serializes (its C75xx notes come
as "info" lines, which the JIT's strict check does not read, so the log is read here); the
overlapped promotion keeps a k-tile's four MMAs under one arrive and waits with one group in
flight; the library's own builds are untouched by the new switches."""
import pytest

from gemm_ladder.families import fp8
from gemm_ladder.families.common import ConfigError
from gemm_ladder.measure import sass

BUILDS = [(fp8.with_fields(fp8.get(key), name, **fp8.PROMOTION_VARIANTS[name]), mode)
          for key, name in [("fp8:128x128p", "okt"), ("fp8:128x128p", "late"), ("fp8:128x256p", "late")]
          for mode in ("tensor", "row", "block")]


def _sass(cubin):
    try:
        return sass.disassemble(cubin)
    except sass.SassUnavailable as e:
        pytest.skip(str(e))


@pytest.mark.parametrize("e,mode", BUILDS, ids=[f"{e.key}-{m}" for e, m in BUILDS])
def test_variant_builds_without_spills_or_serialized_wgmma(e, mode):
    k = e.compile(variant=fp8.Variant(mode, "bfloat16"))
    assert k.report.spill_bytes == 0 and k.report.stack_frame_bytes == 0
    assert not [ln for ln in k.log.splitlines() if "C75" in ln], k.log
    ops = sass.opcodes(_sass(k.cubin))
    # serialized wgmma: one arrive (and a wait) per instruction; a k-tile's four k-slices share one
    assert sass.count_class(ops, "QGMMA") == 4 * sass.count_class(ops, "WARPGROUP.ARRIVE")


def test_overlap_waits_with_a_group_in_flight():
    e = fp8.with_fields(fp8.get("fp8:128x128p"), "okt", overlap_kt=True)
    text = _sass(e.compile(variant=fp8.Variant("block", "bfloat16")).cubin)
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" in text
    assert "WARPGROUP.DEPBAR.LE gsb0, 0x1" not in _sass(fp8.get("fp8:128x128p").compile(
        variant=fp8.Variant("block", "bfloat16")).cubin)


def test_variants_refuse_what_they_cannot_build_and_leave_the_library_alone():
    with pytest.raises(ConfigError, match="one piece"):
        fp8.with_fields(fp8.get("fp8:128x256p"), "okt", overlap_kt=True).compile(variant=fp8.Variant("block"))
    for e in fp8.ENTRIES.values():  # the library's builds keep their options (and their cubins)
        assert not {"GL_FP8_OVERLAP_KT", "GL_FP8_LATE_SCALES"} & set(e.kernel_defines())
    assert fp8.with_fields(fp8.get("fp8:128x128p"), "okt", overlap_kt=True).key == "fp8:128x128p-okt"
