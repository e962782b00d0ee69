"""The library's fast path without a GPU: layout classification, caches, the launch each
call would make (emulated on the CPU by fake_gpu.FakeGpu), errors, and the custom op."""
from types import SimpleNamespace

import pytest
import torch

import gemm_ladder
from fake_gpu import FakeGpu, rnd
from gemm_ladder.families import smallm
from gemm_ladder.families.keys import get_step
from gemm_ladder.families.ladder_step import Step
from gemm_ladder.library import api, fastconfig, fastpath, layout, select
from gemm_ladder.library import staging


@pytest.fixture
def gpu(monkeypatch):
    return FakeGpu(monkeypatch)


def assert_product(c, a, b):
    """c == a @ b (fp32 reference, fp16/bf16 rounding)."""
    ref = a.float() @ b.float()
    assert c.shape == ref.shape
    torch.testing.assert_close(c.float(), ref, atol=2e-2 * ref.abs().max().item(), rtol=1e-2)


# ---- layout classification (pure) --------------------------------------------------------

def test_fold_rows():
    assert layout.fold_rows((4, 6, 8), (48, 8, 1)) == (24, 8)
    assert layout.fold_rows((4, 6, 8), (96, 16, 1)) == (24, 16)  # row-strided batch folds
    assert layout.fold_rows((4, 6, 8), (8, 32, 1)) is None  # permuted batch does not
    assert layout.fold_rows((1, 6, 8), (999, 8, 1)) == (6, 8)  # size-1 dims are free
    assert layout.fold_rows((1, 8), (3, 1)) == (1, None)


@pytest.mark.parametrize("rows,k,rs,cs,ptr_ok,mn_ok,expect", [
    (64, 64, 64, 1, True, False, ("K", 64, True)),          # row-major
    (64, 64, 128, 1, True, False, ("K", 128, True)),        # x[:, :64] of a (64, 128)
    (64, 13, 16, 1, True, False, ("K", 16, True)),          # K=13 in a 16-wide buffer: no padding copy
    (64, 13, 13, 1, True, False, ("K", 13, False)),         # 26-byte rows: unaligned
    (64, 64, 64, 1, False, False, ("K", 64, False)),        # misaligned pointer
    (64, 64, 1, 64, True, False, ("MN", 64, False)),        # transposed: copy for a K-major-only step
    (64, 64, 1, 64, True, True, ("MN", 64, True)),          # ... and in place with them
    (64, 64, 2, 128, True, True, ("K", 64, False)),         # neither dimension contiguous
    (64, 64, 0, 1, True, False, ("K", 0, False)),           # broadcast rows overlap
    (1, 40, None, 1, True, False, ("K", 40, True)),         # single row: any stride
])
def test_operand_classification(rows, k, rs, cs, ptr_ok, mn_ok, expect):
    op = layout.operand(rows, k, rs, cs, ptr_aligned=ptr_ok, mn_major_ok=mn_ok)
    assert (op.major, op.ld, op.direct) == expect
    assert bool(op.why) != op.direct
    assert op.staged_ld == layout.round_up(k, 8)


def test_output_classification_and_result_strides():
    assert layout.output(8, 32, 40, 1, ptr_aligned=True).direct
    assert not layout.output(8, 33, 40, 1, ptr_aligned=True).direct  # would write past N=33
    assert not layout.output(8, 33, 33, 1, ptr_aligned=True).direct  # 66-byte rows
    assert not layout.output(8, 32, 1, 8, ptr_aligned=True).direct  # column-major out
    assert layout.output(1, 32, None, 1, ptr_aligned=True).direct
    assert not layout.output(1, 33, None, 1, ptr_aligned=True).direct
    assert layout.result_strides((5,), 33) == ((5, 33), (40, 1))
    assert layout.result_strides((2, 3), 16) == ((2, 3, 16), (48, 16, 1))
    assert torch.empty(2, 3, 16).stride() == layout.result_strides((2, 3), 16)[1]


def test_lru_bound_and_recency():
    lru = fastpath.LRU(3)
    for i in range(3):
        lru.put(i, str(i))
    assert lru.get(0) == "0"  # 0 is now the most recent
    lru.put(3, "3")
    lru.put(4, "4")
    assert len(lru) == 3 and lru.get(1) is None and lru.get(2) is None
    assert lru.get(0) == "0" and lru.get(4) == "4"


# ---- the emulated fast path --------------------------------------------------------------

def _strided(rows, cols, row_stride, seed):
    return rnd(rows, row_stride, seed=seed)[:, :cols]


def _misaligned(rows, cols, seed):
    return rnd(rows * cols + 1, seed=seed)[1:].view(rows, cols)


A_LAYOUTS = {
    "row-major": lambda M, K: rnd(M, K, seed=1),
    "row-strided slice": lambda M, K: _strided(M, K, layout.round_up(K, 8) + 8, 2),
    "transposed view": lambda M, K: rnd(K, M, seed=3).T,
    "misaligned": lambda M, K: _misaligned(M, K, 4),
    "column-strided": lambda M, K: rnd(M, 2 * K, seed=5)[:, ::2],
}
B_LAYOUTS = {  # b is (K, N)
    "row-major": lambda K, N: rnd(K, N, seed=6),
    "transposed view": lambda K, N: rnd(N, K, seed=7).T,
    "strided transposed view": lambda K, N: _strided(N, K, layout.round_up(K, 8) + 16, 8).T,
    "misaligned": lambda K, N: _misaligned(K, N, 9),
}


@pytest.mark.parametrize("M,N,K", [(64, 48, 32), (37, 33, 13), (1, 8, 24), (130, 1, 9)])
@pytest.mark.parametrize("a_kind", list(A_LAYOUTS))
@pytest.mark.parametrize("b_kind", list(B_LAYOUTS))
def test_every_layout_matches_reference(gpu, M, N, K, a_kind, b_kind):
    a, b = A_LAYOUTS[a_kind](M, K), B_LAYOUTS[b_kind](K, N)
    c = gemm_ladder.matmul(a, b)
    assert_product(c, a, b)
    assert c.stride() == layout.result_strides((M,), N)[1]


@pytest.mark.parametrize("out_kind,N,in_place", [
    ("contiguous", 32, True), ("contiguous", 33, False),  # 66-byte rows need the temporary
    ("padded rows", 32, True), ("column-major", 32, False), ("misaligned", 32, False),
    # a TMA store writes a row's last 16-byte granule whole: N=33 would write into the padding
    ("padded rows", 33, False)])
def test_out_written_in_place_when_its_strides_allow(gpu, out_kind, N, in_place):
    M, K = 160, 24  # a ladder step, forced (C through its tensor map)
    a, w = rnd(M, K), rnd(N, K, seed=1)
    out = {"contiguous": lambda: torch.empty((M, N)).half(),
           "padded rows": lambda: torch.empty((M, 48)).half()[:, :N],
           "column-major": lambda: torch.empty((N, M)).half().T,
           "misaligned": lambda: _misaligned(M, N, 3)}[out_kind]()
    out.fill_(float("nan"))
    res = gemm_ladder.matmul(a, w.T, out=out, step="8:c1")
    assert res is out
    assert_product(out, a, w.T)
    assert (gpu.launches[-1].maps[2].ptr == out.data_ptr()) == in_place


def test_direct_operands_are_not_copied(gpu):
    """What the kernel reads is the caller's memory: the maps point at the tensors."""
    # row-strided slice, K=72 of a 80-wide buffer (M > 128 and K not a multiple of 16: a ladder step)
    x = rnd(192, 80)[:, :72]
    w = rnd(40, 72, seed=1)
    y = gemm_ladder.linear(x, w)
    assert_product(y, x, w.T)
    ma, mb, mc = gpu.launches[-1].maps
    assert (ma.ptr, ma.ld, mb.ptr, mb.ld, mc.ptr) == (x.data_ptr(), 80, w.data_ptr(), 72, y.data_ptr())
    xk = rnd(192, 32)[:, :21]  # K=21, 64-byte row stride: zero fill, no padding copy
    wk = rnd(40, 32, seed=2)[:, :21]
    assert_product(gemm_ladder.matmul_nt(xk, wk), xk, wk.T)
    ma, mb, _ = gpu.launches[-1].maps
    assert (ma.ptr, ma.cols, ma.ld, mb.ptr) == (xk.data_ptr(), 21, 32, wk.data_ptr())


def test_mn_major_operands_go_direct_to_a_step_with_mn_major(gpu):
    a_t, b = rnd(48, 192).T, rnd(48, 40, seed=1)  # a M-major (192 x 48), b row-major (K, N)
    assert_product(gemm_ladder.matmul(a_t, b), a_t, b)
    rec = gpu.launches[-1]
    assert (rec.maps[0].ptr, rec.maps[1].ptr) == (a_t.data_ptr(), b.data_ptr())  # read in place
    assert rec.defines == {"GL_A_MN": 1, "GL_B_MN": 1} and gpu.prepared[-1][1:] == (0, False, rec.defines)
    assert get_step(gpu.prepared[-1][0]).mn_major  # the best candidate that reads MN-major operands
    # the boxes are Step.kernel_args': 64-wide MN blocks of bk k-rows
    assert (rec.maps[0].rows, rec.maps[0].cols, rec.maps[0].box) == (48, 192, (64, 64))
    assert (rec.maps[1].rows, rec.maps[1].cols, rec.maps[1].ld, rec.maps[1].box) == (48, 40, 40, (64, 64))
    assert_product(gemm_ladder.matmul(a_t, b, step="7:d4"), a_t, b)  # a step without mn_major: copies
    rec = gpu.launches[-1]
    assert rec.maps[0].ptr != a_t.data_ptr() and rec.maps[1].ptr != b.data_ptr() and rec.defines == {}
    assert_product(gemm_ladder.matmul(a_t, b, step="gemm:128x256c2"), a_t, b)  # forced, cluster 2: in place
    rec = gpu.launches[-1]
    assert (rec.maps[0].ptr, rec.maps[1].ptr) == (a_t.data_ptr(), b.data_ptr()) and rec.grid[0] % 2 == 0
    assert rec.maps[1].box == (64, 64)  # an N-major B map is the same with and without the cluster


def _small_m(key: str) -> bool:
    """A key of the small-M split-K family (not a ladder Step): 'smallm', 'smallm:n128'."""
    return not isinstance(get_step(key), Step)


def test_selection_per_shape(gpu):
    """The kernel is the selection's pick for the shape (select.pick), adjusted for layouts."""
    a, w = rnd(192, 40), rnd(48, 40, seed=1)  # M > 128, K not a multiple of 16: the multicast pairs
    assert_product(gemm_ladder.matmul_nt(a, w), a, w.T)
    assert gpu.prepared[-1][0] == "smallm:n128m2" == select.step_for(192, 48, 40).key == select.pick(192, 48, 40)
    assert gpu.launches[-1].cluster == (2, 1, 1)
    a, w = rnd(2048, 40), rnd(1024, 40, seed=3)  # 128 tiles of 128 x 128 in one wave; the pairs would need two rounds
    assert_product(gemm_ladder.matmul_nt(a, w), a, w.T)
    assert gpu.prepared[-1][0] == "gemm:128x128" == select.step_for(2048, 1024, 40).key == select.pick(2048, 1024, 40)
    x, w2 = rnd(3, 8192), rnd(40, 8192, seed=2)  # decode-like, a long K: the small-M family splits it
    assert_product(gemm_ladder.matmul_nt(x, w2), x, w2.T)
    key = gpu.prepared[-1][0]
    assert _small_m(key) and key == select.pick(3, 40, 8192) and gpu.launches[-1].name == "gemm_smallm_reduce"
    assert_product(gemm_ladder.matmul(x, w2.T), x, w2.T)  # a transposed view of w2: K-major, in place
    assert gpu.prepared[-1][0] == key and _last_splitk(gpu).maps[1].ptr == w2.data_ptr()
    x3, w3 = rnd(3, 1000, seed=3), rnd(40, 1000, seed=4)
    c = gemm_ladder.matmul_nt(x3, w3, step="smallm:dsmem")  # 16 k-tiles in 4 pieces, summed in a cluster
    assert_product(c, x3, w3.T)
    assert gpu.launches[-1].name == "gemm_smallm_splitk" and gpu.launches[-1].cluster == (4, 1, 1)
    steps_before = len(gpu.prepared)
    gemm_ladder.matmul_nt(rnd(192, 40, seed=5), rnd(48, 40, seed=6))  # same configuration: no new choice
    assert len(gpu.prepared) == steps_before


def _last_splitk(gpu):
    """The latest launch of the small-M main kernel (a reduction may follow it, or not)."""
    return next(r for r in reversed(gpu.launches) if r.name == "gemm_smallm_splitk")


def test_small_m_family_splits_k_and_reduces(gpu):
    # 8 tiles of 64 k-tiles on smallm:n128, whose pieces go through the workspace (the pick here,
    # smallm:n64, sums them in clusters: test_smallm.py::test_n64_sums_split_tiles_in_clusters)
    x, w = rnd(3, 4096), rnd(1000, 4096, seed=1)
    c = gemm_ladder.matmul_nt(x, w, step="smallm:n128")
    assert_product(c, x, w.T)
    splitk, red = gpu.launches[-2:]
    fam = get_step(gpu.prepared[-1][0])
    assert _small_m(fam.key)
    deal = fam.deal(3, 1000, 4096, 132)
    assert deal.planes > 1 and splitk.grid == deal.grid and splitk.units == deal.units and splitk.cluster == (1, 1, 1)
    assert (splitk.maps[0].ptr, splitk.maps[1].ptr, splitk.c) == (x.data_ptr(), w.data_ptr(), c.data_ptr())
    assert red.ws == splitk.ws and red.c == c.data_ptr() and red.units == deal.units
    assert red.attrs == 1  # the reduction's programmatic dependent launch
    y = rnd(3, 4104)[:, :4096]  # a row-strided slice: read in place
    assert_product(gemm_ladder.matmul_nt(y, w, step="smallm:n128"), y, w.T)
    assert gpu.launches[-2].maps[0].ptr == y.data_ptr() and gpu.launches[-2].maps[0].ld == 4104
    x1, w1 = rnd(2, 128), rnd(16, 128, seed=2)  # two k-tiles: every tile whole, no workspace, no reduction
    assert_product(gemm_ladder.matmul_nt(x1, w1, step="smallm"), x1, w1.T)
    assert gpu.launches[-1].name == "gemm_smallm_splitk" and gpu.launches[-1].ws == 0


def test_small_m_family_reads_a_row_major_b_in_place(gpu):
    """The small-M family reads B N-major (its GL_B_MN build; not the 32-wide smallm:n32) and
    A K-major only: a row-major b (K, N) goes in place at every shape; a transposed-view a is
    copied while the model prices the copy below the best step that reads it in place
    (select.step_for)."""
    x, b = rnd(16, 4160), rnd(4160, 256, seed=1)  # row-major b (K, N); K past smallm:n32's niche
    key = select.step_for(16, 256, 4160, b_mn=True).key
    assert _small_m(key) and key == select.step_for(16, 256, 4160).key
    assert_product(gemm_ladder.matmul(x, b), x, b)
    assert gpu.prepared[-1][0] == key and gpu.prepared[-1][3] == {"GL_B_MN": 1}
    mb = _last_splitk(gpu).maps[1]  # 64-wide blocks of 64 k-rows, over b's own memory
    assert (mb.ptr, mb.rows, mb.cols, mb.ld, mb.box) == (b.data_ptr(), 4160, 256, 256, (64, 64))
    for shape in [(1, 28672, 8192), (16, 4096, 14336), (128, 128, 128)]:
        assert select.step_for(*shape, b_mn=True).key == select.step_for(*shape).key  # in place: no other kernel
    # where the pick is smallm:n32 (K-major B only), a row-major b runs the best entry that
    # reads it in place, never a copy of the weights
    assert select.step_for(16, 4096, 512).key == "smallm:n32"
    alt = get_step(select.step_for(16, 4096, 512, b_mn=True).key)
    assert _small_m(alt.key) and alt.b_mn_major
    xt = rnd(4160, 16, seed=2).T  # a transposed view: an M-major a (16 x 4160)
    assert _small_m(select.step_for(16, 256, 4160, a_mn=True, b_mn=True).key)  # 133 KB copied: ~6 us
    assert_product(gemm_ladder.matmul(xt, b), xt, b)
    ma, mb, _ = _last_splitk(gpu).maps
    assert ma.ptr != xt.data_ptr() and mb.ptr == b.data_ptr()  # a staged K-major, b in place
    assert_product(gemm_ladder.matmul(x, b, step="smallm"), x, b)  # forced: in place too
    assert gpu.prepared[-1][0] == "smallm" and _last_splitk(gpu).maps[1].ptr == b.data_ptr()


def test_n_not_a_multiple_of_8_runs_on_the_small_m_family_with_padded_rows(gpu):
    """N not a multiple of 8: the small-M family computes N rounded up to 8 columns into the
    result's padded rows (B's rows past N read as zeros), so its shapes keep their kernel
    (920 x 63 x 336 once raised ShapeError here: found by the fuzzer)."""
    for shape in [(920, 63, 336), (16, 63, 64), (127, 8191, 255)]:
        assert _small_m(select.step_for(*shape, b_mn=True).key), shape
        assert _small_m(select.step_for(*shape).key), shape
    x, b = rnd(16, 64), rnd(64, 72, seed=1)[:, :63]  # b (K, N) = (64, 63) in rows of 72
    res = gemm_ladder.matmul(x, b)
    assert_product(res, x, b)
    assert res.stride() == (64, 1) and res.untyped_storage().nbytes() == 16 * 64 * 2  # owns its last row
    rec = _last_splitk(gpu)
    assert rec.maps[1].ptr == b.data_ptr() and (rec.maps[1].rows, rec.maps[1].cols) == (64, 63)  # in place
    assert rec.N == 64 and rec.c == res.data_ptr()
    full = torch.empty(16, 64).half()
    full.copy_(res.as_strided((16, 64), (64, 1)))
    assert not full[:, 63:].any()  # the padding column computed from B's zero-filled rows


def test_row_major_b_with_odd_n_is_staged_n_major(gpu):
    """A row-major b whose rows TMA cannot take (N = 8191: 16382-byte rows) is copied, and
    for a kernel that reads B N-major the copy stays N-major (a plain copy into rows of N
    rounded up to 8), not transposed; a and out work the same way."""
    x, b = rnd(127, 255), rnd(255, 200, seed=3)[:, :199]  # K = 255, N = 199: rows of 398 bytes
    b = b.contiguous()
    res = gemm_ladder.matmul(x, b)
    assert_product(res, x, b)
    rec = _last_splitk(gpu)
    assert _small_m(rec.key) and rec.defines == {"GL_B_MN": 1}
    mb = rec.maps[1]
    assert mb.ptr != b.data_ptr() and (mb.rows, mb.cols, mb.ld) == (255, 199, 200)  # (K, N) in rows of 200
    cfg = fastpath.config_for("mm", x, b)
    assert cfg.b.stage_mn and not cfg.b.direct and not cfg.a.direct and not cfg.a.stage_mn
    # both copies in one launch of the module's staging kernel, before the GEMM on its stream
    cp = next(r for r in reversed(gpu.launches) if r.name == staging.STAGE_COPY_ENTRY)
    assert cp.grid == (255, 2, 1) and cp.stream == rec.stream and gpu.launches.index(cp) < gpu.launches.index(rec)
    assert [c[1:] for c in cp.copies] == [(rec.maps[0].ptr, 127, 255, 255, 256), (mb.ptr, 255, 199, 199, 200)]
    assert cp.copies[0][0] == x.data_ptr() and cp.copies[1][0] == b.data_ptr()
    out = torch.full((127, 199), float("nan")).half()
    assert gemm_ladder.matmul(x, b, out=out) is out
    assert_product(out, x, b)
    xt = rnd(255, 127, seed=4).T  # an M-major a in rows of 254 bytes: gemm:128x256 reads a copy M-major
    res = gemm_ladder.matmul(xt, b, step="gemm:128x256")
    assert_product(res, xt, b)
    rec = gpu.launches[-1]
    assert rec.defines == {"GL_A_MN": 1, "GL_B_MN": 1}
    assert (rec.maps[0].rows, rec.maps[0].cols, rec.maps[0].ld) == (255, 127, 128) and rec.maps[0].ptr != xt.data_ptr()
    # a kernel that reads B K-major only gets the transposed copy (torch's: the staging kernel
    # copies rows as they are)
    copies = sum(r.name == staging.STAGE_COPY_ENTRY for r in gpu.launches)
    res = gemm_ladder.matmul(x, b, step="8:c1")
    assert_product(res, x, b)
    assert sum(r.name == staging.STAGE_COPY_ENTRY for r in gpu.launches) == copies
    assert fastpath.config_for("mm", x, b, None, "8:c1")._copy is None
    mb = gpu.launches[-1].maps[1]
    assert (mb.rows, mb.cols, mb.ld) == (199, 255, 256) and not gpu.launches[-1].defines.get("GL_B_MN")


def test_tiny_shapes_read_mn_major_in_place(gpu):
    """The copy's fixed cost (cost_model.COPY_LAUNCH_US) outweighs the small-M kernel's gain at tiny
    shapes: a transposed-view a at 128^3 is read in place by a step that reads it M-major
    (a gemm family width, whichever the model prefers), not copied for the family (issue 9)."""
    assert _small_m(select.step_for(128, 128, 128).key)
    mn = select.step_for(128, 128, 128, a_mn=True).key
    assert mn in ("gemm:128x256", "gemm:128x192", "gemm:128x176", "gemm:128x144")
    assert select._copy_loses(get_step(select.step_for(128, 128, 128).key), get_step(mn), 128, 128, 128, 132,
                           True, False)
    xt, w = rnd(128, 128).T, rnd(128, 128, seed=1)  # a transposed view: M-major a
    assert_product(gemm_ladder.matmul(xt, w.T), xt, w.T)
    assert gpu.prepared[-1][0] == mn and gpu.prepared[-1][3].get("GL_A_MN")
    assert gpu.launches[-1].maps[0].ptr == xt.data_ptr()  # no staging copy


def test_small_m_family_writes_c_packed(gpu):
    x, w = rnd(4, 512), rnd(64, 512, seed=1)
    out = torch.empty(4, 72).half()[:, :64]  # a padded out: computed packed, then copied
    out.fill_(float("nan"))
    assert gemm_ladder.matmul_nt(x, w, out=out) is out
    assert _small_m(gpu.prepared[-1][0]) and gpu.launches[-1].c != out.data_ptr()
    assert_product(out, x, w.T)
    dense = torch.empty(4, 64).half()
    gemm_ladder.matmul_nt(x, w, out=dense)
    assert gpu.launches[-1].c == dense.data_ptr()
    assert_product(dense, x, w.T)
    w60 = rnd(60, 512, seed=2)  # N=60 is not a multiple of 8: 64 columns computed into rows of 64
    res = gemm_ladder.matmul_nt(x, w60)
    assert_product(res, x, w60.T)
    assert _small_m(gpu.prepared[-1][0]) and res.stride() == (64, 1) and _last_splitk(gpu).N == 64
    out = torch.full((4, 60), float("nan")).half()  # a packed out of N=60: through a buffer
    assert gemm_ladder.matmul_nt(x, w60, out=out) is out and _last_splitk(gpu).c != out.data_ptr()
    assert_product(out, x, w60.T)


def test_batched_a_folds_into_rows(gpu):
    a = rnd(3, 50, 24)  # M = 150: a ladder step
    res = gemm_ladder.matmul(a, rnd(24, 16, seed=1))
    assert res.shape == (3, 50, 16)
    assert gpu.launches[-1].maps[0].ptr == a.data_ptr() and gpu.launches[-1].M == 150
    perm = rnd(50, 3, 24).transpose(0, 1)  # batch dims that do not fold: staged
    b = rnd(24, 16, seed=2)
    assert_product(gemm_ladder.matmul(perm, b).reshape(150, 16), perm.reshape(150, 24), b)
    out = torch.empty(3, 50, 16).half()
    assert gemm_ladder.matmul(a, b, out=out) is out
    assert gpu.launches[-1].maps[2].ptr == out.data_ptr()
    assert_product(out.reshape(150, 16), a.reshape(150, 24), b)
    x = rnd(2, 3, 24)  # M = 6: the small-M family folds the rows the same way
    assert_product(gemm_ladder.matmul(x, b).reshape(6, 16), x.reshape(6, 24), b)
    assert gpu.launches[-1].maps[0].ptr == x.data_ptr() and gpu.launches[-1].M == 6


def test_empty_and_k0(gpu):
    z = gemm_ladder.matmul(rnd(5, 0), rnd(0, 7))
    assert z.shape == (5, 7) and not z.any()
    assert gemm_ladder.matmul(rnd(0, 8), rnd(8, 7)).shape == (0, 7)
    assert not gpu.launches


def test_teaching_steps_take_the_copying_path(gpu):
    a, b = rnd(128, 64), rnd(64, 128, seed=1)
    assert_product(gemm_ladder.matmul(a, b, step="3"), a, b)
    assert not gpu.launches  # strict path (runner.run_checked), not a fast-path launch


# ---- caches: validate once, encode once, stream per call ---------------------------------

def test_second_call_only_launches(gpu):
    a, w = rnd(64, 32), rnd(48, 32, seed=1)
    out = torch.empty(64, 48).half()
    gemm_ladder.matmul_nt(a, w, out=out)
    built = api.cache_info()
    for _ in range(3):
        gemm_ladder.matmul_nt(a, w, out=out)
    assert gpu.validations == 1 and len(gpu.prepared) == 1
    assert api.cache_info() == built  # nothing validated, prepared or encoded again
    assert len(gpu.launches) == 4


def test_new_pointer_encodes_one_map(gpu):
    w = rnd(48, 40, seed=1)  # M = 192, K = 40: a ladder step (three maps)
    first = (rnd(192, 40), torch.empty(192, 48).half())  # kept alive: the next ones get new memory
    gemm_ladder.matmul_nt(first[0], w, out=first[1])
    before = api.cache_info()
    gemm_ladder.matmul_nt(rnd(192, 40, seed=3), w, out=torch.empty(192, 48).half())
    after = api.cache_info()
    assert after["configs_built"] == before["configs_built"]
    assert after["tensor_maps_encoded"] - before["tensor_maps_encoded"] == 2  # new a, new out; w known


def test_tensor_map_cache_is_bounded(gpu, monkeypatch):
    monkeypatch.setattr(fastconfig, "TENSOR_MAPS", fastconfig.LRU(4))
    w = rnd(16, 32, seed=1)
    keep = [(rnd(8, 32, seed=i), torch.empty(8, 16).half()) for i in range(10)]
    for a, out in keep:
        gemm_ladder.matmul_nt(a, w, out=out)
        assert_product(out, a, w.T)
    assert len(fastconfig.TENSOR_MAPS) == 4


def test_config_cache_is_bounded(gpu, monkeypatch):
    monkeypatch.setattr(fastpath, "CONFIGS", fastpath.LRU(3))
    for n in range(8, 80, 8):
        gemm_ladder.matmul(rnd(16, 32), rnd(32, n, seed=n))
    assert len(fastpath.CONFIGS) == 3


def test_stream_is_read_per_call(gpu):
    """A cached launch never keeps a stale stream (CUDA graphs capture on a side stream)."""
    a, w = rnd(16, 32), rnd(16, 32, seed=1)
    for s in (7, 9, 7, 11):
        gpu.stream = s
        gemm_ladder.matmul_nt(a, w)
    assert [r.stream for r in gpu.launches] == [7, 9, 7, 11]
    assert api.cache_info()["configs_built"] == 1


def test_cache_keys_on_layout_dtype_and_alignment(gpu):
    a, b = rnd(32, 32), rnd(32, 32, seed=1)
    gemm_ladder.matmul(a, b)
    gemm_ladder.matmul(a, b.T.contiguous().T)  # same shape, other strides
    gemm_ladder.matmul(a.bfloat16(), b.bfloat16())
    gemm_ladder.matmul(_misaligned(32, 32, 2), b)
    gemm_ladder.matmul(a, b, step="7")
    assert api.cache_info()["configs_built"] == 5


# ---- errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("call,exc,match", [
    (lambda: gemm_ladder.matmul(rnd(4, 4).float(), rnd(4, 4).float()), TypeError, "float16 or torch.bfloat16"),
    (lambda: gemm_ladder.matmul(rnd(4, 4), rnd(4, 4).bfloat16()), TypeError, "same dtype"),
    (lambda: gemm_ladder.matmul(rnd(4, 8), rnd(4, 8)), ValueError, "inner dimensions differ"),
    (lambda: gemm_ladder.matmul_nt(rnd(4, 8), rnd(4, 6)), ValueError, "needs equal K"),
    (lambda: gemm_ladder.matmul(rnd(8), rnd(8, 4)), ValueError, ">= 2 dims"),
    (lambda: gemm_ladder.matmul(rnd(4, 8), rnd(8, 4), out=rnd(4, 5)), ValueError, "out must be a"),
    (lambda: gemm_ladder.matmul(rnd(4, 8), rnd(8, 4)), ValueError, "both must be CUDA tensors"),
    (lambda: gemm_ladder.matmul(None, rnd(4, 4)), TypeError, "torch.Tensor"),
])
def test_errors_are_one_clear_exception(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_mixed_devices_error():
    dev = SimpleNamespace
    with pytest.raises(ValueError, match="different devices"):
        fastpath._check_devices("matmul", dev(device=torch.device("cuda:0")), dev(device=torch.device("cuda:1")), None)
    with pytest.raises(ValueError, match="out is on cuda:1"):
        fastpath._check_devices("matmul", dev(device=torch.device("cuda:0")), dev(device=torch.device("cuda:0")),
                                dev(device=torch.device("cuda:1")))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_cpu_tensors_without_gpu_say_so():
    with pytest.raises(ValueError, match="no CUDA GPU is available"):
        gemm_ladder.matmul(rnd(4, 8), rnd(8, 4))


def test_unknown_step(gpu):
    with pytest.raises(KeyError, match="unknown step"):
        gemm_ladder.matmul(rnd(4, 8), rnd(8, 4), step="12")


def test_invalid_call_is_not_cached(gpu):
    with pytest.raises(ValueError):
        gemm_ladder.matmul(rnd(4, 8), rnd(4, 8))
    with pytest.raises(ValueError):
        gemm_ladder.matmul(rnd(4, 8), rnd(4, 8))
    assert gpu.validations == 2 and api.cache_info()["configs"] == 0


# ---- bench --api, its plumbing on the emulated driver (the numbers come from the GPU) ------

def test_bench_api_plumbing(gpu, monkeypatch):
    from gemm_ladder.cli import commands as cli
    from gemm_ladder.measure import bench_api

    class FakeBench:
        calls: list = []

        def __init__(self, device_index):
            self.nvml = SimpleNamespace(sample=lambda: {"sm_clock_mhz": 1980})

        def inputs(self, M, N, K, dtype):
            return rnd(M, K, dtype=dtype), rnd(N, K, dtype=dtype, seed=1)

        def time_interleaved(self, fns, reps):
            self.calls.append(len(fns))
            for f in fns:
                f()
            # [ours, (the kernel of the same step,) torch.matmul]
            return [[1.0] * reps] + [[0.98] * reps] * (len(fns) - 2) + [[0.9] * reps]

    class FakePlan:
        def __init__(self, st, a, b, out):
            self.a, self.b, self.out = a, b, out

        def __call__(self):
            self.out.copy_(self.a.float() @ self.b.float().T)

        def synchronize(self):
            pass

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(bench_api.bench, "Bench", FakeBench)
    monkeypatch.setattr(bench_api.runner, "plan", FakePlan)
    rows = bench_api.device_rows([(1024, 3152, 40)], "bfloat16", log=lambda m: None)
    # a kernel row per step the calls run: K-major b -> gemm:128x232, row-major b -> gemm:128x256
    # (mn_major; the 232-wide tiles start off 32-byte sectors in an N-major B, api rule 5)
    assert [(r["call"], r["step"]) for r in rows] == [
        ("kernel (launch.plan)", "gemm:128x232"), ("kernel (launch.plan)", "gemm:128x256"),
        (bench_api.CALLS[0], "gemm:128x232"), (bench_api.CALLS[1], "gemm:128x256"),
        (bench_api.CALLS[2], "gemm:128x232")]
    assert all(r["ok"] and r["ratio_to_cublas"] == pytest.approx(0.9) for r in rows), rows
    # call rows: three-way interleave, the kernel's time from that same run
    assert FakeBench.calls == [2, 2] * 2 + [3, 3] * 3
    for r in rows[2:]:
        assert r["kernel_ms"] == pytest.approx(0.98) and r["kernel_ratio_to_cublas"] == pytest.approx(0.9 / 0.98)
        assert r["api_vs_kernel"] == pytest.approx(0.98) and r["within_3pct_of_kernel"]
        assert r["kernel_row_ratio_to_cublas"] == pytest.approx(0.9)
    assert all(k in r for r in rows for k in ("M", "N", "K", "dtype", "ms", "cublas_ms", "ratio_to_cublas", "ok",
                                               "call"))
    assert all(r["operands"] == "in place" for r in rows[2:])  # row-major b: read N-major, no copy
    host = bench_api.host_overhead(torch.float16, calls=3, rounds=2, size=16, device="cpu")
    assert set(host) == set(bench_api.CALLS) and all(v["us"] > 0 and v["torch_us"] > 0 for v in host.values())
    result = {"date": "2026-11-30T10:00:00+00:00", "commit": "0123456789abcdef", "rows": rows,
              "host_us_by_call": host, "gpu": {"torch_name": "NVIDIA H200"}, "host_call": bench_api.HEADLINE_CALL,
              "host_us_per_call": 1.0, "host_call_max": "matmul(a, b_nk.T)", "host_us_max_over_calls": 2.0}
    assert str(bench_api.default_json_path("benchmarks/results", result)) == \
        "benchmarks/results/2026-11-30_h200_api_0123456.json"
    from rich.console import Console
    console = Console(record=True, width=200)
    bench_api.print_api(result, console)
    text = console.export_text()
    assert "matmul(a, b_nk.T)" in text and "worst form matmul(a, b_nk.T): 2.00 us" in text and "0.9800" in text
    args = cli.build_parser().parse_args(["bench", "--api"])
    assert args.api and args.sizes is None and args.dtype is None and args.steps is None


def test_calls_and_config_for_share_one_key(gpu):
    """The per-call path (fastpath._call) and config_for find a configuration by one key."""
    x, b = rnd(8, 32), rnd(32, 16, seed=1)
    gemm_ladder.matmul(x, b)
    gemm_ladder.matmul_nt(x, b.T.contiguous(), out=torch.empty(8, 16).half())
    assert fastpath._key("mm", x, b, None, None, x.data_ptr(), b.data_ptr()) in fastpath.CONFIGS.entries
    assert fastpath.config_for("mm", x, b) is fastpath.CONFIGS.entries[next(iter(fastpath.CONFIGS.entries))]
    assert api.cache_info()["configs_built"] == 2


def test_host_profile_plumbing(gpu, monkeypatch):
    """scripts/host_profile.py on the emulated driver (its numbers come from the GPU)."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "scripts" / "host_profile.py"
    spec = importlib.util.spec_from_file_location("host_profile", path)
    hp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hp)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    res = hp.profile(size=16, calls=3, rounds=2, device="cpu")
    us = res["us_per_call"]
    for form in ("matmul_nt(a, b_nk, out=c)", "matmul(a, b_nk.T)", "matmul(a, b_kn)"):
        assert us[f"full: {form}"] > 0 and us[f"torch.matmul: {form}"] > 0 and us[f"{form}: fastpath._key"] > 0
        assert any(k.startswith(f"{form}: ReusableLaunch call") for k in us), us
    assert res["steps"]["matmul(a, b_kn)"] == select.step_for(16, 16, 16, b_mn=True).key
    assert api.cache_info()["configs_built"] == 3  # the profile's lookups found the calls' entries
    # the report (main): its summary line names every field it reads
    monkeypatch.setattr(hp, "profile", lambda size, calls, rounds: res)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    from gemm_ladder.library import runner as launch_mod
    monkeypatch.setattr(launch_mod, "check_device", lambda d: None)
    assert hp.main(["--calls", "3", "--rounds", "2", "--size", "16"]) == 0


def test_reusable_launch_sets_stream_maps_and_pointers(monkeypatch):
    """ReusableLaunch hands the driver the stream, the map addresses and the pointer values
    of the call, and the launch config's other fields (read from the CUlaunchConfig bytes)."""
    import ctypes
    from gemm_ladder.cuda import driver
    seen = []
    config_bytes, hstream_offset = 56, 32  # sizeof(CUlaunchConfig); offset of hStream

    def fake(config_ptr, fn, args_ptr, extra):
        raw = ctypes.string_at(config_ptr, config_bytes)
        dims = ctypes.cast(config_ptr, ctypes.POINTER(ctypes.c_uint32))[:7]
        stream = ctypes.c_void_p.from_address(config_ptr + hstream_offset).value or 0
        slots = (ctypes.c_void_p * 5).from_address(args_ptr)
        ptrs = [ctypes.c_uint64.from_address(slots[i]).value for i in (2, 3)]
        seen.append((dims, stream, fn, slots[0], slots[1], ptrs, ctypes.c_int32.from_address(slots[4]).value,
                     int.from_bytes(raw[48:52], "little")))
        return 1 if stream == 0xbad else 0

    kernel = SimpleNamespace(function=0x777, device_index=0, compiled=SimpleNamespace(name="k"))
    cu = driver._cu()

    class Cu:  # no libcuda here: the launch and the error names are stand-ins
        def __getattr__(self, name):
            return getattr(cu, name)

        @staticmethod
        def cuLaunchKernelEx(config, function, args_ptr, extra):
            return (cu.CUresult(fake(config.getPtr(), function, args_ptr, extra)),)

        @staticmethod
        def cuGetErrorName(err):
            return cu.CUresult.CUDA_SUCCESS, err.name.encode()

        @staticmethod
        def cuGetErrorString(err):
            return cu.CUresult.CUDA_SUCCESS, b"stand-in"
    monkeypatch.setattr(driver, "_cu", lambda: Cu())
    args = [driver.MapSlot(), driver.MapSlot(), ctypes.c_uint64(0), ctypes.c_uint64(0), 5]
    L = driver.ReusableLaunch(kernel, (3, 4, 5), (128, 1, 1), args, dynamic_smem=1000, cluster=(2, 1, 1), pdl=True)
    L(0x1234, (11, 22), (33, 44))
    L(0x1234, (55, 66), (77, 88))
    L(0, (55, 66), (77, 88))
    assert [s[:2] for s in seen] == [([3, 4, 5, 128, 1, 1, 1000], 0x1234)] * 2 + [([3, 4, 5, 128, 1, 1, 1000], 0)]
    assert seen[0][3:] == (11, 22, [33, 44], 5, 2) and seen[1][3:] == (55, 66, [77, 88], 5, 2)
    with pytest.raises(driver.CudaError, match="cuLaunchKernelEx.*CUDA_ERROR_INVALID_VALUE"):
        L(0xbad, (1, 2), (3, 4))


def test_misaligned_b_rows_choose_the_multicast_cluster(monkeypatch):
    """A row-major b whose rows are not whole 32-byte sectors (N = 5000: 10000-byte rows) is
    read in place by gemm:128x256c2, whose cluster multicasts B (cost_model.MISALIGNED_B_COST); the same
    problem with aligned rows, or with only a's rows so, keeps the selection's pick."""
    gpu = FakeGpu(monkeypatch, emulate=False)  # the choice only: no product computed
    a, b = torch.zeros(3000, 4000, dtype=torch.float16), torch.zeros(4000, 5000, dtype=torch.float16)
    a_op, b_op = fastconfig.operand_layouts("mm", a, b, (True, True), 3000, 5000, 4000)
    assert fastpath.b_rows_misaligned(b_op) and not fastpath.b_rows_misaligned(a_op)
    gemm_ladder.matmul(a, b)
    assert gpu.prepared[-1][0] == "gemm:128x256c2" == select.step_for(3000, 5000, 4000, b_mn=True,
                                                                       b_misaligned=True).key
    assert gpu.prepared[-1][3] == {"GL_B_MN": 1} and gpu.launches_counted == 1  # b read N-major, in place
    b16 = torch.zeros(4000, 5008, dtype=torch.float16)[:, :5000]  # the same values' shape in aligned rows
    gemm_ladder.matmul(a, b16)
    assert gpu.prepared[-1][0] == select.step_for(3000, 5000, 4000, b_mn=True).key != "gemm:128x256c2"
    bt = torch.zeros(5000, 4008, dtype=torch.float16)[:, :4000]  # b.T K-major in rows of 4008: misaligned too
    _, bt_op = fastconfig.operand_layouts("nt", a, bt, (True, True), 3000, 5000, 4000)
    assert bt_op.major == "K" and fastpath.b_rows_misaligned(bt_op)
    one = fastconfig.operand_layouts("nt", a, torch.zeros(1, 4000, dtype=torch.float16), (True, True), 3000, 1, 4000)[1]
    assert not fastpath.b_rows_misaligned(one)  # a single row has no stride
    a2 = torch.zeros(3000, 3008, dtype=torch.float16)
    odd = fastconfig.operand_layouts("nt", a2, torch.zeros(40, 4000, dtype=torch.float16)[:, 1:3009], (True, True),
                                     3000, 40, 3008)[1]  # a 2-byte offset: copied, into rows of 3008 (whole sectors)
    assert not odd.direct and not fastpath.b_rows_misaligned(odd)
    odd = fastconfig.operand_layouts("nt", a2[:, :3000], torch.zeros(40, 4000, dtype=torch.float16)[:, 1:3001],
                                     (True, True), 3000, 40, 3000)[1]  # copied into rows of 3000: not whole sectors
    assert not odd.direct and fastpath.b_rows_misaligned(odd)


def test_scratch_is_kept_per_stream_and_fresh_while_capturing(gpu, monkeypatch):
    """Staging copies and the small-M partials live in per-stream scratch of the configuration:
    a second call on the stream reuses them (no allocation, no new tensor map); another stream
    gets its own; a CUDA graph capture gets fresh ones; sets over the size limit are per call."""
    x, b = rnd(127, 255), rnd(255, 199, seed=3)  # both staged (rows of 510 and 398 bytes)
    assert_product(gemm_ladder.matmul(x, b), x, b)
    cfg = fastpath.config_for("mm", x, b)
    assert set(cfg.scratch.shapes) >= {"a", "b"} and cfg.scratch.shapes["b"][0] == (255, 200)
    kept = cfg.scratch._sets[gpu.stream]
    encoded = fastconfig.TENSOR_MAPS.misses
    assert_product(gemm_ladder.matmul(x, b), x, b)
    rec = _last_splitk(gpu)
    assert rec.maps[0].ptr == kept["a"].data_ptr() and rec.maps[1].ptr == kept["b"].data_ptr()
    # A's and B's maps found again (C's is new when the result lands at a new address)
    assert fastconfig.TENSOR_MAPS.misses <= encoded + 1 and cfg.scratch._sets[gpu.stream] is kept
    if "ws" in cfg.scratch.shapes:
        assert rec.ws == kept["ws"].data_ptr()
    gpu.stream = 9  # another stream: its own set
    assert_product(gemm_ladder.matmul(x, b), x, b)
    assert _last_splitk(gpu).maps[0].ptr != kept["a"].data_ptr() and set(cfg.scratch._sets) == {7, 9}
    monkeypatch.setattr(fastconfig, "_capturing", lambda: True)  # capture: fresh, not kept
    assert_product(gemm_ladder.matmul(x, b), x, b)
    assert _last_splitk(gpu).maps[0].ptr not in {s["a"].data_ptr() for s in cfg.scratch._sets.values()}
    assert set(cfg.scratch._sets) == {7, 9}
    monkeypatch.setattr(fastconfig, "_capturing", lambda: False)
    monkeypatch.setattr(staging, "MAX_SCRATCH_BYTES", 1024)  # too big to keep: per call
    gpu.stream = 11
    assert_product(gemm_ladder.matmul(x, b), x, b)
    assert set(cfg.scratch._sets) == {7, 9}


def test_split_k_partials_are_kept_per_stream(gpu):
    x, w = rnd(16, 14336), rnd(4096, 14336, seed=1)  # a long K: split, through the workspace on n128
    res = gemm_ladder.matmul_nt(x, w, step="smallm:n128")
    cfg = fastpath.config_for("nt", x, w, step="smallm:n128")
    assert _small_m(cfg.step) and cfg.deal.planes > 1 and cfg.scratch.shapes == {
        "ws": ((cfg.deal.planes, 16, 4096), torch.float32)}
    assert _last_splitk(gpu).ws == cfg.scratch._sets[gpu.stream]["ws"].data_ptr()
    assert_product(res, x, w.T)


def test_unaligned_rows_above_128_rows_go_to_the_multicast_pairs_or_an_n_major_b(gpu):
    """smallm.ALIGNED_K keeps the family's single CTAs off K-major rows that are not whole
    32-byte sectors above 128 rows (gemm:128x128 is faster there); the multicast pairs take them, each
    CTA fetching half of B (MULTICAST_NICHE, docs/perf-notes.md item 51). With a row-major b
    the alternative is the gemm family's 192-wide tile, which the family beats on such rows
    (item 42)."""
    fam, pairs = smallm.FAMILIES["smallm:n128"], smallm.FAMILIES["smallm:n128m2"]
    assert not fam.accepts(1000, 1000, 1000) and fam.accepts(1000, 1000, 1000, b_mn=True)
    assert pairs.accepts(1000, 1000, 1000) and not pairs.accepts(1024, 1024, 1024)
    assert select.step_for(1000, 1000, 1000).key == "smallm:n128m2"
    assert _small_m(select.step_for(1000, 1000, 1000, b_mn=True).key)
    x, b = rnd(200, 1000), rnd(1000, 264, seed=5)  # K = 1000: 2000-byte rows; M = 200 > 128
    assert _small_m(select.step_for(200, 264, 1000, b_mn=True).key)
    assert select.step_for(200, 264, 1000).key == "smallm:n128m2"
    assert_product(gemm_ladder.matmul(x, b), x, b)
    rec = _last_splitk(gpu)
    assert rec.defines == {"GL_B_MN": 1} and rec.maps[1].ptr == b.data_ptr()  # in place, N-major
    w = b.T.contiguous()  # the same B K-major: the pairs, B's box half a tile tall
    assert_product(gemm_ladder.matmul_nt(x, w), x, w.T)
    rec = _last_splitk(gpu)
    assert rec.cluster == (2, 1, 1) and rec.maps[1].box == (64, 64) and rec.maps[1].ptr == w.data_ptr()


def test_static_b_prepares_the_b_early_build_as_its_own_configuration(gpu):
    x, w = rnd(4, 4096), rnd(1024, 4096, seed=3)
    c0 = gemm_ladder.matmul(x, w.T)
    plain = get_step(gpu.prepared[-1][0])
    c1 = gemm_ladder.matmul(x, w.T, static_b=True)
    assert_product(c1, x, w.T)
    assert torch.equal(c0, c1)
    assert len(gpu.prepared) == 2 and gpu.prepared[-1][0] == plain.key + "~b_early"  # its own build
    cfg = fastpath.config_for("mm", x, w.T, static_b=True)
    assert cfg.step.key == plain.key + "~b_early" and cfg.step.b_early and not plain.b_early
    gemm_ladder.matmul(x, w.T, static_b=True)
    assert len(gpu.prepared) == 2
    lin = gemm_ladder.Linear(4096, 1024, dtype=torch.float16, static_weight=True)
    assert "static_weight=True" in repr(lin) and lin.static_weight
    assert not gemm_ladder.Linear.from_linear(torch.nn.Linear(8, 8)).static_weight


def test_config_cache_keeps_a_hot_entry_near_eviction(gpu, monkeypatch):
    """Hits move an entry to the recent end once the cache is more than half full: a
    configuration called between new ones survives them."""
    monkeypatch.setattr(fastpath, "CONFIGS", fastpath.LRU(4))
    hot_a, hot_w = rnd(16, 32), rnd(32, 8, seed=1)
    gemm_ladder.matmul(hot_a, hot_w)
    hot_key = next(iter(fastpath.CONFIGS.entries))
    for n in range(16, 120, 8):
        gemm_ladder.matmul(rnd(16, 32), rnd(32, n, seed=n))
        gemm_ladder.matmul(hot_a, hot_w)
    assert hot_key in fastpath.CONFIGS.entries and len(fastpath.CONFIGS) == 4
