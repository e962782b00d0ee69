"""The small-M family's shared-load entries on the GPU (GL_SHARE_A, GL_SHARE_B: clusters of CTAs
along N and M multicast slices of A and B to each other) at the long-K narrow shapes and small
squares they are for, whole tiles and forced splits (even and uneven pieces): against an fp32
reference on poisoned outputs, and bit-identical over 10 runs. The debug build runs first, in a child process (a ring that deadlocks is reported
by role, barrier, stage and phase). tests/test_gpu_smallm.py runs them on its general cases too.
Skipped without a Hopper GPU."""
import itertools

import pytest

from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gpu_util import assert_matches, fresh, needs_gpu, run_child

pytestmark = [needs_gpu, pytest.mark.gpu]

KEYS = [k for k, f in smallm.FAMILIES.items() if f.shared_loads > 1]
# (200 x 1024: A's last slices wholly past M; 128 x 968: the last tile's second B slice, columns
# 992.., wholly past N; TMA counts a box it zero-fills in full, so the stage's bytes still arrive)
SHAPES = [(128, 512, 16384), (256, 512, 8192), (128, 1024, 8192), (200, 1024, 4096), (128, 968, 4096),
          (128, 256, 64), (512, 512, 512), (640, 640, 640)]
# every tile in p pieces: whole tiles, pieces that divide the k-tiles, uneven ones (6 of 256, 13 of 128)
CASES = [(k, s, p) for k in KEYS for s in SHAPES for p in (1, 2, 6, 8, 13)
         if smallm.FAMILIES[k].accepts(*s) and p <= smallm.FAMILIES[k].k_tiles(s[2])]
_seed = itertools.count(900)

_CHILD = """
import torch
from gemm_ladder.families import smallm
from gemm_ladder.library import runner
from gemm_ladder.measure.accuracy import check_product
for key in {keys!r}:
    for (M, N, K, splits) in [(128, 512, 4096, 6), (256, 512, 2048, 2), (256, 1024, 1024, 1), (128, 256, 64, 1)]:
        if not smallm.FAMILIES[key].accepts(M, N, K):
            continue
        g = torch.Generator(device="cuda").manual_seed(M)
        a = torch.randn((M, K), device="cuda", generator=g).half()
        b = torch.randn((N, K), device="cuda", generator=g).half()
        out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
        runner.run_smallm(a, b, out, splits, family=key, debug=True)
        ok, mx, rel, msg = check_product(out, a, b)
        assert ok, (key, M, N, K, splits, msg)
print("ok")
"""


def test_debug_build_in_a_child():
    res = run_child(_CHILD.format(keys=KEYS))
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
@pytest.mark.parametrize("key,shape,splits", CASES, ids=[f"{k}-{'x'.join(map(str, s))}-s{p}" for k, s, p in CASES])
def test_matches_reference_and_repeats_bit_for_bit(key, shape, splits, dtype):
    import torch
    M, N, K = shape
    dt = getattr(torch, dtype)
    a, b = fresh(M, N, K, dt, next(_seed))
    fam = smallm.FAMILIES[key]
    deal = fam.fixed_deal(M, N, K, splits)
    assert deal.cluster == (fam.shared_loads, 1, 1) and deal.split == splits and deal.planes == (splits if splits > 1 else 0)
    runs = []
    for _ in range(10):
        out = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
        runner.run_smallm(a, b, out, splits, family=key)
        runs.append(out.view(torch.int16))
    torch.cuda.synchronize()
    assert_matches(runs[0].view(dt), a, b)
    assert all(torch.equal(r, runs[0]) for r in runs[1:]), f"{key} {shape} s{splits}: runs differ"


# An N-major B (a row-major (K, N) b) in the builds that read one (GL_B_MN with GL_SHARE_A):
# through the library, forced to the entry, 10 runs on poisoned outputs.
B_MN_SHAPES = [(128, 512, 16384), (128, 1024, 8192), (200, 1024, 4096), (640, 640, 640)]
B_MN_CASES = [(k, s) for k in KEYS for s in B_MN_SHAPES
              if smallm.FAMILIES[k].b_mn_major and smallm.FAMILIES[k].accepts(*s, b_mn=True)]


@pytest.mark.parametrize("key,shape", B_MN_CASES, ids=[f"{k}-{'x'.join(map(str, s))}" for k, s in B_MN_CASES])
def test_n_major_b_matches_and_repeats(key, shape):
    import torch
    import gemm_ladder
    M, N, K = shape
    a, b = fresh(M, N, K, torch.float16, next(_seed))
    b_kn = b.t().contiguous()
    runs = []
    for _ in range(10):
        out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
        gemm_ladder.matmul(a, b_kn, out=out, step=key)
        runs.append(out.view(torch.int16))
    torch.cuda.synchronize()
    assert_matches(runs[0].view(torch.float16), a, b)
    assert all(torch.equal(r, runs[0]) for r in runs[1:]), f"{key} {shape}: runs differ"
