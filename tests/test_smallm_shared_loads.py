"""The small-M family's shared-load entries on the CPU (GL_SHARE_A, GL_SHARE_B: clusters of
share_a x share_b CTAs along N x M run the same piece of adjacent tiles and multicast slices of A
to the CTAs of their row and of B to those of their column): the deal, the launch's block order
as the kernel computes it, the boxes, and where the entries stand in the library. The GPU side
is in tests/test_gpu_smallm_shared_loads.py."""
import pytest

from gemm_ladder.families import smallm
from gemm_ladder.library import fastpath, select

SHARED = [f for f in smallm.FAMILIES.values() if f.shared_loads > 1]
H200_SMS = 132


def test_entries_are_experiments_not_candidates():
    assert {f.key for f in SHARED} == {"smallm:c2n64a2", "smallm:c2n64a4", "smallm:n64a4", "smallm:n64a4b2",
                                       "smallm:n64a2b2"}
    assert not {f.key for f in SHARED} & set(select.CANDIDATES)
    for f in SHARED:
        defines = f.kernel_defines()
        assert (defines["GL_SHARE_A"], defines["GL_SHARE_B"]) == (f.share_a, f.share_b) and "UCGABAR_ARV" in f.claims
        assert fastpath.b_early(f) is f  # a peer's ring may not exist before the wait: no early B


@pytest.mark.parametrize("fam", SHARED, ids=[f.key for f in SHARED])
@pytest.mark.parametrize("shape", [(128, 512, 16384), (256, 512, 8192), (128, 1024, 8192), (256, 1024, 4096),
                                   (200, 2048, 4096), (128, 28672, 4096), (128, 512, 256)])
def test_deal_is_pieces_in_clusters_of_adjacent_tiles(fam, shape):
    M, N, K = shape
    assert fam.accepts(M, N, K), fam.shape_problems(M, N, K)
    d = fam.deal(M, N, K, H200_SMS)
    m_tiles, n_tiles = fam.tiles(M, N)
    pieces, cl = d.split, fam.shared_loads
    assert d.kernel_units == pieces and d.ctas == d.tiles * pieces and d.ctas % cl == 0
    assert d.cluster == (cl, 1, 1) and not d.dsmem and not d.fixup and d.segments == 1
    assert d.planes == (pieces if pieces > 1 else 0)  # the second pass sums the pieces in order
    assert d.ctas <= smallm.MAX_WAVES * H200_SMS or pieces == 1
    # the pieces cover each tile's k-tiles once, none shorter than the rule's minimum run
    ranges = [d.piece_k_tiles(p) for p in range(pieces)]
    assert ranges[0][0] == 0 and ranges[-1][1] == d.k_tiles and all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    assert {k1 - k0 for k0, k1 in ranges} <= {d.units, d.units - 1}
    assert pieces == 1 or min(k1 - k0 for k0, k1 in ranges) >= smallm.MIN_KT_PER_SPLIT
    # the kernel's block order: every (tile, piece) once; a cluster runs one piece of share_b x
    # share_a adjacent tiles, rank r at column r % share_a and row r // share_a of them (a row
    # of the cluster reads the same A rows, a column the same B rows, over the same k-tiles)
    ctas = [d.cta_of_block(b, m_tiles) for b in range(d.ctas)]  # the kernel's Segments (shared_cta)
    assert sorted(ctas) == list(range(d.ctas))
    for c0 in range(0, d.ctas, cl):
        cluster = ctas[c0:c0 + cl]
        tiles = [c // pieces for c in cluster]
        assert len({c % pieces for c in cluster}) == 1  # one piece
        rows = [t % m_tiles for t in tiles]
        cols = [t // m_tiles for t in tiles]
        assert rows == [rows[0] + r // fam.share_a for r in range(cl)] and rows[0] % fam.share_b == 0
        assert cols == [cols[0] + r % fam.share_a for r in range(cl)] and cols[0] % fam.share_a == 0



@pytest.mark.parametrize("fam", SHARED, ids=[f.key for f in SHARED])
def test_shapes_it_refuses_in_one_line(fam):
    M = fam.bm * fam.share_b  # whole clusters along M
    assert f"M >= {fam.bm}" in " ".join(fam.shape_problems(fam.bm - 1, 4096, 4096))
    odd_n = fam.bn * (fam.share_a + 1)  # a cluster would run past C
    assert f"N in a multiple of {fam.share_a} tiles" in " ".join(fam.shape_problems(M, odd_n, 4096))
    if fam.share_b > 1:
        assert f"M in a multiple of {fam.share_b} tiles" in " ".join(fam.shape_problems(M + fam.bm, 1024, 4096))
    # a forced split gives every tile that many pieces (12 k-tiles in 5: 2, 2, 3, 2, 3), at most
    # one per k-tile; runs of `units` k-tiles give ceil(k_tiles / units) pieces
    d = fam.fixed_deal(M, 1024, 64 * 12, 5)
    assert (d.split, d.units) == (5, 3) and [d.piece_k_tiles(p) for p in range(5)] == [
        (0, 2), (2, 4), (4, 7), (7, 9), (9, 12)]
    assert fam.fixed_deal(M, 1024, 64 * 12, 13).split == 12 and fam.make_deal(M, 1024, 64 * 12, 5).split == 3
    with pytest.raises(ValueError, match="split"):
        smallm.Deal(8, 12, 5, share_a=2)  # a shared-load deal names its pieces
    with pytest.raises(ValueError, match="split"):
        smallm.Deal(8, 12, 4, share_b=2, split=2)  # and its units are the longest piece's
    with pytest.raises(ValueError, match="shared by clusters"):
        smallm.with_fields(fam, "fixup", fixup=True)


@pytest.mark.parametrize("fam", SHARED, ids=[f.key for f in SHARED])
def test_each_cta_loads_a_slice_of_each_shared_operand(fam):
    """A's box is 1/share_a of the tile's rows, B's 1/share_b of its (each CTA multicasts its
    slices to its cluster row and column); the full barrier still expects the whole stage,
    a_rows (the kernel's argument) + BN rows."""
    M, N, K = 256, 1024, 4096
    args = fam.kernel_args(1, 2, 0, 3, M, N, K, 16, bf16=False, make_map=lambda *x: x)
    a_map, b_map, a_rows = args[0], args[1], args[-1]
    assert a_rows == fam.bm and a_map[4] == fam.bm // fam.share_a and a_map[4] % 8 == 0
    assert b_map[4] == fam.bn // fam.share_b and b_map[4] % 8 == 0
    assert fam.share_a * a_map[4] * a_map[5] * 2 + fam.share_b * b_map[4] * b_map[5] * 2 == fam.stage_bytes


def test_the_kernel_computes_the_same_block_order():
    """Deal.cta_of_block is the host's statement of the kernel's shared_cta: the same expression."""
    from gemm_ladder.cuda import jit
    text = (jit.KERNEL_DIR / "smallm" / "smallm_walks.cuh").read_text()
    assert ("const int b = (int)blockIdx.x, r = b % (NA * MB), g = b / (NA * MB), p = g % pieces, h = g / pieces,\n"
            "            groups = m_tiles / MB;") in text
    assert "return ((h / groups * NA + r % NA) * m_tiles + h % groups * MB + r / NA) * pieces + p;" in text
    # a piece's k-tiles, as Deal.piece_k_tiles
    assert ("u(cta / pieces * kt + piece_start(cta % pieces, kt, pieces)),\n"
            "        u1(cta / pieces * kt + piece_start(cta % pieces + 1, kt, pieces))") in text
    assert "return (int)((long long)p * kt / pieces);" in text


# -- the launches, emulated on the CPU (tests/fake_gpu.py) -------------------------------------
torch = pytest.importorskip("torch")


@pytest.mark.parametrize("fam", SHARED, ids=[f.key for f in SHARED])
@pytest.mark.parametrize("shape,b_mn", [((128, 512, 4096), False), ((256, 512, 2048), True), ((200, 1024, 512), False),
                                        ((128, 256, 64), False)])
def test_library_call_launches_the_clusters_and_sums_the_pieces(gpu, fam, shape, b_mn):
    """Forced through the library (step=key), a shared-load entry launches clusters of share_a x
    share_b with A's and B's boxes slices of the tile, its pieces go through the workspace and
    the second pass, and the product is right (the emulator checks each cluster's tiles and
    piece). A row-major b for an entry that reads B K-major only is copied first."""
    import gemm_ladder
    from fake_gpu import rnd
    M, N, K = shape
    x = rnd(M, K)
    w = rnd(K, N, seed=1) if b_mn else rnd(N, K, seed=1)
    c = gemm_ladder.matmul(x, w, step=fam.key) if b_mn else gemm_ladder.matmul_nt(x, w, step=fam.key)
    ref = x.float() @ (w.float() if b_mn else w.float().T)
    torch.testing.assert_close(c.float(), ref, atol=2e-2 * ref.abs().max().item(), rtol=1e-2)
    main = next(r for r in reversed(gpu.launches) if r.name == "gemm_smallm_splitk")
    d = fam.deal(M, N, K, H200_SMS)
    assert main.cluster == (fam.shared_loads, 1, 1) and main.grid == d.grid and main.units == d.kernel_units
    assert main.maps[0].box[0] == fam.bm // fam.share_a
    assert main.maps[1].box == ((64, 64) if b_mn and fam.b_mn_major else (fam.bn // fam.share_b, 64))
    assert (gpu.launches[-1].name == "gemm_smallm_reduce") == (d.planes > 0)


def test_parse_build_names_entries_and_experiments():
    assert smallm.parse_build("n64") is smallm.FAMILIES["smallm:n64"]
    assert smallm.parse_build("smallm") is smallm.FAMILIES["smallm"]
    assert smallm.parse_build("smallm:n64") is smallm.FAMILIES["smallm:n64"]
    pair = smallm.parse_build("n64+share_b=2+cluster_reduce=0+b_mn_major=0")
    assert (pair.share_a, pair.share_b, pair.cluster_reduce, pair.b_mn_major) == (1, 2, False, False)
    assert pair.key == "smallm:n64:share_b=2+cluster_reduce=0+b_mn_major=0"
    assert (pair.depth, pair.bk) == (smallm.FAMILIES["smallm:n64"].depth, smallm.FAMILIES["smallm:n64"].bk)
    assert pair.kernel_defines()["GL_SHARE_B"] == 2
    for bad in ("n64+share_a", "n64+nope=1", "n64+variant=1"):
        with pytest.raises(ValueError, match="NAME=INTEGER"):
            smallm.parse_build(bad)
    with pytest.raises(ValueError, match="shared by clusters"):  # the entry's own checks still hold
        smallm.parse_build("n64+share_a=2")  # n64 sums pieces in clusters: not with shared loads
    with pytest.raises(KeyError, match="unknown small-M"):
        smallm.parse_build("n65")
