"""The fp8 family without a GPU: every entry builds every call variant it claims clean (no
spills, no serialized wgmma), its SASS holds fp8 wgmma of its tile width, the unpromoted
mainloops keep a group in flight, and what an entry cannot build is refused in one line."""
import pytest

from gemm_ladder.families import fp8
from gemm_ladder.families.common import ConfigError
from gemm_ladder.families.protocol import KernelFamily
from gemm_ladder.measure import sass
from sass_util import sass_or_skip

ENTRIES = fp8.all_entries()
IDS = [e.key for e in ENTRIES]
VARIANTS = [(e, fp8.Variant(mode, out, bias=(out == "float32" and e.step != 11)))
            for e in ENTRIES for mode in e.modes for out in e.outs]
# row-wise scales with a 16-bit bias hold the most registers in the epilogue: every entry that
# takes them must build them clean (the ones that cannot say so, and choose() avoids them)
VARIANTS += [(e, v) for e in ENTRIES if e.step != 11 and "row" in e.modes
             for v in [fp8.Variant("row", "bfloat16", bias=True)] if not e.variant_problem(v)]




@pytest.mark.parametrize("e,v", VARIANTS, ids=[f"{e.key}-{v.mode}-{v.out}" for e, v in VARIANTS])
def test_every_variant_compiles_clean(e, v):
    k = e.compile(variant=v)  # strict: spills and C75xx warnings raise
    assert k.report.spill_bytes == 0 and k.report.stack_frame_bytes == 0
    assert not [w for w in k.report.warnings if "C75" in w or "warning" in w.lower()], k.report.warnings


@pytest.mark.parametrize("e", ENTRIES, ids=IDS)
def test_sass_holds_fp8_wgmma(e):
    ops = sass.opcodes(sass_or_skip(e.compile().cubin))
    missing = [c for c in e.claims if sass.count_class(ops, c) == 0]
    assert not missing, f"{e.key}: SASS lacks {missing}"
    assert sass.count_class(ops, "HGMMA") == 0, "fp8 operands never go through the 16-bit wgmma"


@pytest.mark.parametrize("e", [e for e in ENTRIES if e.fast_accum], ids=[e.key for e in ENTRIES if e.fast_accum])
def test_unpromoted_mainloop_keeps_a_group_in_flight(e):
    assert sass.mma_loop_full_waits(sass_or_skip(e.compile().cubin)) == 0


@pytest.mark.parametrize("e", [e for e in ENTRIES if e.planes], ids=[e.key for e in ENTRIES if e.planes])
def test_second_pass_issues_a_batch_before_its_first_add(e):
    """split-K's second pass has a whole batch of planes in flight before it first waits on one
    (gl_partials.cuh; as a plain loop ptxas kept two loads ahead)."""
    text = sass_or_skip(e.compile().cubin)
    loads = sass.loads_before_first_use(sass.function_text(text, "fp8_splitk_reduce"))
    assert loads >= fp8.REDUCE_BATCH >= 2, loads


def test_entries_implement_the_family_protocol():
    for e in ENTRIES:
        assert isinstance(e, KernelFamily)
        assert not e.smem_problem(), e.smem_problem()
        assert e.reads_mn() == (False, False)
        assert e.kernel_defines()["GL_DYNAMIC_SMEM"] == e.dynamic_smem


def test_refusals_name_the_reason():
    with pytest.raises(ConfigError, match="block"):
        fp8.get("fp8:128x256").compile(variant=fp8.Variant("block"))
    with pytest.raises(ConfigError, match="e5m2 x e5m2"):
        fp8.get("fp8:128x128p").compile(variant=fp8.Variant(a_e5m2=True, b_e5m2=True))
    with pytest.raises(ConfigError, match="no bias"):
        fp8.STEP11.compile(variant=fp8.Variant(bias=True))
    with pytest.raises(ConfigError, match="transpose"):
        fp8.STEP11.layout_defines(b_mn=True)
    assert fp8.STEP11.shape_problems(64, 100, 24) == [
        "K=24 must be a multiple of 16 (TMA needs 16-byte rows of fp8 A and B)",
        "N=100 must be a multiple of 8 (bfloat16 rows of C must be 16-byte multiples)"]


def test_split_k_fills_the_gpu_without_empty_splits():
    e = fp8.get("fp8:128x128sk")
    for M, N, K in [(128, 7168, 2048), (64, 4096, 7168), (1, 512, 16 * 128 + 16), (100, 520, 2064), (64, 1024, 4096)]:
        s = e.splits_for(M, N, K, 132)
        k_tiles, tiles = -(-K // 128), -(-M // 128) * -(-N // 128)
        assert 1 <= s <= 16 and tiles * s <= 132
        assert -(-k_tiles // s) * (s - 1) < k_tiles, "every split holds k-tiles"
    assert fp8.choose(64, 1024, 8192, "row", False).split  # 16 tiles of 64 x 64: under a quarter of a wave
    assert fp8.choose(128, 4096, 7168, "block", False).split  # 64 tiles of 64 x 128: under half a wave
    assert not fp8.choose(64, 4096, 7168, "row", False).split  # 64 tiles of 64 x 64
    assert not fp8.choose(64, 7168, 2048, "block", False).split  # 16 k-tiles: too short to split
    assert not fp8.choose(64, 1024, 256, "row", False).split  # two k-tiles: nothing to split
    assert not fp8.choose(4096, 4096, 4096, "row", False).split


def test_on_chip_split_k_takes_whole_clusters_that_fit():
    """The on-chip split: 1, 2, 4 or 8 splits (a tile's column slices, a portable cluster), every
    split holding k-tiles, and no more than let every tile's cluster be resident at once."""
    e = fp8.with_fields(fp8.get("fp8:128x128sk"), "chip", **fp8.SPLIT_VARIANTS["chip"])
    assert e.split and not e.planes and fp8.get("fp8:128x128sk").planes
    assert e.kernel_defines()["GL_FP8_SPLIT"] == 2 and fp8.get("fp8:128x128sk").kernel_defines()["GL_FP8_SPLIT"] == 1
    for M, N, K in [(128, 7168, 2048), (64, 4096, 7168), (1, 512, 16 * 128 + 16), (100, 520, 2064), (64, 1024, 4096),
                    (1, 64, 16)]:
        s = e.splits_for(M, N, K, 132)
        k_tiles, tiles = -(-K // 128), -(-M // 128) * -(-N // 128)
        assert s in (1, 2, 4, 8) and tiles * s <= 132
        assert -(-k_tiles // s) * (s - 1) < k_tiles, "every split holds k-tiles"
        assert e.launch_cluster(s) == (s, 1, 1) and e.grid(M, N, 132, None, s) == (tiles * s, 1, 1)
    assert e.splits_for(64, 4096, 7168, 132) == 4  # 32 tiles x 4 splits
    assert e.grid(1000, 3000, 132, None, 1) == (192, 1, 1), "one CTA per unit, beyond one wave too"
    # clusters of 4 that fit only 16 at once: 32 tiles take clusters of 2
    assert e.splits_for(64, 4096, 7168, 132, max_clusters=lambda s: 16 if s == 4 else 64) == 2
    assert e.kernel_args(1, 2, 3, 4, 5, 6, 64, 4096, 7168, "bfloat16", make_map=lambda *a, **k: None,
                         splits=4)[-2].value == 3, "C's pointer: the kernel writes C itself"
    ops = sass.opcodes(sass_or_skip(e.compile().cubin))  # C leaves through plain stores, no TMA store
    assert not [c for c in e.claims if sass.count_class(ops, c) == 0] and "UTMASTG" not in e.claims


def test_a_box_holds_the_rows_of_one_short_tile_row():
    """One tile row of fewer than 128 rows loads M rows rounded up to a swizzle atom (8), not
    128 rows of which TMA zero-fills the rest; the stage's bytes follow (the last argument)."""
    e = fp8.get("fp8:128x128sk")
    assert [e.a_box_rows(M) for M in (1, 64, 100, 128, 1000)] == [8, 64, 104, 128, 128]
    assert fp8.get("fp8:128x128p").a_box_rows(64) == 128  # a cluster's pair: whole boxes
    assert fp8.STEP11.a_box_rows(64) == 128
    assert e.map_specs(64, 4096, 7168, "bfloat16", 4)[0][3] == 64
    assert e.kernel_args(1, 2, 3, 4, 5, 6, 64, 4096, 7168, "bfloat16", make_map=lambda *a, **k: None,
                         splits=4)[-1] == 64


def test_choice_follows_mode_accumulation_and_the_waves():
    assert fp8.choose(4096, 4096, 4096, "block", True).promote == 1  # block scales always promote
    # promoted per-tensor: 128 x 128 with the promotion under the next k-tile's MMAs
    assert fp8.choose(4096, 4096, 4096, "tensor", False).key == "fp8:128x128p"
    assert fp8.choose(4096, 4096, 4096, "block", False).key == "fp8:128x256pb"  # 512 tiles of 128 x 256
    assert fp8.choose(1024, 4096, 4096, "tensor", False).key == "fp8:128x128p"  # 128 tiles: under a wave
    assert fp8.choose(2048, 7168, 2048, "tensor", False).key == "fp8:128x128p"  # 448 tiles: 85 % of 4 waves
    assert fp8.choose(4096, 4096, 4096, "row", False).key == "fp8:128x256p"
    assert fp8.choose(4096, 4096, 4096, "row", False, bias16=True).key == "fp8:128x128p"  # it spills there
    assert fp8.choose(4096, 4096, 4096, "tensor", True).key == "fp8:128x256"
    assert fp8.choose(512, 4096, 7168, "tensor", True).key == "fp8:128x128"
    # several tile rows, 128 x 128 tiles filling half of the SMs or less: tiles of half the area
    assert fp8.choose(1024, 1024, 1024, "tensor", False).key == "fp8:64x128pc1"
    assert fp8.choose(1024, 1024, 1024, "block", False).key == "fp8:64x128pc1"
    assert fp8.choose(1024, 1024, 1024, "row", False).key == "fp8:128x64pc1"
    assert fp8.choose(1024, 1024, 1024, "row", True).key == "fp8:128x64c1"
    assert fp8.choose(2048, 2048, 2048, "tensor", False).key == "fp8:128x128p"  # 256 tiles of 128 x 128
    # one wave of 128 x 256 tiles 80 % full: row-wise and block scales there, per tensor not
    assert fp8.choose(2048, 2048, 2048, "row", False).key == "fp8:128x256p"
    assert fp8.choose(512, 7168, 2048, "block", False).key == "fp8:128x256pb"
    assert fp8.choose(512, 7168, 2048, "tensor", False).key == "fp8:128x128p"
    assert fp8.choose(2048, 2048, 2048, "row", True).key == "fp8:128x128"
    # one tile row: no cluster; the widest tile that fills 80 % of the SMs, 64 x 64 at the least;
    # 128 rows only above 64 (a second consumer would compute rows below C)
    assert fp8.choose(128, 28672, 4096, "row", False).key == "fp8:128x128pc1"
    assert fp8.choose(64, 28672, 4096, "row", False).key == "fp8:64x128pc1"
    assert fp8.choose(128, 7168, 2048, "row", False).key == "fp8:64x128pc1"
    assert fp8.choose(64, 7168, 2048, "tensor", False).key == "fp8:64x64pc1"
    assert fp8.choose(64, 7168, 2048, "block", False).key == "fp8:64x128pc1"  # 64 wide takes no block scales
    assert fp8.choose(128, 4096, 7168, "tensor", False).key == "fp8:64x64pc1"  # 128 CTAs, no split
    assert fp8.choose(64, 4096, 7168, "block", False).key == "fp8:64x128sk"
    assert fp8.choose(64, 1024, 8192, "tensor", False).key == "fp8:64x64sk"
    assert fp8.choose(128, 28672, 4096, "tensor", True).key == "fp8:128x256c1"
    assert fp8.choose(128, 7168, 2048, "tensor", True).key == "fp8:128x64c1"
    assert fp8.choose(64, 4096, 7168, "tensor", True).key == "fp8:64x64c1"
    for M, N, K in [(1, 256, 512), (128, 7168, 2048), (4096, 4096, 4096), (300, 520, 2064)]:
        for mode in fp8.SCALE_MODES:
            for fast in (False, True):
                for bias16 in (False, True):
                    e = fp8.choose(M, N, K, mode, fast, bias16=bias16)
                    v = fp8.Variant(mode, "bfloat16", bias=bias16)
                    assert not e.variant_problem(v), (M, N, K, mode, fast, bias16, e.key)
                    assert e.fast_accum == (fast and mode != "block")


def test_wave_fill():
    assert fp8.wave_fill(264, 132) == 1.0 and fp8.wave_fill(133, 132) == 133 / 264 and fp8.wave_fill(0, 132) == 0.0


def test_fp8_record_draws_its_roofline(tmp_path):
    """The current fp8 record's rows all land on the figure (the CLI's `plot` of an fp8 record)."""
    import json
    from pathlib import Path
    from gemm_ladder.measure.plots_fp8 import fp8_intensity, fp8_roofline_figure, write_fp8_roofline
    record = Path(__file__).resolve().parents[1] / "benchmarks/results/2026-12-03_h200_fp8_e7b47f6.json"
    result = json.loads(record.read_text())
    fig, ax, info = fp8_roofline_figure(result)
    ours = [r for r in result["rows"] if r.get("ok") and r.get("entry") != "11"]
    assert info["points"] == len(ours) > 0
    assert abs(fp8_intensity(4096, 4096, 4096) - 2 * 4096 ** 3 / (3 * 4096 ** 2 + 4096 ** 2)) < 1e-9
    assert write_fp8_roofline(result, tmp_path / "r.png").stat().st_size > 10_000


def test_compile_report_takes_the_fp8_entries():
    """The CPU main job's compile report lists step 11 and the fp8 family, QGMMA counted."""
    from gemm_ladder.measure.report import compile_report
    rows = compile_report(ENTRIES)
    assert [r["step"] for r in rows] == IDS and all(r["ok"] for r in rows)
    if all("sass" in r for r in rows):
        assert all(r["sass"]["QGMMA"] > 0 and r["sass"]["HGMMA"] == 0 and not r["claims_missing"] for r in rows)
