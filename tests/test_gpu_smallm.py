"""The small-M split-K family on the GPU: every configuration against an fp32 reference on
fresh random inputs with the output poisoned (NaN) first, forced splits (ragged last split,
one k-tile per split, no split), and determinism (bit-identical outputs run to run). The
debug build runs first, in a child process: a pipeline that deadlocks there is reported
by role and barrier instead of hanging the session. Skipped without a Hopper GPU."""
import itertools

import pytest

from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gpu_util import assert_matches, assert_repeatable, fresh, needs_gpu, run_child

pytestmark = [needs_gpu, pytest.mark.gpu]

KEYS = list(smallm.FAMILIES)
MS = (1, 7, 16, 64, 100, 128)
KEY_MS = [(k, m) for k in KEYS for m in MS if smallm.FAMILIES[k].min_m <= m <= smallm.FAMILIES[k].max_m]
NKS = [(4096, 4096), (11008, 4096), (4096, 11008), (264, 72), (14336, 4096)]  # 14336: runs cross tiles
DTYPES = ("float16", "bfloat16")
_seed = itertools.count(500)


def _dtype(name):
    import torch
    return getattr(torch, name)


def _poisoned(M, N, dtype):
    import torch
    return torch.full((M, N), float("nan"), dtype=dtype, device="cuda")


_CHILD = """
import torch
from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.measure.accuracy import check_product
fam = smallm.FAMILIES[{key!r}]
for (M, N, K, splits) in [(16, 4096, 4096, None), (7, 264, 72, None), (100, 11008, 4096, 3), (1, 4096, 1000, 5),
                          (96, 4096, 4096, 4), (80, 1000, 4096, 2), (70, 4096, 4096, 3)]:
    if not fam.accepts(M, N, K):
        continue
    g = torch.Generator(device="cuda").manual_seed(M)
    a = torch.randn((M, K), device="cuda", generator=g).half()
    b = torch.randn((N, K), device="cuda", generator=g).half()
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    runner.run_smallm(a, b, out, None if fam.whole_tiles else splits, family={key!r}, debug=True)
    ok, mx, rel, msg = check_product(out, a, b)
    assert ok, (M, N, K, splits, msg)
print("ok")
"""


@pytest.mark.parametrize("key", KEYS)
def test_debug_build_in_a_child(key):
    """Bounded mbarrier waits: a deadlock raises PipelineDeadlock naming role, barrier, stage
    and phase (and kills only the child's CUDA context)."""
    res = run_child(_CHILD.format(key=key))
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


# every entry at every M it takes, on the N x K it accepts (smallm:n32: one wave, short K only)
MATCH_CASES = [(k, m, n, kk) for k, m in KEY_MS for n, kk in NKS if smallm.FAMILIES[k].accepts(m, n, kk)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key,M,N,K", MATCH_CASES, ids=[f"{k}-{m}-{n}x{kk}" for k, m, n, kk in MATCH_CASES])
def test_matches_reference(key, M, N, K, dtype):
    dt = _dtype(dtype)
    a, b = fresh(M, N, K, dt, next(_seed))
    out = _poisoned(M, N, dt)
    p = runner.plan_smallm(smallm.FAMILIES[key], a, b, out)
    p()
    p.synchronize()
    assert_matches(out, a, b)


FORCED = [(16, 4096, 4096, 1),     # no split: the kernel writes C itself
          (16, 4096, 4096, 3),     # 22 + 22 + 20 k-tiles, through the workspace
          (1, 4096, 4096, 64),     # one k-tile per piece
          (7, 264, 1000, 5),       # K = 1000: the last k-tile is partial; 5 asked, 4 pieces of 4: a cluster of 4
          (100, 4096, 11008, 7),   # two m-tiles (one with two consumers), rows 100..127 masked
          (128, 264, 72, 2),       # N smaller than one 256-wide tile
          (16, 14336, 4096, 5),    # runs of 13 k-tiles cross tile boundaries
          (16, 4096, 4096, 8),     # clusters of 8 sum the pieces through DSMEM
          (80, 1000, 4096, 2),     # clusters of 2; N = 1000 clips the last tile
          (96, 4096, 4096, 4)]     # clusters of 4, two consumers' rows
# (multicast pairs and alternating k-tiles run whole tiles only: their forced split is the one of 1)
FORCED_CASES = [(k, c) for k in KEYS for c in FORCED
                if smallm.FAMILIES[k].accepts(*c[:3]) and (not smallm.FAMILIES[k].whole_tiles or c[3] == 1)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key,case", FORCED_CASES, ids=[f"{k}-{'x'.join(map(str, c))}" for k, c in FORCED_CASES])
def test_forced_splits(key, case, dtype):
    M, N, K, splits = case
    dt = _dtype(dtype)
    a, b = fresh(M, N, K, dt, next(_seed))
    out = _poisoned(M, N, dt)
    runner.run_smallm(a, b, out, splits, family=key, sync=True)
    assert_matches(out, a, b)


# (M, N, K, splits, summed in a cluster where the family does)
DET = [(16, 4096, 4096, 8, True), (100, 11008, 4096, 3, False), (1, 4096, 11008, 4, True),
       (1, 14336, 4096, 5, False), (80, 4096, 4096, 2, True), (96, 4096, 4096, 5, False)]
DET_CASES = [(k, c) for k in KEYS for c in DET
             if smallm.FAMILIES[k].accepts(*c[:3]) and not smallm.FAMILIES[k].whole_tiles]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key,case", DET_CASES, ids=[f"{k}-{'x'.join(map(str, c[:4]))}" for k, c in DET_CASES])
def test_bit_identical_over_20_runs(key, case, dtype):
    """The same inputs give the same bits: fixed summation order (planes in order, or the
    cluster's ranks in order), no atomics. Every run gets a fresh poisoned output and a
    fresh workspace."""
    import torch
    M, N, K, splits, dsmem = case
    dt = _dtype(dtype)
    a, b = fresh(M, N, K, dt, next(_seed))
    fam = smallm.FAMILIES[key]
    deal = fam.fixed_deal(M, N, K, splits)
    # the families that sum on chip do where their k-tiles split evenly (11008 is 86 128-wide
    # k-tiles: not in 4); the others, and uneven splits, through the workspace
    dsmem = dsmem and fam.cluster_reduce and fam.k_tiles(K) % splits == 0
    assert deal.dsmem == dsmem and (deal.cluster[0] > 1 if dsmem else deal.planes > 1)
    runs = []
    for _ in range(20):
        out = _poisoned(M, N, dt)
        runner.run_smallm(a, b, out, splits, family=key)
        runs.append(out.view(torch.int16))
    torch.cuda.synchronize()
    assert_matches(runs[0].view(dt), a, b)
    differing = [i for i, r in enumerate(runs) if not torch.equal(r, runs[0])]
    assert not differing, f"{fam.key}: runs {differing} differ from run 0"


def test_programmatic_launch_gives_the_same_bits():
    """The reduction launched with and without programmatic dependent launch: same order,
    same bits (and with it, it really waits for the partials)."""
    import torch
    a, b = fresh(64, 4096, 4096, torch.float16, next(_seed))
    fam = smallm.FAMILIES["smallm"]
    outs = []
    for pdl in (True, False, True):
        out = _poisoned(64, 4096, torch.float16)
        p = runner.plan_smallm(fam, a, b, out, pdl=pdl)
        p()
        p.synchronize()
        outs.append(out.view(torch.int16))
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[0], outs[2])
    assert_matches(outs[0].view(torch.float16), a, b)


def test_through_the_library_entry():
    """matmul_nt(step="smallm") goes through runner.plan to the family's own plan."""
    import torch
    from gemm_ladder.library.api import matmul_nt
    a, b = fresh(16, 4096, 4096, torch.bfloat16, next(_seed))
    out = _poisoned(16, 4096, torch.bfloat16)
    matmul_nt(a, b, out, step="smallm")
    torch.cuda.synchronize()
    assert_matches(out, a, b)


def test_plan_reuse_and_workspace():
    import torch
    a, b = fresh(16, 4096, 4096, torch.float16, next(_seed))
    p = runner.plan_smallm(smallm.FAMILIES["smallm"], a, b)
    assert p.workspace.shape == (p.deal.planes, 16, 4096) and p.workspace.dtype == torch.float32
    first = p().clone()
    p.out.fill_(float("nan"))
    p()
    p.synchronize()
    assert torch.equal(first.view(torch.int16), p.out.view(torch.int16))
    assert_matches(p.out, a, b)


# Above 128 rows the family takes problems under one wave of the ladder's 128 x 128 tiles
# (rows of whole 32-byte sectors): several row blocks, masked last rows, partial last tiles.
def _entry_cases(shapes, b_mn: bool = False):
    """(entry key, shape) for every entry that accepts the shape (b_mn: and reads an N-major B),
    and the pairs' test ids."""
    fams = smallm.FAMILIES
    cases = [(k, c) for k in KEYS for c in shapes if fams[k].accepts(*c) and (fams[k].b_mn_major or not b_mn)]
    return cases, [f"{k}-{'x'.join(map(str, c))}" for k, c in cases]


LARGE_M_CASES, LARGE_M_IDS = _entry_cases(
    [(129, 4096, 4096), (192, 4096, 11008), (300, 1000, 2048), (520, 264, 512), (1024, 1024, 1024)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key,case", LARGE_M_CASES, ids=LARGE_M_IDS)
def test_above_128_rows(key, case, dtype):
    """The model's deal for the shape, 20 launches on a poisoned output: correct, same bits."""
    M, N, K = case
    dt = _dtype(dtype)
    a, b = fresh(M, N, K, dt, next(_seed))
    out = _poisoned(M, N, dt)
    assert_repeatable(runner.plan_smallm(smallm.FAMILIES[key], a, b, out), out, a, b, what=f"{key} {case}")


@pytest.mark.parametrize("shape", [(256, 4096, 4096), (1024, 1024, 1024), (192, 4096, 11008)])
def test_library_picks_the_family_above_128_rows(shape):
    """matmul on a problem under one ladder wave runs the family (the selection's pick) and
    matches fp32, with b (N, K) and with b row-major (K, N), both read in place."""
    import torch
    import gemm_ladder
    from gemm_ladder.library import select
    M, N, K = shape
    assert select.pick(M, N, K).startswith("smallm")
    a, b = fresh(M, N, K, torch.float16, next(_seed))
    for res in (gemm_ladder.matmul_nt(a, b), gemm_ladder.matmul(a, b.t().contiguous())):
        torch.cuda.synchronize()
        assert_matches(res, a, b)


# An N-major B (a row-major (K, N) matrix, x @ W): the GL_B_MN build reads it in place, through
# the library (forced to each entry), whole tiles and split ones, ragged N and K edges.
B_MN_CASES, B_MN_IDS = _entry_cases(
    [(16, 4096, 4096), (7, 264, 72), (100, 11008, 4096), (1, 4096, 1000), (200, 1024, 2048)], b_mn=True)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key,case", B_MN_CASES, ids=B_MN_IDS)
def test_n_major_b_in_place(key, case, dtype):
    import torch
    import gemm_ladder
    from gemm_ladder.library import fastpath
    M, N, K = case
    dt = _dtype(dtype)
    a, b = fresh(M, N, K, dt, next(_seed))
    b_kn = b.t().contiguous()  # (K, N) row-major
    out = _poisoned(M, N, dt)
    gemm_ladder.matmul(a, b_kn, out=out, step=key)
    torch.cuda.synchronize()
    cfg = fastpath.config_for("mm", a, b_kn, out, step=key)
    assert cfg.b.direct and cfg.defines == {"GL_B_MN": 1}, (cfg.b.why, cfg.defines)
    assert_matches(out, a, b)


@pytest.mark.parametrize("case", [(16, 4096, 4096, 3), (100, 4096, 11008, 4), (1, 14336, 4096, 5)])
def test_n_major_b_split_is_bit_identical_over_20_runs(case):
    """Split tiles with an N-major B: the planes summed in order, the same bits every run,
    the same bits as the K-major build (same products, same order)."""
    import torch
    M, N, K, splits = case
    a, b = fresh(M, N, K, torch.float16, next(_seed))
    b_kn = b.t().contiguous()
    fam = smallm.FAMILIES["smallm:n128"]
    runs = []
    for _ in range(20):
        out = _poisoned(M, N, torch.float16)
        units = fam.fixed_deal(M, N, K, splits).units
        _run_b_mn(fam, a, b_kn, out, units)
        runs.append(out.view(torch.int16))
    torch.cuda.synchronize()
    assert_matches(runs[0].view(torch.float16), a, b)
    assert all(torch.equal(r, runs[0]) for r in runs), "runs differ"
    k_major = _poisoned(M, N, torch.float16)
    runner.run_smallm(a, b, k_major, splits, family="smallm:n128", sync=True)
    assert torch.equal(k_major.view(torch.int16), runs[0])


def _run_b_mn(fam, a, b_kn, out, units):
    """One launch of the GL_B_MN build with runs of `units` k-tiles (the deal fixed), then the
    reduction when tiles are split."""
    import torch
    from gemm_ladder.cuda import driver
    from gemm_ladder.library import runner
    M, K = a.shape
    N = b_kn.shape[1]
    deal = fam.make_deal(M, N, K, units)
    prep = runner.prepare(fam, 0, bf16=False, extra_defines=fam.layout_defines(b_mn=True))
    ws = torch.empty((max(1, deal.planes), M, N), dtype=torch.float32, device="cuda")
    stream = torch.cuda.current_stream().cuda_stream
    args = fam.kernel_args(a.data_ptr(), b_kn.data_ptr(), ws.data_ptr(), out.data_ptr(), M, N, K, deal.units,
                           bf16=False, b_mn=True)
    driver.PreparedLaunch(prep.kernel, deal.grid, (fam.threads, 1, 1), args, stream=stream,
                          dynamic_smem=fam.dynamic_smem)()
    if deal.planes:
        red = runner.reduce_kernel(prep.kernel, fam.reduce_entry)
        driver.PreparedLaunch(red, fam.reduce_grid(M, N), (smallm.REDUCE_THREADS, 1, 1),
                              fam.reduce_args(ws.data_ptr(), out.data_ptr(), M, N, K, deal.units), stream=stream)()
    torch.cuda.synchronize()


# Stream-K fixup (GL_FIXUP): split tiles summed in the kernel from per-CTA slots. Built from
# the entries with fixup on and no M limit; runs of `units` k-tiles, one wave of CTAs.
FIXUP_BASES = smallm.FIXUP_ENTRIES
# (M, N, K, units): crossing pieces and ragged edges (M, N, K off the tile), runs shorter than
# a tile (a tile in many pieces), runs of several tiles, aligned splits
FIXUP_CASES = [(300, 264, 1000, 5), (300, 264, 1000, 21), (1000, 1000, 1000, None), (512, 4096, 4096, None),
               (16, 4096, 4096, 12), (130, 4096, 4096, 16), (2048, 1024, 512, None)]


def _fixup_family(base):
    return smallm.with_fields(smallm.FAMILIES[base], "fixup", fixup=True, max_m=1 << 30, min_m=1)


def _fixup_units(fam, M, N, K, units):
    """`units`, but at least the runs of one full wave of 132 CTAs (None: exactly those)."""
    m_t, n_t = fam.tiles(M, N)
    wave = -(-m_t * n_t * fam.k_tiles(K) // 132)
    return wave if units is None else max(units, wave)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", FIXUP_CASES, ids=["x".join(map(str, c)) for c in FIXUP_CASES])
@pytest.mark.parametrize("base", FIXUP_BASES)
def test_fixup_matches_reference_and_is_deterministic(base, case, dtype):
    """Every split tile's pieces summed by its owner in CTA order: correct against fp32 on
    poisoned outputs, the same bits over 20 runs of one plan (the flags lower themselves)."""
    import torch
    M, N, K, units = case
    dt = _dtype(dtype)
    fam = _fixup_family(base)
    a, b = fresh(M, N, K, dt, next(_seed))
    out = _poisoned(M, N, dt)
    p = runner.plan_smallm(fam, a, b, out, units=_fixup_units(fam, M, N, K, units))
    assert p.deal.fixup and p.deal.ctas <= 132 and len(p.launcher.launches) == 1  # no second pass
    assert_repeatable(p, out, a, b, what=f"{fam.key} {case}")
    if p.deal.split_tiles:  # every flag lowered again by its owner
        flags = p.workspace[:smallm.fixup_flag_floats(p.deal.ctas, fam.consumers)].view(torch.int32)
        assert int(flags.abs().sum()) == 0


_FIXUP_CHILD = """
import torch
from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.measure.accuracy import check_product
fam = smallm.with_fields(smallm.FAMILIES["smallm:c2"], "fixup", fixup=True, max_m=1 << 30, min_m=1)
for (M, N, K, units) in [(300, 264, 1000, 5), (512, 4096, 4096, 125)]:
    g = torch.Generator(device="cuda").manual_seed(M)
    a = torch.randn((M, K), device="cuda", generator=g).half()
    b = torch.randn((N, K), device="cuda", generator=g).half()
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    p = runner.plan_smallm(fam, a, b, out, units=units, debug=True)
    p()
    p.synchronize()
    ok, mx, rel, msg = check_product(out, a, b)
    assert ok, (M, N, K, units, msg)
print("ok")
"""


def test_fixup_debug_build_in_a_child():
    """The fixup's flag waits are bounded in the debug build like the mbarrier waits."""
    res = run_child(_FIXUP_CHILD)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


# Multicast pairs (clusters of two CTAs along M sharing each B tile): an odd number of row
# blocks (the pair's second tile below C), rows that are not whole 32-byte sectors, more groups
# than clusters (several rounds per cluster), a partial last k-tile; 20 launches each on a
# poisoned output, compared with fp32 and bit for bit with the first. The entries' M limit is
# lifted here (the kernel takes any M); an N-major B goes through the library, forced to the
# entry, on the shapes the entry takes.
MC_KEYS = [k for k in KEYS if smallm.FAMILIES[k].multicast > 1]
MC_SHAPES = [(1000, 1000, 1000), (1000, 1000, 1008), (136, 520, 72), (128, 4096, 4096), (960, 8192, 1024),
             (1, 4096, 4096), (200, 1024, 2048)]
MC_CASES = [(k, c) for k in MC_KEYS for c in MC_SHAPES]
MC_B_MN_CASES = [(k, c) for k in MC_KEYS for c in MC_SHAPES
                 if smallm.FAMILIES[k].b_mn_major and smallm.FAMILIES[k].accepts(*c, b_mn=True)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key,case", MC_CASES, ids=[f"{k}-{'x'.join(map(str, c))}" for k, c in MC_CASES])
def test_multicast_pairs(key, case, dtype):
    M, N, K = case
    dt = _dtype(dtype)
    fam = smallm.with_fields(smallm.FAMILIES[key], "anym", max_m=1 << 30, min_m=1)
    d = fam.deal(M, N, K, 132)
    assert d.cluster == (2, 1, 1) and d.ctas % 2 == 0 and d.planes == 0
    a, b = fresh(M, N, K, dt, next(_seed))
    out = _poisoned(M, N, dt)
    assert_repeatable(runner.plan_smallm(fam, a, b, out), out, a, b, what=f"{key} {case}")


def _n_major_b_matches(key, case, dtype):
    """An N-major B (a row-major (K, N) b) through the library, forced to the entry."""
    import torch
    import gemm_ladder
    M, N, K = case
    a, b = fresh(M, N, K, _dtype(dtype), next(_seed))
    out = _poisoned(M, N, _dtype(dtype))
    gemm_ladder.matmul(a, b.t().contiguous(), out=out, step=key)
    torch.cuda.synchronize()
    assert_matches(out, a, b)


@pytest.mark.parametrize("key,case", MC_B_MN_CASES, ids=[f"{k}-{'x'.join(map(str, c))}" for k, c in MC_B_MN_CASES])
def test_multicast_pairs_n_major_b(key, case):
    _n_major_b_matches(key, case, "float16")


_MC_CHILD = """
import torch
from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.measure.accuracy import check_product
fam = smallm.with_fields(smallm.FAMILIES[{key!r}], "anym", max_m=1 << 30)
for (M, N, K) in [(1000, 1000, 1000), (136, 520, 72), (960, 8192, 1024)]:
    g = torch.Generator(device="cuda").manual_seed(M)
    a = torch.randn((M, K), device="cuda", generator=g).half()
    b = torch.randn((N, K), device="cuda", generator=g).half()
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    runner.run_smallm(a, b, out, family=fam, debug=True)
    ok, mx, rel, msg = check_product(out, a, b)
    assert ok, (M, N, K, msg)
print("ok")
"""


@pytest.mark.parametrize("key", MC_KEYS)
def test_multicast_debug_build_in_a_child(key):
    """The multicast entries' debug builds (bounded waits) at the pairs' edge cases."""
    res = run_child(_MC_CHILD.format(key=key))
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


# Alternating k-tiles (smallm:n64alt): one k-tile (the second warpgroup has none), odd and partial
# k-tile counts, M under a tile and above 128, N off the tile, more tiles than SMs (the entry's M
# and K limits lifted: they are the selection's, not the kernel's); 20 launches
# each on a poisoned output, compared with fp32 and bit for bit with the first. An N-major B
# through the library, forced to the entry.
ALT_KEYS = [k for k in KEYS if smallm.FAMILIES[k].k_alternate]
ALT_SHAPES = [(16, 4096, 64), (7, 264, 72), (64, 4096, 4160), (100, 1000, 1000), (128, 16384, 512),
              (256, 2048, 4096), (1, 8192, 8192)]
ALT_CASES = [(k, c) for k in ALT_KEYS for c in ALT_SHAPES]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key,case", ALT_CASES, ids=[f"{k}-{'x'.join(map(str, c))}" for k, c in ALT_CASES])
def test_alternating_k_tiles(key, case, dtype):
    M, N, K = case
    dt = _dtype(dtype)
    fam = smallm.with_fields(smallm.FAMILIES[key], "anym", max_m=1 << 30, min_m=1, min_kt=0)  # the kernel takes any
    d = fam.deal(M, N, K, 132)
    assert d.units == d.k_tiles and d.ctas == d.tiles and d.planes == 0 and d.cluster == (1, 1, 1)
    a, b = fresh(M, N, K, dt, next(_seed))
    out = _poisoned(M, N, dt)
    assert_repeatable(runner.plan_smallm(fam, a, b, out), out, a, b, what=f"{key} {case}")


@pytest.mark.parametrize("key,case", [(k, c) for k, c in ALT_CASES if smallm.FAMILIES[k].accepts(*c, b_mn=True)],
                         ids=[f"{k}-{'x'.join(map(str, c))}" for k, c in ALT_CASES
                              if smallm.FAMILIES[k].accepts(*c, b_mn=True)])
def test_alternating_k_tiles_n_major_b(key, case):
    _n_major_b_matches(key, case, "bfloat16")


# (M, N, K, splits): 2 to 20 planes, the second pass's whole batches, partial ones, a third batch
BATCHED = [(16, 4096, 4096, 2), (7, 264, 1000, 5), (16, 4096, 4096, 5), (100, 4096, 11008, 8),
           (16, 1000, 16384, 9), (128, 512, 16384, 14), (1, 264, 8192, 16), (16, 512, 16384, 20)]
BATCHED_CASES = [(k, c) for k in ("smallm", "smallm:n128", "smallm:c2n64", "smallm:n64a4") for c in BATCHED
                 if smallm.FAMILIES[k].accepts(*c[:3]) and smallm.FAMILIES[k].fixed_deal(*c).planes > 1]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key,case", BATCHED_CASES, ids=[f"{k}-{'x'.join(map(str, c))}" for k, c in BATCHED_CASES])
def test_second_pass_sums_whole_and_partial_batches(key, case, dtype):
    """The second pass reads its planes in batches of REDUCE_BATCH (perf-notes item 113): 2 to 20
    planes, so whole batches, a partial last one and a lone one, shared-load deals included;
    on poisoned outputs, against fp32, the same bits run to run."""
    import torch
    M, N, K, splits = case
    dt = _dtype(dtype)
    a, b = fresh(M, N, K, dt, next(_seed))
    fam = smallm.FAMILIES[key]
    outs = []
    for _ in range(2):
        out = _poisoned(M, N, dt)
        p = runner.plan_smallm(fam, a, b, out, splits=splits)
        p()
        p.synchronize()
        outs.append(out.view(torch.int16))
    assert_matches(outs[0].view(dt), a, b)
    assert torch.equal(outs[0], outs[1])
