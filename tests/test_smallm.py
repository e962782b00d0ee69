"""The small-M split-K family on the CPU: its registry entries, the split rule and workspace,
the shapes it takes, and both kernels of its file compiled clean (NVRTC) with the SASS it
claims. The GPU side is tests/test_gpu_smallm.py."""
import dataclasses
import re

import pytest

from gemm_ladder.cuda import jit
from gemm_ladder.families import common, cost_model, keys, ladder, ladder_step, smallm
from gemm_ladder.library import runner, select
from gemm_ladder.measure import sass
from sass_util import sass_or_skip

FAMS = list(smallm.FAMILIES.values())
IDS = [f.key for f in FAMS]
H200_SMS = 132




# -- registry ---------------------------------------------------------------------------------
def test_reached_by_key_but_not_a_rung():
    assert keys.get_step("smallm") is smallm.FAMILIES["smallm"]
    assert keys.get_step("smallm:n128").bn == 128
    rungs = {st.key for st in ladder.all_steps()} | {st.key for st in keys.parse_steps("all")}
    assert not rungs & set(smallm.FAMILIES)
    with pytest.raises(KeyError, match="smallm"):
        keys.get_step("smallm:n96")


@pytest.mark.parametrize("fam", FAMS, ids=IDS)
def test_defines_and_shared_memory_follow_the_fields(fam):
    assert fam.kernel_defines() == dict(GL_BM=64 * fam.consumers, GL_BN=fam.bn, GL_BK=fam.bk, GL_DEPTH=fam.depth,
                                        GL_CONSUMERS=fam.consumers, GL_DYNAMIC_SMEM=fam.dynamic_smem,
                                        GL_FIXUP=int(fam.fixup), GL_MULTICAST=fam.multicast,
                                        GL_PREFETCH_KT=fam.prefetch_kt, GL_K_ALTERNATE=int(fam.k_alternate),
                                        GL_B_EARLY=int(fam.b_early), GL_SHARE_A=fam.share_a,
                                        GL_SHARE_B=fam.share_b, GL_REDUCE_BATCH=smallm.REDUCE_BATCH,
                                        GL_MMA_LAG=fam.mma_lag)
    assert fam.threads == 128 * (1 + fam.consumers * (2 if fam.k_alternate else 1))
    # SharedStorage: DEPTH stages of A (BM x BK) and B (BN x BK), two barriers per stage; + 1 KB alignment
    assert fam.dynamic_smem == 1024 + fam.depth * (fam.bm + fam.bn) * fam.bk * 2 + 16 * fam.depth
    assert not fam.smem_problem() and fam.dynamic_smem <= ladder_step.MAX_SMEM_PER_BLOCK
    assert fam.barriers == 2 * fam.depth
    assert f"HGMMA.64x{fam.bn}x16" in fam.claims


def test_kernel_takes_configuration_only_from_defines():
    text = (jit.KERNEL_DIR / "smallm" / "smallm_splitk.cu").read_text()
    fam = smallm.FAMILIES["smallm"]
    for name in re.findall(r"#\s*(?:ifndef|ifdef|if\s+!?\s*defined\s*\(?)\s*(GL_\w+)", text):
        assert name in fam.kernel_defines(), f"smallm_splitk.cu reads {name}, which the family never passes"
    missing = {k: v for k, v in fam.kernel_defines().items() if k != "GL_BN"}
    with pytest.raises(jit.KernelBuildError, match="GL_BN"):
        jit.compile_kernel(fam.source, fam.entry, missing, use_cache=False)
    small = dict(fam.kernel_defines(), GL_DYNAMIC_SMEM=fam.dynamic_smem - 1024)
    with pytest.raises(jit.KernelBuildError, match="dynamic_smem is too small"):
        jit.compile_kernel(fam.source, fam.entry, small, use_cache=False)


# -- shapes -----------------------------------------------------------------------------------
def test_multicast_pairs_take_misaligned_b_rows_above_128_rows_only():
    """smallm:n128m2 (MULTICAST_NICHE): M > 128, under one ladder wave, B's rows as read not
    whole 32-byte sectors (K-major: K = 8 mod 16; N-major: N = 8 mod 16)."""
    fam = smallm.FAMILIES["smallm:n128m2"]
    assert fam.multicast == fam.cluster_m == 2 and fam.kernel_defines()["GL_MULTICAST"] == 2
    assert fam.accepts(1000, 1000, 1000) and fam.accepts(136, 520, 72) and fam.accepts(1000, 1000, 1008, b_mn=True)
    assert "32-byte sectors" in " ".join(fam.shape_problems(1024, 1024, 1024))
    assert "32-byte sectors" in " ".join(fam.shape_problems(1000, 1024, 1000, b_mn=True))  # N-major rows: N counts
    assert "M=128" in " ".join(fam.shape_problems(128, 1000, 1000))
    assert "M=2048" in " ".join(fam.shape_problems(2048, 2056, 2056))  # the ladder fills the SMs
    d = fam.deal(1000, 1000, 1000, H200_SMS)  # 16 x 8 tiles: 64 pairs, one each
    assert (d.ctas, d.cluster, d.groups, d.rounds, d.planes) == (128, (2, 1, 1), 64, 1, 0)
    assert "64 groups of 2 along M" in cost_model.describe_deal(d) and "1 round" in cost_model.describe_deal(d)
    d = fam.deal(264, 8192, 1000, H200_SMS)  # 5 row blocks (the third pair's second below C) x 64 columns
    assert (d.groups, d.clusters, d.ctas, d.rounds) == (192, 66, 132, 3)
    with pytest.raises(common.ConfigError, match="splits must be 1"):
        fam.fixed_deal(1000, 1000, 1000, 2)
    with pytest.raises(ValueError, match="multicast pairs"):
        smallm.with_fields(fam, "fix", fixup=True)
    a = fam.kernel_args(0, 0, 0, 0, 1000, 1000, 1000, 16, bf16=False, make_map=lambda *x: x)
    assert a[1][4:6] == (64, 64)  # each CTA of a pair loads half of the 128-row B tile


PAIRS = [smallm.with_fields(smallm.FAMILIES["smallm"], n, max_m=1 << 30, min_m=1, **kv) for n, kv in [
    ("n64m2", dict(bn=64, depth=12, multicast=2, b_mn_major=False)), ("c2n128m2", dict(bn=128, consumers=2, multicast=2))]]


@pytest.mark.parametrize("fam", FAMS + PAIRS, ids=IDS + [f.key for f in PAIRS])
@pytest.mark.parametrize("M", [1, 7, 16, 64, 100, 1000])
@pytest.mark.parametrize("b_mn", [False, True])
def test_boxes_deliver_what_the_full_barrier_expects(fam, M, b_mn):
    """The bytes that land in each CTA's stage — its own boxes, and what its pair multicasts —
    are the kernel's stage_bytes(a_rows) = (a_rows + BN) x BK x 2, which each full barrier
    expects: fewer and the pipeline hangs, more and a stage overruns its neighbour. A 128-wide
    k-tile's stage receives them twice, one set per 64-wide block."""
    if b_mn and not fam.b_mn_major:
        return
    N, K = 1024, 1024
    maps = fam.kernel_args(1, 2, 0, 3, M, N, K, 16, bf16=False, b_mn=b_mn, make_map=lambda *x: x)
    (_, _, _, _, a_box_rows, a_box_cols, _), (_, _, _, _, b_box_0, b_box_1, _) = maps[0], maps[1]
    a_rows = maps[-1]
    a_bytes = a_box_rows * a_box_cols * 2 * fam.share_a  # A: one box per CTA (shared A: one from each of its row)
    # B: K-major one box (BN / cluster_m rows, each CTA of a B-sharing pair its half, multicast);
    # N-major ceil(BN / cluster_m / 64) boxes of 64 columns x BK k-rows
    b_boxes = -(-fam.bn // fam.cluster_m // 64) if b_mn else 1
    b_bytes = b_boxes * b_box_0 * b_box_1 * 2 * fam.cluster_m
    bn_smem = -(-fam.bn // 64) * 64 if b_mn else fam.bn
    blocks = fam.bk // smallm.K_BLOCK
    assert blocks * (a_bytes + b_bytes) == (a_rows + bn_smem) * fam.bk * 2, (a_bytes, b_bytes, a_rows)


GENERAL = [(f, i) for f, i in zip(FAMS, IDS)
           if not f.one_wave_max_kt and not f.max_kt and not f.min_kt and f.multicast == 1 and f.shared_loads == 1]


@pytest.mark.parametrize("fam", [f for f, _ in GENERAL], ids=[i for _, i in GENERAL])
def test_accepts(fam):
    for shape in [(1, 8, 8), (7, 264, 72), (16, 4096, 4096), (128, 11008, 4096), (100, 4096, 11008)]:
        assert fam.accepts(*shape) == (shape[0] >= fam.min_m), fam.shape_problems(*shape)
    # above max_m: only problems under one wave of the ladder's 128x128 tiles (132), from rows
    # of whole 32-byte sectors (K a multiple of 16)
    big = fam.max_m + 1  # two tile rows of 128
    assert fam.accepts(big, 65 * 128, 4096) and fam.accepts(1024, 1024, 1024)
    assert f"M={big}" in " ".join(fam.shape_problems(big, 66 * 128, 4096))  # 132 tiles: the ladder's
    assert "K=1000" in " ".join(fam.shape_problems(1000, 1000, 1000))
    assert fam.accepts(1008, 1008, 1008)
    assert fam.accepts(100, 4096, 1000) == (fam.min_m <= 100)  # decode-like M: any K % 8
    assert "K=" in " ".join(fam.shape_problems(16, 4096, 4100))
    assert "N=" in " ".join(fam.shape_problems(16, 4100, 4096))
    assert not fam.accepts(0, 8, 8)


def test_short_ring_entry_takes_a_short_k_only():
    """smallm:n64s (items 66, 123): n64's tile and rules with a 4-stage ring of 128-wide k-tiles,
    for K up to 512; the selection lists it first, so it takes the shapes n64 would on a short K,
    and no other."""
    fam, base = smallm.FAMILIES["smallm:n64s"], smallm.FAMILIES["smallm:n64"]
    assert (fam.bn, fam.bk, fam.depth, fam.max_kt) == (64, 128, 4, 4) and fam.dynamic_smem < base.dynamic_smem
    for shape in [(256, 256, 256), (512, 512, 512), (16, 4096, 512), (100, 4096, 72)]:
        assert fam.accepts(*shape) and base.accepts(*shape), shape
    assert "K=576" in " ".join(fam.shape_problems(512, 512, 576))  # 5 k-tiles
    assert "K=4096" in " ".join(fam.shape_problems(16, 4096, 4096))
    assert select.CANDIDATES.index("smallm:n64s") < select.CANDIDATES.index("smallm:n64")
    assert select.pick(256, 256, 256) == select.pick(512, 512, 512) == "smallm:n64s"
    assert select.pick(64, 4096, 4096) == "smallm:n64"


def test_one_wave_entry_takes_its_niche_only():
    """smallm:n32 (item 47): M <= 16, whole 64 x 32 tiles in one wave, K <= 4096; nothing else."""
    fam = smallm.FAMILIES["smallm:n32"]
    assert fam.accepts(1, 4096, 4096) and fam.accepts(16, 4096, 4096) and fam.accepts(16, 264, 72)
    assert "M=17" in " ".join(fam.shape_problems(17, 4096, 4096))  # no large-M path
    assert "one wave" in " ".join(fam.shape_problems(16, 4224 + 32, 4096))  # 133 tiles
    assert "K=4160" in " ".join(fam.shape_problems(16, 4096, 4160))  # 65 k-tiles
    assert not fam.b_mn_major and common.reads_mn(fam) == (False, False)  # 32 columns: no N-major blocks
    with pytest.raises(ValueError, match="64-column blocks"):
        smallm.with_fields(fam, "mn", b_mn_major=True)
    # the selection picks it only there, on a short K (at 4096 x 4096 smallm:n64's pairs summed in
    # clusters measured ahead, item 69), not at a long K or with a row-major b
    assert select.pick(16, 4096, 512, "float16", H200_SMS) == "smallm:n32"
    assert select.pick(16, 4096, 14336, "float16", H200_SMS) != "smallm:n32"
    assert select.step_for(16, 4096, 512, "float16", H200_SMS, a_mn=False, b_mn=True).key != "smallm:n32"


def test_n64_sums_split_tiles_in_clusters():
    """smallm:n64 sums a tile's K pieces in a cluster (DSMEM) where its deal splits K evenly,
    with no workspace and no second pass (item 69: 5-7 % faster than planes at 16 x 4096 x
    {11008, 14336}); where its tiles stay whole nothing changes."""
    n64 = smallm.FAMILIES["smallm:n64"]
    assert n64.cluster_reduce
    for shape in [(16, 4096, 14336), (16, 4096, 11008), (1, 4096, 14336), (64, 4096, 4096)]:
        assert select.pick(*shape, "float16", H200_SMS) == "smallm:n64", shape
        d = n64.deal(*shape, H200_SMS)
        assert d.dsmem and d.cluster == (2, 1, 1) and d.planes == 0 and d.ctas == 128, (shape, d)
    whole = n64.deal(16, 8192, 8192, H200_SMS)  # 128 whole tiles: no pieces to sum
    assert not whole.dsmem and not whole.split_tiles


# -- the deal of work --------------------------------------------------------------------------
SPLIT_SHAPES = [(M, N, K) for M in (1, 7, 16, 64, 100, 128)
                for N, K in [(4096, 4096), (11008, 4096), (4096, 11008), (264, 72), (14336, 4096),
                             (4096, 14336), (28672, 4096), (28672, 8192), (8192, 8192), (8, 8), (4096, 520)]]


def _runs(d, m_tiles=0):
    """Walk the deal as the kernel's Segments (or, multicast, PairWalk) does: per CTA, its
    (tile, k0, k1, plane or None); a multicast pair's tile below C (row block m_tiles) as None."""
    out = []
    if d.mc > 1:
        m_groups = -(-m_tiles // d.mc)
        for cta in range(d.ctas):
            segs = []
            for g in range(cta // d.mc, d.groups, d.clusters):
                mb, nb = g % m_groups * d.mc + cta % d.mc, g // m_groups
                segs.append((nb * m_tiles + mb if mb < m_tiles else None, 0, d.k_tiles, None))
            out.append(segs)
        return out
    if d.split:  # shared loads: every tile in `split` pieces, CTA t * split + p runs piece p of tile t
        return [[(cta // d.split, *d.piece_k_tiles(cta % d.split), cta % d.split if d.split > 1 else None)]
                for cta in range(d.ctas)]
    for cta in range(d.ctas):
        u, u1, segs = cta * d.units, min((cta + 1) * d.units, d.total), []
        while u < u1:
            t = u // d.k_tiles
            k0, k1 = u - t * d.k_tiles, min(d.k_tiles, u1 - t * d.k_tiles)
            whole = k0 == 0 and k1 == d.k_tiles
            segs.append((t, k0, k1, None if whole else cta - t * d.k_tiles // d.units))
            u = (t + 1) * d.k_tiles
        out.append(segs)
    return out


@pytest.mark.parametrize("fam", FAMS, ids=IDS)
def test_deal_covers_every_unit_once_and_fills_the_machine(fam):
    for M, N, K in SPLIT_SHAPES:
        if not fam.accepts(M, N, K):
            continue
        d = fam.deal(M, N, K, H200_SMS)
        m_tiles, n_tiles = fam.tiles(M, N)
        assert d.tiles == m_tiles * n_tiles and d.k_tiles == fam.k_tiles(K)
        assert d.units >= min(d.k_tiles, smallm.MIN_KT_PER_SPLIT)
        covered = {}
        for segs in _runs(d, m_tiles):
            assert 1 <= len(segs) <= d.segments
            for t, k0, k1, plane in segs:
                if t is None:  # a multicast pair's second tile below C: loads zeros, stores nothing
                    assert d.mc > 1 and m_tiles % d.mc
                    continue
                for k in range(k0, k1):
                    assert (t, k) not in covered  # no unit twice
                    covered[(t, k)] = plane
                if d.dsmem:  # one piece per CTA; the CTAs of a tile are one cluster, rank = piece
                    assert len(segs) == 1 and plane is not None and plane < d.cluster[0]
                    assert d.ctas % d.cluster[0] == 0 and d.pieces(t) == d.cluster[0]
                    continue
                assert plane is None or 0 <= plane < d.planes  # a piece has a plane; one per CTA of the tile
                assert (plane is None) == (d.pieces(t) == 1)   # the reduction skips exactly the whole tiles
        assert len(covered) == d.total  # none missing
        # the grid is one wave of equal runs where the work allows it, never a ragged second wave;
        # alternating k-tiles: whole tiles, one per CTA (the selection takes it only where the
        # entry it stands in for deals so); shared A: one aligned piece per CTA, whole tiles at most
        assert d.ctas <= smallm.MAX_WAVES * H200_SMS or (fam.k_alternate or fam.shared_loads > 1) and d.ctas == d.tiles
        if fam.k_alternate:
            assert d.units == d.k_tiles and d.ctas == d.tiles and not d.planes and not d.dsmem
        # few tiles and a long K: split — while the fp32 pieces are small beside B (M <= 64; at
        # 128 x 4096 x 4096 one consumer's 64 whole tiles are priced below planes of 2 x 128 x
        # 4096 floats, as measured at 128 x 1024 x 1024 and 192 x 2048 x 2048, perf-notes item 33).
        # Half the SMs' worth of whole tiles may stay whole: n64's 64 at 64 x 4096 x 4096 measured
        # 18.5-18.9 us against 21.0 split in two (perf-notes item 44)
        if d.mc > 1:  # whole tiles, pairs of clusters at most as many as fit at once
            assert d.cluster == (d.mc, 1, 1) and d.ctas % d.mc == 0 and d.ctas <= H200_SMS and not d.planes
        elif M <= 64 and d.tiles * 3 <= H200_SMS and d.k_tiles >= 4 * smallm.MIN_KT_PER_SPLIT:
            assert d.splits > 1, (M, N, K)
        assert fam.workspace_shape(M, N, d) == ((d.planes, M, N) if d.planes else None)
        assert not (d.dsmem and d.planes)


def test_deal_examples():
    f = smallm.FAMILIES["smallm"]
    d = f.deal(16, 4096, 4096, H200_SMS)  # 16 tiles x 64 k-tiles: 86 CTAs (HBM saturated) in runs of 12
    assert (d.ctas, d.units, d.planes, d.cluster) == (86, 12, 6, (1, 1, 1))
    d = f.deal(1, 14336, 4096, H200_SMS)  # 56 tiles of 64 k-tiles: split, one wave
    assert d.ctas <= H200_SMS and d.planes > 1
    d = f.deal(16, 264, 72, H200_SMS)  # 2 k-tiles: nothing to split
    assert (d.ctas, d.units, d.planes) == (2, 2, 0)
    g = smallm.FAMILIES["smallm:n128"]
    d = g.deal(1, 14336, 4096, H200_SMS)  # 112 whole tiles: one wave, no second pass
    assert (d.ctas, d.planes) == (112, 0)
    d = g.deal(16, 11008, 4096, H200_SMS)  # 86 whole tiles already saturate HBM: no split, no second pass
    assert (d.ctas, d.units, d.planes, d.segments) == (86, 64, 0, 1)
    d = g.deal(16, 4096, 14336, H200_SMS)  # 32 tiles x 224 k-tiles: runs cross tiles (stream-K)
    assert d.units % d.k_tiles and d.k_tiles % d.units and d.planes > 1
    d = g.deal(1, 28672, 8192, H200_SMS)  # 224 whole tiles would be 1.7 waves: 112 runs of two tiles are one
    assert (d.ctas, d.units, d.planes, d.segments) == (112, 256, 0, 2)
    c2 = smallm.FAMILIES["smallm:c2n128"]
    d = c2.deal(128, 8192, 8192, H200_SMS)  # 128 rows in one tile: B streams once
    assert (d.tiles, d.ctas) == (64, 128)
    ds = smallm.FAMILIES["smallm:dsmem"]
    d = ds.deal(64, 14336, 4096, H200_SMS)  # pairs of CTAs (66 fit at once) sum each tile on chip
    assert (d.ctas, d.cluster, d.planes) == (112, (2, 1, 1), 0)
    d = ds.deal(16, 4096, 4096, H200_SMS)  # 16 clusters of 8 would be two waves (15 fit): clusters of 4
    assert d.dsmem and d.cluster == (4, 1, 1) and d.ctas == 64


def test_fixed_deal_splits_k():
    f = smallm.FAMILIES["smallm"]
    assert f.fixed_deal(16, 4096, 4096, 3).units == 22   # 64 k-tiles: 22 + 22 + 20 (runs cross tiles)
    assert f.fixed_deal(16, 256, 192, 4).units == 1      # 3 k-tiles cannot feed 4 splits: 3 pieces
    assert f.fixed_deal(16, 256, 192, 4).planes == 3
    assert f.fixed_deal(16, 4096, 4096, 8).planes == 8
    ds = smallm.FAMILIES["smallm:dsmem"]
    assert ds.fixed_deal(16, 4096, 4096, 8).cluster == (8, 1, 1)   # aligned, P = 8: summed in the cluster
    assert ds.fixed_deal(16, 4096, 4096, 16).planes == 16          # P = 16 > 8: through the workspace
    assert f.fixed_deal(16, 4096, 4096, 1).planes == 0  # whole tiles: no workspace
    with pytest.raises(ValueError):
        smallm.Deal(16, 64, 5, dsmem=True)  # 5 does not divide 64
    with pytest.raises(ValueError):
        f.fixed_deal(16, 64, 64, 0)


def test_planes_match_a_count_over_all_tiles():
    import random
    rng = random.Random(7)
    for _ in range(2000):
        d = smallm.Deal(rng.randint(1, 300), rng.randint(1, 200), rng.randint(1, 500))
        most = max(d.pieces(t) for t in range(d.tiles))
        assert d.planes == (most if most > 1 else 0)
        assert d.planes_bound >= d.planes
        runs = _runs(d) if d.ctas <= 400 else []
        assert all(len(r) <= d.segments for r in runs)


def test_reduction_grid():
    f = smallm.FAMILIES["smallm"]  # 2 elements per thread
    assert f.reduce_grid(16, 4096) == (4096 // 2 // smallm.REDUCE_THREADS, 16, 1)  # (along a row, rows)
    assert f.reduce_grid(1, 8) == (1, 1, 1)
    assert f.reduce_grid(3, 520) == (3, 3, 1)  # 260 threads per row


def test_deal_cost_prices_the_workspace_and_the_waves():
    f = smallm.FAMILIES["smallm"]
    whole, split = f.make_deal(16, 4096, 4096, 64), f.make_deal(16, 4096, 4096, 8)
    assert f.deal_cost(16, 4096, H200_SMS, split) < f.deal_cost(16, 4096, H200_SMS, whole)
    assert f.deal_cost(128, 4096, H200_SMS, split) > f.deal_cost(1, 4096, H200_SMS, split)


def test_selection_reads_the_entry():
    """The cost model (families/cost_model.py) reads a candidate's geometry from its registry
    entry; the split is per shape (deal), not a field."""
    from gemm_ladder.library import select
    f = keys.get_step("smallm").facts()
    assert (f.bm, f.bn, f.bk, f.cluster_m, f.persistent, f.swap_ab) == (64, 256, 64, 1, False, False)


def test_plan_refuses_stream_k_for_the_family():
    """The family plans itself (tracing included: its GL_TRACE build, and the shared headers'
    ablation switches); the ladder's stream-K deal is not its own."""
    with pytest.raises(common.ConfigError, match="no stream-K deal"):
        runner.plan(smallm.FAMILIES["smallm:n64"], None, None, sk_tiles=4)


# -- the kernels ------------------------------------------------------------------------------
@pytest.mark.parametrize("fam", FAMS, ids=IDS)
@pytest.mark.parametrize("bf16", [False, True], ids=["fp16", "bf16"])
def test_compiles_clean(fam, bf16):
    k = fam.compile(bf16=bf16)  # strict: raises on spills or C75xx warnings in any entry
    for entry in (fam.entry, fam.reduce_entry):
        r = jit.parse_ptxas_log(k.log, entry)
        assert r.registers > 0, (entry, k.log)
        assert r.spill_bytes == 0 and r.stack_frame_bytes == 0, (entry, r)
        assert not [w for w in r.warnings if "C75" in w], r.warnings
    assert k.report.kernel == fam.entry and k.report.registers <= 255
    # a reduction block must fit in the registers a split-K CTA leaves (programmatic launch)
    assert jit.parse_ptxas_log(k.log, fam.reduce_entry).registers <= smallm.REDUCE_MAX_REGS
    assert 256 * k.report.registers + smallm.REDUCE_THREADS * smallm.REDUCE_MAX_REGS <= 65536


@pytest.mark.parametrize("fam", FAMS, ids=IDS)
def test_sass_holds_claims(fam):
    text = sass_or_skip(fam.compile().cubin)
    ops = sass.opcodes(text)
    missing = [c for c in fam.claims if sass.count_class(ops, c) == 0]
    assert not missing, missing
    assert not [c for c in fam.sass_absent if sass.count_class(ops, c)]
    assert sass.count_class(ops, "USETMAXREG") >= 2, "producer dec + consumer inc"
    assert sass.mma_loop_full_waits(text) == 0, "the k-loop keeps one wgmma group in flight"
    if not fam.k_alternate:  # the k-loop waits for the group mma_lag back, not a nearer one
        loop = sass.mma_loop_body(sass.function_text(text, fam.entry))
        waits = {t.split()[-1] for t in loop if t.startswith("WARPGROUP.DEPBAR")}
        assert waits == {hex(fam.mma_lag)}, (fam.key, waits)
    bars = [t for _, t in sass.instructions(text) if t.startswith("BAR.")]
    # after barrier init; the consumers' named barrier before a cluster reduction stages its
    # piece over the ring (and, with two consumers, before the staged epilogue writes into the
    # stage both read); the two cluster barriers, met in both roles' branches (ptxas pairs
    # each with a CTA barrier, and adds its own where warps reach them on divergent paths)
    assert bars[0] == "BAR.SYNC.DEFER_BLOCKING 0x0", bars
    named = [b for b in bars if b.startswith("BAR.SYNC.DEFER_BLOCKING 0x1")]
    # multicast pairs, shared A: no cluster reduction
    both = (fam.multicast == 1 and fam.shared_loads == 1) + (fam.staged_c and fam.consumers > 1)
    if fam.k_alternate:  # alternating k-tiles: the hand-over's two barriers of both warpgroups instead
        both = 2
    assert named == [f"BAR.SYNC.DEFER_BLOCKING 0x1, {hex(128 * fam.mma_warpgroups)}"] * both, bars
    assert sass.count_class(ops, "UCGABAR_ARV") and sass.count_class(ops, "UCGABAR_WAIT")


@pytest.mark.parametrize("extra", [{"GL_DEBUG_WAITS": 1}, {"GL_TRACE": 1}], ids=["debug", "trace"])
def test_instrumented_builds_compile_clean(extra):
    k = smallm.FAMILIES["smallm"].compile(extra_defines=extra)
    assert k.report.spill_bytes == 0


def test_ptxas_report_is_per_entry():
    log = ("ptxas info    : 32 bytes gmem\n"
           "ptxas info    : Compiling entry function 'second' for 'sm_90a'\n"
           "ptxas         .     0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads\n"
           "ptxas info    : Used 34 registers, used 0 barriers\n"
           "ptxas info    : Compiling entry function 'first' for 'sm_90a'\n"
           "ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
           "ptxas info    : Used 232 registers, used 1 barriers\n")
    first, second = jit.parse_ptxas_log(log, "first"), jit.parse_ptxas_log(log, "second")
    assert (first.registers, first.spill_bytes, first.barriers) == (232, 0, 1)
    assert (second.registers, second.spill_bytes) == (34, 16)
    assert set(jit.ptxas_sections(log)) == {"", "first", "second"}


def test_selection_explains_the_deal():
    """`gemm-ladder explain` says how a split-K family deals out its work."""
    from gemm_ladder.library import select
    ch = select.choose(16, 4096, 4096)
    assert ch.pick.key.startswith("smallm")
    d = keys.get_step(ch.pick.key).deal(16, 4096, 4096, 132)
    assert f"in runs of {d.units} over {d.ctas} CTAs" in ch.reason
    whole = select.choose(1, 28672, 8192)
    assert "every tile whole" in whole.reason
    ds = smallm.FAMILIES["smallm:dsmem"].deal(64, 14336, 4096, H200_SMS)
    assert cost_model.describe_deal(ds).endswith("2 pieces per tile summed in a cluster")


def test_fixup_deal_is_data_parallel_then_stream_k():
    """A fixup deal on G CTAs: floor(tiles / G) rounds of whole tiles, then the rest's units
    in equal runs; flags + one slot per CTA, only when some tile is split."""
    fam = smallm.with_fields(smallm.FAMILIES["smallm:c2"], "fixup", fixup=True, max_m=1 << 30)
    assert fam.kernel_defines()["GL_FIXUP"] == 1
    d = smallm.Deal.hybrid(288, 48, 132)  # 3072^3 in 128 x 256 tiles
    assert (d.ctas, d.dp_rounds, d.units, d.planes, d.split_tiles) == (132, 2, 9, 0, True)
    assert d.run == 2 * 48 + 9 and d.grid == (132, 1, 1) and d.cluster == (1, 1, 1)
    assert 132 * d.units >= (288 - 264) * 48  # the stream-K runs cover the rest
    assert fam.workspace_shape(3072, 3072, d) == (smallm.fixup_flag_floats(132, 2) + 132 * 128 * 256,)
    whole = smallm.Deal.hybrid(264, 48, 132)  # two full rounds: nothing to split, no buffer
    assert not whole.split_tiles and fam.workspace_shape(3072, 2816, whole) is None
    assert smallm.fixup_flag_floats(132, 2) * 4 >= 132 * 2 * 4 and smallm.fixup_flag_floats(132, 2) % 64 == 0
    for splits in (1, 3, 8):  # a fixed split on a fixup entry stays a fixup deal of one wave at most
        f = fam.fixed_deal(1024, 4096, 4096, splits)
        assert f.fixup and f.ctas <= smallm.MAX_FIXUP_CTAS
    best = fam.deal(512, 11008, 4096, H200_SMS)
    assert best.fixup and best.ctas <= H200_SMS


@pytest.mark.parametrize("key", ["smallm:n64", "smallm:c2n64", "smallm:n128"])
@pytest.mark.parametrize("bf16", [False, True], ids=["fp16", "bf16"])
def test_second_pass_issues_a_batch_before_its_first_add(key, bf16):
    """The second pass has a whole batch of planes in flight before it first waits on one
    (perf-notes item 113: written as a plain loop, ptxas issued a plane's load after the
    previous add)."""
    text = sass_or_skip(smallm.FAMILIES[key].compile(bf16=bf16).cubin)
    loads = sass.loads_before_first_use(sass.function_text(text, smallm.SmallM.reduce_entry))
    assert loads >= smallm.REDUCE_BATCH, loads


@pytest.mark.parametrize("key,shape", [("smallm:c2n64", (128, 512, 16384)), ("smallm:n128", (16, 1000, 8192)),
                                       ("smallm:n64a4", (128, 512, 4096))])
def test_second_pass_through_the_library(monkeypatch, key, shape):
    """An entry forced through the library on a deal of many planes launches the second pass on
    its grid (two elements per thread) and the product is right (the emulator sums the planes)."""
    import torch
    import gemm_ladder
    from fake_gpu import FakeGpu, rnd
    gpu = FakeGpu(monkeypatch)
    fam = smallm.FAMILIES[key]
    M, N, K = shape
    assert fam.deal(M, N, K, 132).planes > 1
    x, w = rnd(M, K), rnd(N, K, seed=1)
    c = gemm_ladder.matmul_nt(x, w, step=fam)
    ref = x.float() @ w.float().T
    torch.testing.assert_close(c.float(), ref, atol=2e-2 * ref.abs().max().item(), rtol=1e-2)
    red = gpu.launches[-1]
    assert red.name == "gemm_smallm_reduce" and red.grid == fam.reduce_grid(M, N)


def test_mma_lag_leaves_the_producer_a_stage():
    """GL_MMA_LAG: 1 <= lag < depth (the groups held in flight keep their stages), and 1 with
    alternating k-tiles (their own loop)."""
    base = smallm.FAMILIES["smallm:n64s"]  # 4 stages
    assert smallm.with_fields(base, "lag3", mma_lag=3).mma_lag == 3
    for bad in (0, 4):
        with pytest.raises(ValueError, match="mma_lag"):
            smallm.with_fields(base, f"lag{bad}", mma_lag=bad)
    with pytest.raises(ValueError, match="mma_lag"):
        smallm.with_fields(smallm.FAMILIES["smallm:n64alt"], "alt2", mma_lag=2)
