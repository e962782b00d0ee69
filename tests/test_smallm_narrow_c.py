"""The small-M family's narrow staged C on the CPU (smallm:n32t, docs/perf-notes.md item 114): the
entry, C's map (64 x 32, unswizzled) as kernel_args and the library's fast path (emulated) build it,
and the SASS of the TMA store. The GPU side is tests/test_gpu_smallm_narrow_c.py."""
import dataclasses

import pytest

from gemm_ladder.families import smallm
from gemm_ladder.library import select
from gemm_ladder.measure import sass
from sass_util import sass_or_skip


def test_narrow_staged_c_entry():
    """smallm:n32t (item 114): n32 with C staged as one unswizzled 64 x 32 chunk and stored by
    one TMA copy through a 64 x 32 box without swizzle; an experiment, not a selection candidate."""
    fam, base = smallm.FAMILIES["smallm:n32t"], smallm.FAMILIES["smallm:n32"]
    assert fam == dataclasses.replace(base, key=fam.key, variant=fam.variant, narrow_staged_c=True)
    assert fam.kernel_defines() == dict(base.kernel_defines(), GL_NARROW_C=1)
    assert fam.staged_c and not base.staged_c and {"UTMASTG", "STSM"} <= set(fam.claims)
    assert (fam.c_box(), base.c_box()) == ((64, 32, False), (64, 64, True))
    # C's map (ptr, rows, cols, row stride, box rows, box cols, bf16, swizzled): clipped at M and N by TMA
    c_map = fam.kernel_args(1, 2, 0, 3, 5, 200, 256, 4, bf16=True, make_map=lambda *x: x)[2]
    assert c_map == (3, 5, 200, 200, 64, 32, True, False)
    assert fam.key not in select.CANDIDATES
    with pytest.raises(ValueError, match="32-wide tiles"):
        smallm.with_fields(smallm.FAMILIES["smallm:n64"], "narrow", narrow_staged_c=True)


@pytest.mark.parametrize("bf16", [False, True], ids=["fp16", "bf16"])
def test_narrow_staged_c_sass(bf16):
    """n32t's whole tiles leave by one TMA store of a chunk two stmatrix.x4 wrote; n32's by
    register stores (no TMA store, no stmatrix)."""
    narrow, base = (sass.opcodes(sass_or_skip(smallm.FAMILIES[k].compile(bf16=bf16).cubin))
                    for k in ("smallm:n32t", "smallm:n32"))
    assert (sass.count_class(narrow, "UTMASTG"), sass.count_class(narrow, "STSM")) == (1, 2)
    assert (sass.count_class(base, "UTMASTG"), sass.count_class(base, "STSM")) == (0, 0)


def test_narrow_staged_c_through_the_library(monkeypatch):
    """Forced through the library's fast path (emulated, tests/fake_gpu.py, which holds C's map
    to the entry's c_box), n32t's C map covers C and is boxed 64 x 32 unswizzled."""
    torch = pytest.importorskip("torch")
    import gemm_ladder
    from fake_gpu import FakeGpu, rnd
    gpu = FakeGpu(monkeypatch)
    x, w = rnd(5, 256), rnd(200, 256, seed=1)
    ref = x.float() @ w.float().T
    c = gemm_ladder.matmul_nt(x, w, step="smallm:n32t")
    torch.testing.assert_close(c.float(), ref, atol=2e-2 * ref.abs().max().item(), rtol=1e-2)
    mc = next(r for r in reversed(gpu.launches) if r.name == "gemm_smallm_splitk").maps[2]
    assert (mc.rows, mc.cols, mc.box, mc.swizzle_128b) == (5, 200, (64, 32), False)
