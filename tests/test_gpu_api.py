"""gemm_ladder.matmul / matmul_nt on the GPU: any shape, fp16/bf16, awkward layouts."""
import pytest

import gemm_ladder
from gemm_ladder.families.common import reads_mn
from gemm_ladder.library import fastpath
from gpu_util import fresh, needs_gpu

pytestmark = [needs_gpu, pytest.mark.gpu]


def _ref(a, b):
    return a.float() @ b.float()


def _close(out, ref, dtype):
    from gemm_ladder.measure.accuracy import check_output
    import torch
    ok, mx, rel, msg = check_output(out, ref, "float16" if dtype == torch.float16 else "bfloat16")
    assert ok, msg


@pytest.mark.parametrize("M,N,K", [(4096, 4096, 4096), (1, 1, 1), (7, 9, 13), (1000, 1000, 1000),
                                   (3000, 5000, 4000), (16, 4096, 4096), (4096, 16, 4096), (513, 257, 129)])
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_matmul_shapes(M, N, K, dtype_name):
    import torch
    dtype = getattr(torch, dtype_name)
    a, bt = fresh(M, N, K, dtype, M * 7 + N)
    b = bt.T.contiguous()  # (K, N) row-major: N-major, read in place by every kernel the library picks
    out = gemm_ladder.matmul(a, b)
    assert out.shape == (M, N) and out.dtype == dtype
    _close(out, _ref(a, b), dtype)
    cfg = fastpath.config_for("mm", a, b)
    if N % 8 == 0 and N > 1:  # 16-byte row stride: in place (the gemm family's or the small-M family's GL_B_MN build)
        assert cfg.b.direct and reads_mn(cfg.step)[1], (cfg.step.key, cfg.b.why)
    if (M, N, K) == (3000, 5000, 4000):  # b's rows of 10000 bytes are not whole 32-byte sectors
        assert fastpath.b_rows_misaligned(cfg.b) and cfg.step.key == "gemm:128x256c2"  # the cluster multicasts B
    out_nt = gemm_ladder.matmul_nt(a, bt)
    _close(out_nt, _ref(a, b), dtype)


def test_matmul_layouts():
    import torch
    a, bt = fresh(512, 384, 256, torch.float16, 3)
    b_view = bt.T  # (K, N) transposed view: K-major, read in place
    _close(gemm_ladder.matmul(a, b_view), _ref(a, b_view), torch.float16)
    a_view = torch.randn(256, 512, device="cuda").half().T  # (512, 256) transposed view: M-major
    b_kn = bt.T.contiguous()  # (256, 384) row-major: N-major
    _close(gemm_ladder.matmul(a_view, b_kn), _ref(a_view, b_kn), torch.float16)
    cfg = fastpath.config_for("mm", a_view, b_kn)
    assert cfg.a.direct and cfg.b.direct and cfg.step.mn_major and cfg.defines == {"GL_A_MN": 1, "GL_B_MN": 1}
    a_nc = torch.randn(256, 1024, device="cuda").half()[:, ::2]  # non-contiguous (256, 512)
    b2 = torch.randn(512, 128, device="cuda").half()
    _close(gemm_ladder.matmul(a_nc, b2), _ref(a_nc, b2), torch.float16)
    flat = torch.randn(256 * 512 + 1, device="cuda").half()
    a_mis = flat[1:].view(256, 512)  # contiguous but 2-byte aligned
    _close(gemm_ladder.matmul(a_mis, b2), _ref(a_mis, b2), torch.float16)
    batched = torch.randn(3, 100, 512, device="cuda").half()
    res = gemm_ladder.matmul(batched, b2)
    assert res.shape == (3, 100, 128)
    _close(res.view(-1, 128), _ref(batched.view(-1, 512), b2), torch.float16)


def test_matmul_out_and_empty():
    import torch
    a, bt = fresh(256, 200, 64, torch.float16, 4)
    out = torch.full((256, 200), float("nan"), dtype=torch.float16, device="cuda")
    res = gemm_ladder.matmul(a, bt.T, out=out)
    assert res.data_ptr() == out.data_ptr()
    _close(out, _ref(a, bt.T), torch.float16)
    z = gemm_ladder.matmul(torch.randn(5, 0, device="cuda").half(), torch.randn(0, 7, device="cuda").half())
    assert z.shape == (5, 7) and not z.any()
    assert gemm_ladder.matmul(torch.randn(0, 8, device="cuda").half(), torch.randn(8, 7, device="cuda").half()).shape == (0, 7)


@pytest.mark.parametrize("M,K", [(4096, 4096), (16, 4096), (2048, 256)])
def test_out_that_is_an_operand(M, K):
    """out=a (square b) and out=b (square a): the call goes through a buffer, since the kernel
    would overwrite rows that other CTAs still read; 5 runs, each from fresh inputs."""
    import torch
    for seed in range(5):
        a, bt = fresh(M, K, K, torch.float16, 60 + seed)
        b = bt.T.contiguous()
        want = _ref(a, b)
        res = gemm_ladder.matmul(a, b, out=a)
        assert res is a
        _close(a, want, torch.float16)
    sq, _ = fresh(K, K, K, torch.float16, 70)
    x, _ = fresh(M, K, K, torch.float16, 71)
    want = _ref(sq, sq)
    gemm_ladder.matmul_nt(sq, sq.T.contiguous(), out=sq)  # nt: b (N, K) = sq.T copied, a = sq overwritten
    _close(sq, want, torch.float16)
    want = _ref(x[:, :K], torch.eye(K, device="cuda", dtype=torch.float16))
    gemm_ladder.matmul(x, torch.eye(K, device="cuda", dtype=torch.float16), out=x)
    _close(x, want, torch.float16)


def test_static_b_with_a_copied_b():
    """static_b with a b TMA cannot read in place (rows 8198 bytes apart): the copy runs first
    and the kernel waits for it (the waiting build), on fresh weights every call."""
    import torch
    x, _ = fresh(16, 4096, 4096, torch.float16, 80)
    for seed in range(5):
        w = torch.randn(4096, 4099, device="cuda", dtype=torch.float16)[:, :4096]
        cfg = fastpath.config_for("mm", x, w.t(), static_b=True)
        assert not cfg.b.direct and not cfg.step.key.endswith("~b_early")
        _close(gemm_ladder.matmul(x, w.t(), static_b=True), _ref(x, w.t()), torch.float16)


def test_matmul_gpu_errors():
    import torch
    a = torch.randn(64, 64, device="cuda").half()
    with pytest.raises(ValueError, match="inner dimensions"):
        gemm_ladder.matmul(a, torch.randn(32, 64, device="cuda").half())
    with pytest.raises(TypeError, match="same dtype"):
        gemm_ladder.matmul(a, torch.randn(64, 64, device="cuda").bfloat16())
    with pytest.raises(TypeError, match="not supported"):
        gemm_ladder.matmul(a.float(), a.float())
    with pytest.raises(ValueError, match="CUDA"):
        gemm_ladder.matmul(a, a.cpu())
