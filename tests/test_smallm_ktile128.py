"""128-wide k-tiles in the small-M kernel (`smallm.k128_twin`, perf-notes items 122-123), on the CPU:
every entry's 64- and 128-wide forms (one of them the entry) are valid configurations in the same ring bytes; its builds compile
without spills and issue twice the entry's wgmmas per k-tile from two 64-wide boxes per operand;
forced through the library its launches (the emulator in tests/fake_gpu.py) carry 64-wide boxes,
a deal counted in 128-wide k-tiles, and the right product, for every way the family deals.
tests/test_gpu_smallm_ktile128.py runs the kernels."""
import re

import pytest

from gemm_ladder.families import smallm
from gemm_ladder.library import select
from ktile128_cases import CASES, IDS
from sass_util import sass_or_skip

H200_SMS = 132
# each entry's two forms: 64-wide (NARROW) and 128-wide (TWINS); one of them is the entry itself
NARROW = {key: smallm.k64_twin(fam) for key, fam in smallm.FAMILIES.items()}
TWINS = {key: smallm.k128_twin(fam) for key, fam in smallm.FAMILIES.items()}
WIDE_ENTRIES = ("smallm:n32", "smallm:n64", "smallm:n64s")  # measured faster at bk 128 (item 123)


@pytest.mark.parametrize("key", list(TWINS))
def test_twin_keeps_the_ring_bytes_and_is_no_candidate(key):
    fam, narrow, twin = smallm.FAMILIES[key], NARROW[key], TWINS[key]
    assert (fam.bk == 128) == (key in WIDE_ENTRIES) and fam in (narrow, twin)
    assert twin.bk == 128 and twin.stage_bytes == 2 * narrow.stage_bytes and twin.depth * 2 in (narrow.depth,
                                                                                              narrow.depth - 1)
    assert twin.depth * twin.stage_bytes <= narrow.depth * narrow.stage_bytes and not twin.smem_problem()
    assert not narrow.smem_problem() and smallm.k128_twin(narrow).depth == twin.depth
    lists = (smallm.FAMILIES, select.CANDIDATES, select.ONE_WAVE_CANDIDATES, select.MISALIGNED_B_CANDIDATES)
    other = narrow if fam is twin else twin
    assert all(other.key not in keys for keys in lists)
    # K limits in k-tiles of each width: the same K
    assert twin.max_kt * 128 == narrow.max_kt * 64 and twin.min_kt * 128 == narrow.min_kt * 64
    assert twin.one_wave_max_kt * 128 == narrow.one_wave_max_kt * 64
    assert twin.k_tiles(1000) == 8 and narrow.k_tiles(1000) == 16


def test_bk_other_than_64_or_128_is_refused():
    with pytest.raises(ValueError, match="k-tile 64 or 128"):
        smallm.with_fields(smallm.FAMILIES["smallm:n64"], "k192", bk=192)


def _hgmma_and_loads(cubin) -> tuple[int, int]:
    text = sass_or_skip(cubin)
    main = re.split(r"\n\s*\.(?:text|section)", text)
    body = next((t for t in main if "gemm_smallm_splitk" in t and "HGMMA" in t), text)
    return body.count("HGMMA"), body.count("UTMALDG")


@pytest.mark.parametrize("key", ["smallm:n64s", "smallm:n64", "smallm:n128", "smallm:n128m2", "smallm:c2n64d",
                                 "smallm:n64alt", "smallm:n64a2b2", "smallm:n32"])
def test_twin_compiles_with_twice_the_mmas_per_k_tile(key):
    """No spill (the JIT refuses one), and each k-tile's group issues the entry's wgmmas twice,
    from two boxes of A and of B (one k-loop: the counts of the whole kernel double)."""
    fam, twin = NARROW[key], TWINS[key]
    for bf16 in (False, True):
        base, wide = fam.compile(bf16=bf16), twin.compile(bf16=bf16)
        assert wide.report.spill_store_bytes == 0 and wide.report.registers <= 232 and not wide.report.warnings
        (h0, l0), (h1, l1) = _hgmma_and_loads(base.cubin), _hgmma_and_loads(wide.cubin)
        assert h1 == 2 * h0, (h0, h1)
        assert l1 == 2 * l0 or fam.b_early, (l0, l1)


# -- the launches, emulated on the CPU (tests/fake_gpu.py) -------------------------------------
torch = pytest.importorskip("torch")


@pytest.mark.parametrize("key,M,N,K,b_mn", CASES, ids=IDS)
def test_twin_through_the_library(gpu, key, M, N, K, b_mn):
    import gemm_ladder
    from fake_gpu import rnd
    twin = TWINS[key]
    assert not twin.shape_problems(M, N, K, b_mn=b_mn), twin.shape_problems(M, N, K, b_mn=b_mn)
    x = rnd(M, K)
    w = rnd(K, N, seed=1) if b_mn else rnd(N, K, seed=1)
    c = gemm_ladder.matmul(x, w, step=twin) if b_mn else gemm_ladder.matmul_nt(x, w, step=twin)
    ref = x.float() @ (w.float() if b_mn else w.float().T)
    torch.testing.assert_close(c.float(), ref, atol=2e-2 * ref.abs().max().item(), rtol=1e-2)
    main = next(r for r in reversed(gpu.launches) if r.name == "gemm_smallm_splitk")
    assert main.bk == 128 and main.maps[0].box[1] == 64  # 64-wide boxes, 128-wide k-tiles
    d = twin.deal(M, N, K, H200_SMS)
    assert main.grid == d.grid and d.k_tiles == -(-K // 128)


def test_the_probe_gives_the_twin_the_picks_deal():
    """k128_ab.py's same_deal: the twin runs the pick's CTAs and pieces where 128-wide k-tiles can
    cut them (whole tiles, cluster sums, workspace runs of an even count), else its own rule."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "probes" / "smallsq" / "k128_ab.py"
    spec = importlib.util.spec_from_file_location("k128_ab", path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    for key, shape, expect in [("smallm:n64s", (512, 512, 512), {"splits": 1}),
                               ("smallm:n64", (256, 1024, 4096), {"splits": 2}),
                               ("smallm:c2n64", (128, 512, 16384), {"units": 10}),
                               ("smallm:n64", (7, 264, 1000), {"splits": 4}),
                               ("smallm:n64s", (320, 320, 320), None),  # 5 k-tiles: no 128-wide cut
                               ("smallm:n64alt", (128, 4096, 4096), None)]:  # whole tiles by its own rule
        fam, twin = NARROW[key], TWINS[key]
        got = probe.same_deal(fam, twin, *shape, H200_SMS)
        assert got == expect, (key, shape, got)
        if got is not None:
            d, t = fam.deal(*shape, H200_SMS), twin.plan_deal(*shape, H200_SMS, **got)
            assert (t.ctas, t.dsmem, t.planes, 2 * t.units) == (d.ctas, d.dsmem, d.planes, d.units)
    # a 128-wide entry's deal given to its 64-wide form: runs of twice the k-tiles, the same pieces
    for key, shape in [("smallm:n64", (256, 1024, 4096)), ("smallm:n64", (7, 264, 1000)), ("smallm:n64", (1, 4096, 14336)),
                       ("smallm:n64s", (512, 512, 512)), ("smallm:n32", (16, 4096, 4096))]:
        fam, narrow = smallm.FAMILIES[key], NARROW[key]
        got = probe.same_deal(fam, narrow, *shape, H200_SMS)
        d, t = fam.deal(*shape, H200_SMS), narrow.plan_deal(*shape, H200_SMS, **(got or {}))
        assert got is not None or fam.whole_tiles, (key, shape)
        if got is not None:
            assert (t.ctas, t.dsmem, t.planes, t.units) == (d.ctas, d.dsmem, d.planes, 2 * d.units), (key, shape, got)


def test_the_twins_deal_counts_the_constants_in_64_wide_k_tiles():
    """The deal's overheads and shortest run count 64-wide k-tiles: where the entry's runs are an
    even count of 64-wide k-tiles (or whole tiles, or cluster pieces) the twin's rule cuts K at
    the same places at the same cost in bytes; where they are odd it can't, and its own deal
    costs within 5 %."""
    total = 0
    for key, fam in NARROW.items():
        twin = TWINS[key]
        for M, N, K in [(16, 4096, 4096), (128, 512, 16384), (256, 1024, 4096), (64, 2048, 8192), (1, 14336, 4096),
                        (512, 512, 512), (100, 11008, 4096), (128, 2048, 8192)]:
            if fam.shape_problems(M, N, K) or twin.shape_problems(M, N, K):
                continue
            d, t = fam.deal(M, N, K, H200_SMS), twin.deal(M, N, K, H200_SMS)
            cost, twin_cost = fam.deal_cost(M, N, H200_SMS, d), 2 * twin.deal_cost(M, N, H200_SMS, t)
            total += 1
            if d.units % 2 == 0:
                assert (t.ctas, t.dsmem, t.planes, 2 * t.units) == (d.ctas, d.dsmem, d.planes, d.units), (key, M, N, K)
                assert twin_cost == pytest.approx(cost)
            else:
                assert twin_cost <= 1.05 * cost, (key, M, N, K, cost, twin_cost)
    assert total > 60


def test_a_128_wide_entry_deals_as_its_64_wide_form_where_the_cuts_match():
    """Item 123: the deal of n64's 64-wide form wherever 128-wide k-tiles cut K at the same places
    (whole tiles, cluster pieces, runs of an even count), else its own rule. At K = 448 (7 narrow
    k-tiles, 4 wide) the own rule would split the 4 into two cluster pieces, measured 9 % slower
    than whole tiles (32 x 2048 x 448)."""
    from gemm_ladder.families import cost_model
    fam = smallm.FAMILIES["smallm:n64"]
    narrow = NARROW["smallm:n64"]
    assert fam.rule_deal(32, 2048, 448, H200_SMS).dsmem  # what the 128-wide rule alone would do
    d = fam.deal(32, 2048, 448, H200_SMS)
    assert (d.ctas, d.units, d.dsmem) == (32, 4, False)
    checked = 0
    for M, N, K in [(16, 4096, 4096), (256, 1024, 4096), (64, 2048, 8192), (1, 4096, 14336), (16, 6144, 4096),
                    (7, 264, 1000), (32, 2048, 448), (128, 512, 16384), (640, 640, 640), (1, 256, 4104)]:
        n, w = narrow.deal(M, N, K, H200_SMS), fam.deal(M, N, K, H200_SMS)
        if (n.units >= n.k_tiles) or n.dsmem or n.units % 2 == 0:
            assert (w.ctas, w.dsmem, w.planes) == (n.ctas, n.dsmem, n.planes), (M, N, K, n, w)
            checked += 1
        else:  # odd runs of 64-wide k-tiles: the 128-wide rule's own deal
            assert w == fam.rule_deal(M, N, K, H200_SMS)
    assert checked >= 8
    # the bytes a CTA loads count 64-wide boxes: a block wholly past K reads nothing
    assert cost_model.operand_bytes(fam, 32, 4096, 4104) == cost_model.operand_bytes(narrow, 32, 4096, 4104)


@pytest.mark.parametrize("key", list(TWINS))
@pytest.mark.parametrize("b_mn", [False, True])
def test_the_boxes_of_a_stage_fill_what_its_barrier_expects(key, b_mn):
    """Per stage each CTA receives bk / 64 blocks, each A's a_rows x 64 (share_a slices) and B's BN x
    64 (cluster_m slices, or BN / 64 N-major blocks): (a_rows + BN) x bk x 2 bytes, what the
    kernel's stage_bytes(a_rows) tells the full barrier to expect."""
    for fam in (NARROW[key], TWINS[key]):
        if b_mn and not fam.b_mn_major:
            continue
        for M in (1, 16, 100, 256):  # A's box: M rounded up to 8, or the tile's rows
            args = fam.kernel_args(1, 2, 0, 3, M, 4096, 4096, 16, bf16=False, make_map=lambda *x: x, b_mn=b_mn)
            a_map, b_map, a_rows = args[0], args[1], args[-1]
            blocks = fam.bk // smallm.K_BLOCK
            a_bytes = fam.share_a * a_map[4] * a_map[5] * 2
            box_bytes = b_map[4] * b_map[5] * 2
            b_bytes = (fam.bn // b_map[5] if b_mn else fam.cluster_m) * box_bytes
            assert a_map[5] == smallm.K_BLOCK and (b_map[4] if b_mn else b_map[5]) == smallm.K_BLOCK
            assert blocks * (a_bytes + b_bytes) == (a_rows + fam.bn) * fam.bk * 2, (fam.key, M, a_map, b_map)


def test_the_probes_report_takes_medians_over_passes():
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "benchmarks" / "probes" / "smallsq" / "k128_ab.py"
    spec = importlib.util.spec_from_file_location("k128_ab", path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    row = dict(shape=[512, 512, 512], dtype="float16", pick="smallm:n64s")
    record = {"rows": [dict(row, us={"pick": 7.0, "twin": 6.9, "cublas": 6.8}),
                       dict(row, us={"pick": 7.2, "twin": 6.9, "cublas": 6.8}),
                       dict(row, us={"pick": 7.1, "twin": 7.1, "cublas": 6.8}),
                       dict(shape=[256, 1024, 4096], dtype="float16", pick="smallm:n64",
                            us={"pick": 16.0, "twin": 17.6, "cublas": 13.2}),
                       dict(shape=[64, 4096, 4096], dtype="float16", pick="smallm:n64", pick_bk=128,
                            us={"pick": 20.0, "twin": 21.0, "cublas": 19.0})]}
    text = probe.report(record)  # rows without pick_bk: 64-wide picks (item 122's records)
    assert "512x512x512 floa smallm:n64s: pick 7.10 us, cuBLAS 6.80, twin k128 0.972" in text
    assert "small squares float16: twin k128 / pick geomean 0.972 over 1" in text
    assert "long K float16: twin k128 / pick geomean 1.100 over 1" in text
    assert "64x4096x4096 floa smallm:n64: pick 20.00 us, cuBLAS 19.00, twin k64 1.050" in text
    assert "other float16: twin k64 / pick geomean 1.050 over 1" in text
