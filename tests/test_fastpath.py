"""The library's fast path without a GPU: layout classification and the launch each call
would make (emulated on the CPU by fake_gpu.FakeGpu); test_fastpath_caches.py has the caches,
errors and plumbing."""
import pytest
import torch

import gemm_ladder
from fake_gpu import assert_product, is_small_m, last_splitk, misaligned, rnd
from gemm_ladder.families.keys import get_step
from gemm_ladder.library import fastpath, layout, select
from gemm_ladder.library import staging


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


A_LAYOUTS = {
    "row-major": lambda M, K: rnd(M, K, seed=1),
    "row-strided slice": lambda M, K: _strided(M, K, layout.round_up(K, 8) + 8, 2),
    "transposed view": lambda M, K: rnd(K, M, seed=3).T,
    "misaligned": lambda M, K: misaligned(M, K, 4),
    "column-strided": lambda M, K: rnd(M, 2 * K, seed=5)[:, ::2],
}
B_LAYOUTS = {  # b is (K, N)
    "row-major": lambda K, N: rnd(K, N, seed=6),
    "transposed view": lambda K, N: rnd(N, K, seed=7).T,
    "strided transposed view": lambda K, N: _strided(N, K, layout.round_up(K, 8) + 16, 8).T,
    "misaligned": lambda K, N: misaligned(K, N, 9),
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
           "misaligned": lambda: misaligned(M, N, 3)}[out_kind]()
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
    assert is_small_m(key) and key == select.pick(3, 40, 8192) and gpu.launches[-1].name == "gemm_smallm_reduce"
    assert_product(gemm_ladder.matmul(x, w2.T), x, w2.T)  # a transposed view of w2: K-major, in place
    assert gpu.prepared[-1][0] == key and last_splitk(gpu).maps[1].ptr == w2.data_ptr()
    x3, w3 = rnd(3, 1000, seed=3), rnd(40, 1000, seed=4)
    c = gemm_ladder.matmul_nt(x3, w3, step="smallm:dsmem")  # 16 k-tiles in 4 pieces, summed in a cluster
    assert_product(c, x3, w3.T)
    assert gpu.launches[-1].name == "gemm_smallm_splitk" and gpu.launches[-1].cluster == (4, 1, 1)
    steps_before = len(gpu.prepared)
    gemm_ladder.matmul_nt(rnd(192, 40, seed=5), rnd(48, 40, seed=6))  # same configuration: no new choice
    assert len(gpu.prepared) == steps_before


def test_small_m_family_splits_k_and_reduces(gpu):
    # 8 tiles of 64 k-tiles on smallm:n128, whose pieces go through the workspace (the pick here,
    # smallm:n64, sums them in clusters: test_smallm.py::test_n64_sums_split_tiles_in_clusters)
    x, w = rnd(3, 4096), rnd(1000, 4096, seed=1)
    c = gemm_ladder.matmul_nt(x, w, step="smallm:n128")
    assert_product(c, x, w.T)
    splitk, red = gpu.launches[-2:]
    fam = get_step(gpu.prepared[-1][0])
    assert is_small_m(fam.key)
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
    assert is_small_m(key) and key == select.step_for(16, 256, 4160).key
    assert_product(gemm_ladder.matmul(x, b), x, b)
    assert gpu.prepared[-1][0] == key and gpu.prepared[-1][3] == {"GL_B_MN": 1}
    mb = last_splitk(gpu).maps[1]  # 64-wide blocks of 64 k-rows, over b's own memory
    assert (mb.ptr, mb.rows, mb.cols, mb.ld, mb.box) == (b.data_ptr(), 4160, 256, 256, (64, 64))
    for shape in [(1, 28672, 8192), (16, 4096, 14336), (128, 128, 128)]:
        assert select.step_for(*shape, b_mn=True).key == select.step_for(*shape).key  # in place: no other kernel
    # where the pick is smallm:n32 (K-major B only), a row-major b runs the best entry that
    # reads it in place, never a copy of the weights
    assert select.step_for(16, 4096, 512).key == "smallm:n32"
    alt = get_step(select.step_for(16, 4096, 512, b_mn=True).key)
    assert is_small_m(alt.key) and alt.b_mn_major
    xt = rnd(4160, 16, seed=2).T  # a transposed view: an M-major a (16 x 4160)
    assert is_small_m(select.step_for(16, 256, 4160, a_mn=True, b_mn=True).key)  # 133 KB copied: ~6 us
    assert_product(gemm_ladder.matmul(xt, b), xt, b)
    ma, mb, _ = last_splitk(gpu).maps
    assert ma.ptr != xt.data_ptr() and mb.ptr == b.data_ptr()  # a staged K-major, b in place
    assert_product(gemm_ladder.matmul(x, b, step="smallm"), x, b)  # forced: in place too
    assert gpu.prepared[-1][0] == "smallm" and last_splitk(gpu).maps[1].ptr == b.data_ptr()


def test_n_not_a_multiple_of_8_runs_on_the_small_m_family_with_padded_rows(gpu):
    """N not a multiple of 8: the small-M family computes N rounded up to 8 columns into the
    result's padded rows (B's rows past N read as zeros), so its shapes keep their kernel
    (920 x 63 x 336 once raised ShapeError here: found by the fuzzer)."""
    for shape in [(920, 63, 336), (16, 63, 64), (127, 8191, 255)]:
        assert is_small_m(select.step_for(*shape, b_mn=True).key), shape
        assert is_small_m(select.step_for(*shape).key), shape
    x, b = rnd(16, 64), rnd(64, 72, seed=1)[:, :63]  # b (K, N) = (64, 63) in rows of 72
    res = gemm_ladder.matmul(x, b)
    assert_product(res, x, b)
    assert res.stride() == (64, 1) and res.untyped_storage().nbytes() == 16 * 64 * 2  # owns its last row
    rec = last_splitk(gpu)
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
    rec = last_splitk(gpu)
    assert is_small_m(rec.key) and rec.defines == {"GL_B_MN": 1}
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
    assert is_small_m(select.step_for(128, 128, 128).key)
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
    assert is_small_m(gpu.prepared[-1][0]) and gpu.launches[-1].c != out.data_ptr()
    assert_product(out, x, w.T)
    dense = torch.empty(4, 64).half()
    gemm_ladder.matmul_nt(x, w, out=dense)
    assert gpu.launches[-1].c == dense.data_ptr()
    assert_product(dense, x, w.T)
    w60 = rnd(60, 512, seed=2)  # N=60 is not a multiple of 8: 64 columns computed into rows of 64
    res = gemm_ladder.matmul_nt(x, w60)
    assert_product(res, x, w60.T)
    assert is_small_m(gpu.prepared[-1][0]) and res.stride() == (64, 1) and last_splitk(gpu).N == 64
    out = torch.full((4, 60), float("nan")).half()  # a packed out of N=60: through a buffer
    assert gemm_ladder.matmul_nt(x, w60, out=out) is out and last_splitk(gpu).c != out.data_ptr()
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
