"""The small-M family's narrow staged C on the GPU (smallm:n32t, docs/perf-notes.md item 114): a
32-wide tile's C staged as one unswizzled 64 x 32 chunk and stored by one TMA copy through a
64 x 32 box. Against an fp32 reference on fresh inputs with the output poisoned (NaN) first, on
rows and columns the box clips, twice with the same bits, and bit for bit what n32's register
stores write (the same MMAs, the same rounding). Skipped without a Hopper GPU."""
import itertools

import pytest

from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gpu_util import assert_repeatable, fresh, needs_gpu

pytestmark = [needs_gpu, pytest.mark.gpu]

NARROW, BASE = smallm.FAMILIES["smallm:n32t"], smallm.FAMILIES["smallm:n32"]
# M under a tile's 64 rows; N off the 32-wide tiles (the last tile's 8 columns stored); K with a
# partial last k-tile (1000)
SHAPES = [(M, N, K) for M in (1, 5, 16) for N in (72, 200, 1000) for K in (64, 256, 1000)]
# with the M limit lifted (the kernel takes any M): a second row block clipped at 100; 256^3 (the probe's)
LIFTED = [(100, 200, 256), (256, 256, 256)]
_seed = itertools.count(900)


def _entries(M):
    if M <= NARROW.max_m:
        return NARROW, BASE
    return tuple(smallm.with_fields(f, "anym", max_m=1 << 30) for f in (NARROW, BASE))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape", SHAPES + LIFTED, ids=["x".join(map(str, s)) for s in SHAPES + LIFTED])
def test_narrow_tile_staged_store(shape, dtype):
    import torch
    M, N, K = shape
    dt = getattr(torch, dtype)
    narrow, base = _entries(M)
    a, b = fresh(M, N, K, dt, next(_seed))
    out = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
    plan = runner.plan_smallm(narrow, a, b, out)
    d = plan.deal
    assert d.planes == 0 and d.ctas == d.tiles, "whole tiles: every one leaves through the staged store"
    assert_repeatable(plan, out, a, b, runs=2, what=f"{narrow.key} {shape} {dtype}")
    ref = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
    p = runner.plan_smallm(base, a, b, ref)
    p()
    p.synchronize()
    assert torch.equal(out.view(torch.int16), ref.view(torch.int16)), f"{shape}: n32t and n32 differ"
