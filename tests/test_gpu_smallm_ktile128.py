"""128-wide k-tiles in the small-M kernel (`smallm.k128_twin`, perf-notes items 122-123) on the GPU,
each entry's 128-wide form beside its 64-wide one (one of them the entry): the 128-wide debug
build first, in a child (a deadlock names role, barrier, stage and phase);
then every way the family deals (whole tiles, K not a multiple of 128, workspace planes, a
cluster sum, fixup, multicast pairs, shared loads, alternating k-tiles, an N-major B) against
fp32 on a poisoned output, the same bits run to run, and bit for bit the entry's output where
both run whole tiles in one warpgroup (the same MMAs in the same order). Skipped without
a Hopper GPU."""
import itertools

import pytest

from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gpu_util import assert_matches, fresh, needs_gpu, run_child
from ktile128_cases import CASES, IDS

pytestmark = [needs_gpu, pytest.mark.gpu]

DTYPES = ("float16", "bfloat16")
_seed = itertools.count(9100)

_CHILD = """
import torch
import gemm_ladder
from gemm_ladder.families import smallm
from gemm_ladder.measure.accuracy import check_product
twin = smallm.k128_twin(smallm.FAMILIES[{key!r}])
for (M, N, K) in {shapes!r}:
    g = torch.Generator(device="cuda").manual_seed(M)
    a = torch.randn((M, K), device="cuda", generator=g).half()
    b = torch.randn((N, K), device="cuda", generator=g).half()
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    from gemm_ladder.library import runner
    p = runner.plan_smallm(twin, a, b, out, debug=True)
    p()
    torch.cuda.synchronize()
    ok, mx, rel, msg = check_product(out, a, b)
    assert ok, (M, N, K, msg)
print("ok")
"""
CHILD_KEYS = sorted({c[0] for c in CASES})


@pytest.mark.parametrize("key", CHILD_KEYS)
def test_debug_build_in_a_child(key):
    shapes = [c[1:4] for c in CASES if c[0] == key and not c[4]]
    res = run_child(_CHILD.format(key=key, shapes=shapes))
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


def _run(fam, a, w, b_mn, out):
    import gemm_ladder
    if b_mn:
        return gemm_ladder.matmul(a, w, step=fam, out=out)
    p = runner.plan_smallm(fam, a, w, out)
    p()
    p.synchronize()
    return out


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("key,M,N,K,b_mn", CASES, ids=IDS)
def test_matches_reference_and_the_entry(key, M, N, K, b_mn, dtype):
    import torch
    dt = getattr(torch, dtype)
    fam = smallm.k64_twin(smallm.FAMILIES[key])
    twin = smallm.k128_twin(fam)
    a, b = fresh(M, N, K, dt, next(_seed))  # b: (N, K)
    w = b.t().contiguous() if b_mn else b
    outs = []
    for f in (twin, twin, fam):  # the twin twice (the same bits run to run), then the entry
        out = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
        outs.append(_run(f, a, w, b_mn, out).clone())
    torch.cuda.synchronize()
    assert_matches(outs[0], a, b)
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), "the twin's bits moved between runs"
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    deals = [f.deal(M, N, K, sms) for f in (twin, fam)]
    # whole tiles: the same MMAs in the same order, the same bits (alternating k-tiles split the
    # sum between two warpgroups by k-tile, so a wider k-tile sums other halves; and where K ends in
    # the first half of a 128-wide k-tile the twin also multiplies a block of zeros)
    same_mmas = 2 * twin.k_tiles(K) == fam.k_tiles(K) and not fam.k_alternate
    if same_mmas and not any(d.dsmem or d.split_tiles or d.split > 1 for d in deals):
        assert torch.equal(outs[0].view(torch.int16), outs[2].view(torch.int16)), "whole tiles differ from the entry's"


# Stream-K fixup (GL_FIXUP entries with fixup on, as tests/test_gpu_smallm.py builds them): runs of
# `units` 128-wide k-tiles on one wave, pieces crossing tiles, ragged edges
FIXUP_CASES = [(300, 264, 1000, 3), (1000, 1000, 1000, None), (130, 4096, 4096, 8)]


@pytest.mark.parametrize("case", FIXUP_CASES, ids=["x".join(map(str, c)) for c in FIXUP_CASES])
@pytest.mark.parametrize("base", smallm.FIXUP_ENTRIES)
def test_fixup(base, case):
    import torch
    fam = smallm.k128_twin(smallm.with_fields(smallm.FAMILIES[base], "fixup", fixup=True, max_m=1 << 30, min_m=1))
    M, N, K, units = case
    m_t, n_t = fam.tiles(M, N)
    wave = -(-m_t * n_t * fam.k_tiles(K) // 132)  # runs of at least one full wave of 132 CTAs
    a, b = fresh(M, N, K, torch.float16, next(_seed))
    runs = []
    for _ in range(3):
        out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
        p = runner.plan_smallm(fam, a, b, out, units=wave if units is None else max(units, wave))
        p()
        p.synchronize()
        runs.append(out.clone())
    assert_matches(runs[0], a, b)
    assert all(torch.equal(r.view(torch.int16), runs[0].view(torch.int16)) for r in runs[1:])


# twins on the deepest ring that fits (k128_ab.py's twin_deep), on their rule's deal
DEEP = [("n64+depth=7", 256, 1024, 4096), ("n64+depth=7", 16, 4096, 4096),
        ("n64+depth=7", 7, 264, 1000), ("n32+depth=9", 1, 4096, 4096)]  # (both 128-wide entries)


@pytest.mark.parametrize("spec,M,N,K", DEEP, ids=[f"{c[0]}-{c[1]}x{c[2]}x{c[3]}" for c in DEEP])
def test_deepest_ring(spec, M, N, K):
    import torch
    fam = smallm.parse_build(spec)
    assert not fam.smem_problem() and not fam.shape_problems(M, N, K)
    a, b = fresh(M, N, K, torch.bfloat16, next(_seed))
    runs = []
    for _ in range(3):
        out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
        runs.append(_run(fam, a, b, False, out).clone())
    assert_matches(runs[0], a, b)
    assert all(torch.equal(r.view(torch.int16), runs[0].view(torch.int16)) for r in runs[1:])
