"""Step 9 with stream-K (gemm:128x256sk) on the GPU: split tiles summed in the kernel, correct against
fp32 on poisoned outputs for every deal (none, the rule's, 2-4 pieces, a round more, every
tile split), bit-identical over 20 runs of one plan, flags lowered after each launch; the debug
build's flag waits bounded; the library's per-stream workspace under concurrent streams
and inside a CUDA graph. Skipped without a Hopper GPU."""
import itertools

import pytest

import gemm_ladder
from gemm_ladder.library import fastpath, runner
from gpu_util import assert_matches, assert_repeatable, fresh, needs_gpu, run_child
from gemm_ladder.families import common, keys

pytestmark = [needs_gpu, pytest.mark.gpu]
SK = keys.get_step("gemm:128x256sk")
_seed = itertools.count(7000)

# ragged edges (M, N, K off the tile), few k-tiles (runs shorter than a tile), the suite's shapes
SHAPES = [(4096, 4096, 4096), (2000, 3000, 4000), (512, 11008, 4096), (1000, 5000, 200), (4224, 4224, 72),
          (3000, 5000, 4000)]


def _deals(M, N, K):
    """(sk_tiles, sk_ctas): none, the rule's, the remainder in 2, 3 and 4 pieces, the
    remainder plus a round in 2 pieces, every tile in 2 (where the grid holds them), and
    split counts that leave the whole rounds uneven (16 tiles in 4, 66 in 2)."""
    tiles, G = SK.tiles(M, N), min(132, SK.tiles(M, N))
    rest = tiles % G
    deals = {(0, 1), SK.stream_k_deal(M, N, K, G), (rest + G, 2 * (rest + G)), (tiles, 2 * tiles),
             (min(tiles, 16), 4 * min(tiles, 16)), (min(tiles, 66), 2 * min(tiles, 66))}
    deals |= {(rest, p * rest) for p in (2, 3, 4)}
    return sorted(d for d in deals if not SK.stream_k_problem(M, N, K, G, *d) and (d[0] == 0) == (d == (0, 1)))


CASES = [(s, d) for s in SHAPES for d in _deals(*s)]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("shape,deal", CASES, ids=[f"{'x'.join(map(str, s))}-sk{d[0]}on{d[1]}" for s, d in CASES])
def test_stream_k_matches_reference_and_is_deterministic(shape, deal, dtype):
    import torch
    dt = getattr(torch, dtype)
    M, N, K = shape
    a, b = fresh(M, N, K, dt, next(_seed))
    out = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
    sk, sk_ctas = deal
    p = runner.plan(SK, a, b, out, sk_tiles=sk, sk_ctas=sk_ctas)
    ws = p.tensors[3]
    assert (ws is not None) == (sk > 0)
    assert_repeatable(p, out, a, b, what=f"gemm:128x256sk {shape} {deal}")
    if ws is not None:  # every flag lowered again by its last reader
        flags = ws[:SK.workspace_floats(p.launcher.grid[0]) - p.launcher.grid[0] * SK.bm * SK.bn].view(torch.int32)
        assert int(flags.abs().sum()) == 0


def test_split_tiles_out_of_range_is_a_clear_error():
    import torch
    a, b = fresh(512, 512, 256, torch.float16, 1)  # 8 tiles of 128 x 256 on 8 CTAs, 4 k-tiles each
    with pytest.raises(common.ConfigError, match="outside"):
        runner.plan(SK, a, b, sk_tiles=SK.tiles(512, 512) + 1)
    with pytest.raises(common.ConfigError, match="not P x sk_tiles"):
        runner.plan(SK, a, b, sk_tiles=1, sk_ctas=8)  # 8 pieces of a tile with 4 chunks and 4 k-tiles

    with pytest.raises(common.ConfigError, match="outside 1..8"):
        runner.plan(SK, a, b, sk_tiles=4, sk_ctas=12)
    with pytest.raises(common.ConfigError, match="not P x sk_tiles"):
        runner.plan(SK, a, b, sk_tiles=3, sk_ctas=8)
    with pytest.raises(common.ConfigError, match="no stream-K"):
        runner.plan("gemm:128x256", a, b, sk_tiles=3)


_DEBUG_CHILD = """
import torch
from gemm_ladder.families import keys
from gemm_ladder.library import runner
from gemm_ladder.measure.accuracy import check_product
sk = keys.get_step("gemm:128x256sk")
for (M, N, K, tiles, ctas) in [(512, 11008, 4096, None, None), (2000, 3000, 4000, 60, 120),
                               (1000, 5000, 200, 28, 112), (3072, 3072, 3072, 24, 72)]:
    g = torch.Generator(device="cuda").manual_seed(M)
    a = torch.randn((M, K), device="cuda", generator=g).half()
    b = torch.randn((N, K), device="cuda", generator=g).half()
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    p = runner.plan(sk, a, b, out, debug=True, sk_tiles=tiles, sk_ctas=ctas)
    p()
    p.synchronize()
    ok, mx, rel, msg = check_product(out, a, b)
    assert ok, (M, N, K, msg)
print("ok")
"""


def test_stream_k_debug_build_in_a_child():
    """The debug build (bounded mbarrier and flag waits) runs the split deals to the end."""
    res = run_child(_DEBUG_CHILD)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]


def test_library_stream_k_on_two_streams_at_once():
    """Two streams running the same split configuration at the same time: each its own
    workspace (shared flags would mix the pieces or hang)."""
    import torch
    M, N, K = 512, 11008, 4096
    a1, b1 = fresh(M, N, K, torch.float16, 11)
    a2, b2 = fresh(M, N, K, torch.float16, 12)
    cfg = fastpath.config_for("nt", a1, b1, step="gemm:128x256sk")
    assert cfg.sk_deal[0] > 0
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    outs1, outs2 = [], []
    torch.cuda.synchronize()
    for _ in range(10):
        with torch.cuda.stream(s1):
            outs1.append(gemm_ladder.matmul_nt(a1, b1, step="gemm:128x256sk"))
        with torch.cuda.stream(s2):
            outs2.append(gemm_ladder.matmul_nt(a2, b2, step="gemm:128x256sk"))
    torch.cuda.synchronize()
    for o in outs1:
        assert torch.equal(o, outs1[0])
    for o in outs2:
        assert torch.equal(o, outs2[0])
    assert_matches(outs1[0], a1, b1)
    assert_matches(outs2[0], a2, b2)


def test_cuda_graph_of_stream_k():
    """Captured with a workspace from the graph's pool (zeroed in the graph), replayed with
    new inputs."""
    import torch
    M, N, K = 512, 11008, 4096
    a, b = fresh(M, N, K, torch.float16, 21)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        gemm_ladder.matmul_nt(a, b, step="gemm:128x256sk")
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        c = gemm_ladder.matmul_nt(a, b, step="gemm:128x256sk")
    for i in range(3):
        a2, b2 = fresh(M, N, K, torch.float16, 30 + i)
        a.copy_(a2)
        b.copy_(b2)
        c.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert_matches(c, a, b)


@pytest.mark.parametrize("a_mn,b_mn", [(False, True), (True, False), (True, True)],
                         ids=["b-row-major", "a-transposed", "both"])
def test_library_stream_k_reads_mn_major_operands(a_mn, b_mn):
    """The split wave with an N-major B (a row-major (K, N) b) or an M-major A (a transposed
    view): the GL_A_MN / GL_B_MN builds of gemm:128x256sk, read in place."""
    import torch
    M, N, K = 512, 11008, 4096
    a, b_nk = fresh(M, N, K, torch.float16, 41)
    a_in = a.t().contiguous().t() if a_mn else a  # (M, K) view of a (K, M) matrix
    b_in = b_nk.t().contiguous() if b_mn else b_nk.t()  # (K, N): row-major, or a view of (N, K)
    cfg = fastpath.config_for("mm", a_in, b_in, step="gemm:128x256sk")
    assert cfg.sk_deal[0] > 0 and cfg.a.direct and cfg.b.direct
    out = gemm_ladder.matmul(a_in, b_in, step="gemm:128x256sk")
    torch.cuda.synchronize()
    assert_matches(out, a, b_nk)
