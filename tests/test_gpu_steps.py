"""Every ladder step against an fp32 reference on the GPU: outputs poisoned with NaN first,
fresh random inputs for every case. Skipped without a Hopper GPU."""
import itertools

import pytest

from gemm_ladder.families import gemm, ladder
from gemm_ladder.library.runner import run_step
from gemm_ladder.library.select import best_step
from gpu_util import assert_matches, fresh, needs_gpu
from gemm_ladder.families import common, keys

pytestmark = [needs_gpu, pytest.mark.gpu]

SQUARES = [(n, n, n) for n in (1024, 2048, 4096, 8192)]
TILE_SHAPES = [(128, 128, 64), (256, 384, 192), (384, 128, 1024), (1024, 256, 4096)]
ODD_SHAPES = [(1, 8, 8), (100, 200, 72), (333, 136, 520), (4097, 264, 1000), (129, 1032, 64), (2000, 3000, 4000)]
NAIVE_SHAPES = [(1, 1, 1), (17, 33, 5), (333, 257, 129), (1024, 1024, 1024)]

_seed = itertools.count(100)


def _cases(st):
    if not st.has_tile:
        shapes = NAIVE_SHAPES + [(4096, 4096, 4096)]
    elif st.tile_multiple:
        shapes = SQUARES + TILE_SHAPES
    else:
        shapes = SQUARES + TILE_SHAPES + ODD_SHAPES
    return [(st.key, s) for s in shapes if st.accepts(*s)]


KERNELS = ladder.all_steps() + gemm.all_entries()  # the ladder and the library's production kernels
CASES = [c for st in KERNELS for c in _cases(st)]


@pytest.mark.parametrize("key,shape", CASES, ids=[f"step{k}-{'x'.join(map(str, s))}" for k, s in CASES])
def test_step_fp16(key, shape):
    import torch
    st = keys.get_step(key)
    M, N, K = shape
    a, b = fresh(M, N, K, torch.float16, next(_seed))
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    run_step(st, a, b, out, sync=True)
    assert_matches(out, a, b)


# every tensor-core step, and the library's default configuration
BF16_KEYS = [st.key for st in ladder.all_steps(include_variants=False) if st.has_tile] + [best_step().key]


@pytest.mark.parametrize("key", BF16_KEYS)
def test_step_bf16(key):
    import torch
    st = keys.get_step(key)
    for (M, N, K) in [(1024, 1024, 1024), (256, 384, 192)] + ([] if st.tile_multiple else [(333, 136, 520)]):
        a, b = fresh(M, N, K, torch.bfloat16, next(_seed))
        out = torch.full((M, N), float("nan"), dtype=torch.bfloat16, device="cuda")
        run_step(st, a, b, out, sync=True)
        assert_matches(out, a, b)


@pytest.mark.parametrize("key", [st.key for st in ladder.all_steps(include_variants=False) + gemm.all_entries()
                                 if st.uses_tma])
def test_repeatable(key):
    """The same inputs give bit-identical outputs run after run (a moving error is a race)."""
    import torch
    st = keys.get_step(key)
    a, b = fresh(2048, 2048, 2048, torch.float16, next(_seed))
    outs = []
    for _ in range(3):
        o = torch.full((2048, 2048), float("nan"), dtype=torch.float16, device="cuda")
        run_step(st, a, b, o, sync=True)
        outs.append(o)
    assert torch.equal(outs[0], outs[1]) and torch.equal(outs[1], outs[2])


def test_step_rejects_bad_shape_on_gpu():
    import torch
    st = keys.get_step("2")
    a, b = fresh(100, 128, 64, torch.float16, 1)
    with pytest.raises(common.ShapeError, match="multiple of 128"):
        run_step(st, a, b)


@pytest.mark.parametrize("cluster", [(2, 1, 1), (1, 2, 1)])
def test_cluster_launch_attribute(cluster):
    """cuLaunchKernelEx with the cluster-dimension attribute: step 4 uses no cluster
    features, so launched as 2-CTA clusters it must still be correct."""
    import dataclasses
    import torch
    from gemm_ladder.library.runner import plan
    a, b = fresh(1024, 1024, 512, torch.float16, next(_seed))
    out = torch.full((1024, 1024), float("nan"), dtype=torch.float16, device="cuda")
    p = plan(dataclasses.replace(keys.get_step("4"), cluster=cluster), a, b, out)
    p()
    p.synchronize()
    assert_matches(out, a, b)


@pytest.mark.parametrize("key", ["gemm:128x256c2", "gemm:128x256", "gemm:128x232", "gemm:128x144", "gemm:128x104"])
def test_borrowed_stage_repeatable(key):
    """Step 9's epilogue stages its first chunks in the operand stage the tile's last k-tile
    drained (perf-notes item 62). Many tiles per CTA and short K make many tile boundaries:
    30 runs on poisoned outputs, each right and all bit-identical. (The B part written before
    the partner consumer's MMAs were done gave wrong tiles at 6144^3 in a probe.)"""
    import torch
    from gemm_ladder.library.runner import plan
    from gpu_util import assert_repeatable
    st = keys.get_step(key)
    assert st.borrow_stage
    M, N, K = 6144, 6144, 1024
    a, b = fresh(M, N, K, torch.float16, next(_seed))
    out = torch.empty((M, N), dtype=torch.float16, device="cuda")
    assert_repeatable(plan(st, a, b, out), out, a, b, runs=30, what=f"step {key} {M}x{N}x{K}")


NARROW = [(key, shape) for key, n in (("gemm:128x144", 1536), ("gemm:128x104", 1280))
          for shape in ((n, n, n), (n - 37, n, 136), (200, n + 8, 1000))]


@pytest.mark.parametrize("layout", ["nt", "mm"])
@pytest.mark.parametrize("key,shape", NARROW, ids=[f"{k}-{'x'.join(map(str, s))}" for k, s in NARROW])
def test_narrow_widths_where_they_are_for(key, shape, layout):
    """gemm:128x144 at 1536³ and gemm:128x104 at 1280³ (one wave of tiles, perf-notes item 107):
    the last tile column holds 96 (32) real columns, so a chunk is partly and the narrow tail wholly
    past N; with a row-major b (mm) the 64-wide N-major blocks overhang each tile. Beside them a
    short K (3 k-tiles: every chunk through the epilogue ring, none in the borrowed stage), rows
    that are not whole tiles, a K that is not whole k-tiles. 10 runs on poisoned outputs, through
    the library forced to the entry."""
    import torch
    import gemm_ladder
    from gpu_util import assert_repeatable
    M, N, K = shape
    a, b = fresh(M, N, K, torch.float16, next(_seed))
    b_kn = b.t().contiguous()
    out = torch.empty((M, N), dtype=torch.float16, device="cuda")

    class Call:  # assert_repeatable's plan: called, then synchronized
        def __call__(self):
            if layout == "nt":
                gemm_ladder.matmul_nt(a, b, out, step=key)
            else:
                gemm_ladder.matmul(a, b_kn, out, step=key)

        synchronize = staticmethod(torch.cuda.synchronize)

    assert_repeatable(Call(), out, a, b, runs=10, what=f"{key} {M}x{N}x{K} {layout}")
