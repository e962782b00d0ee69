"""The fp8 door on the GPU: scaled_mm against an fp32 reference of the dequantized operands
(every scaling mode, out dtype, bias, fast accumulation, odd M) and against torch._scaled_mm,
torch.compile through the custom op, CUDA graphs, Fp8Linear against nn.Linear, no backward."""
import re

import pytest

from gpu_util import needs_gpu

pytestmark = [needs_gpu, pytest.mark.gpu]


def _torch():
    import torch
    return torch


def _api():
    from gemm_ladder.library import fp8_api
    return fp8_api


def operands(M, N, K, mode, seed=0, act_dtype=None):
    """Quantized x (M, K) and w (N, K): (a, b (K, N) column-major, scale_a, scale_b) for scaled_mm."""
    torch, api = _torch(), _api()
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn((M, K), device="cuda", generator=g, dtype=torch.bfloat16)
    w = torch.randn((N, K), device="cuda", generator=g, dtype=torch.bfloat16)
    a, sa = api.quantize_fp8(x, mode, operand="a", dtype=act_dtype or torch.float8_e4m3fn)
    wq, sb = api.quantize_fp8(w, mode, operand="b")
    return a, wq.t(), sa, sb


def reference(a, b, sa, sb, mode, bias=None):
    """(a @ b) * scales (+ bias) in float64 from the dequantized operands."""
    api = _api()
    y = api.dequantize_fp8(a, sa, mode, "a").double() @ api.dequantize_fp8(b.t(), sb, mode, "b").double().t()
    return y if bias is None else y + bias.double()


def assert_near(got, ref, tol, what=""):
    err = (got.double() - ref).abs().max().item()
    bound = tol * ref.abs().max().item()
    assert err <= bound, f"{what}: max |ours - ref| = {err:.4g} > {bound:.4g} ({tol} of max |ref|)"


def tolerance(out_dtype, fast_accum=False):
    """Output rounding; and the tensor core's own accumulation of each promoted 128-wide k-block
    (measured 1.7e-4 of max |ref| at K = 4096 in fp32 out); fast accumulation adds more."""
    torch = _torch()
    tol = {torch.bfloat16: 1e-2, torch.float16: 2e-3, torch.float32: 1e-3}[out_dtype]
    return max(tol, 2e-2) if fast_accum else tol


@pytest.mark.parametrize("M,N,K", [(1, 256, 512), (17, 256, 512), (257, 256, 512), (100, 136, 208),
                                   (2048, 4096, 4096)])
@pytest.mark.parametrize("out_name", ["bfloat16", "float16", "float32"])
@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
def test_scaled_mm_matches_the_reference(mode, out_name, M, N, K):
    torch, api = _torch(), _api()
    out_dtype = getattr(torch, out_name)
    a, b, sa, sb = operands(M, N, K, mode, seed=M + N + K)
    bias = torch.randn(N, device="cuda").to(out_dtype)
    for bs, fast in ((None, False), (bias, False), (bias, True)):
        got = api.scaled_mm(a, b, sa, sb, out_dtype=out_dtype, bias=bs, use_fast_accum=fast)
        assert got.shape == (M, N) and got.dtype == out_dtype and got.is_contiguous()
        assert torch.isfinite(got).all()
        assert_near(got, reference(a, b, sa, sb, mode, bs), tolerance(out_dtype, fast),
                    f"{mode} {out_name} bias={bs is not None} fast={fast}")


@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
def test_e5m2_activations(mode):
    torch, api = _torch(), _api()
    a, b, sa, sb = operands(64, 256, 384, mode, act_dtype=torch.float8_e5m2)
    assert_near(api.scaled_mm(a, b, sa, sb), reference(a, b, sa, sb, mode), 1e-2, mode)


@pytest.mark.parametrize("M", [1, 17, 257])
@pytest.mark.parametrize("mode", ["tensor", "row"])
def test_scaled_mm_matches_torch_scaled_mm(mode, M):
    torch, api = _torch(), _api()
    a, b, sa, sb = operands(M, 512, 1024, mode, seed=M)
    ours = api.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
    theirs = torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    assert_near(ours, theirs.double(), 1e-2, f"{mode} M={M} vs torch._scaled_mm")


@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
def test_repeated_calls_read_fresh_data_and_recheck_what_changed(mode):
    """A configuration seen before launches at once (the door's hot path): every call reads its
    own operands; a change the first call's checks decided (a scale on another device, a
    misaligned operand, a strided scale, a bias) is checked again."""
    torch, api = _torch(), _api()
    M, N, K = 96, 256, 384
    for seed in range(3):  # same shapes, strides, dtypes: fresh data each time
        a, b, sa, sb = operands(M, N, K, mode, seed=seed)
        got = api.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16)
        assert_near(got, reference(a, b, sa, sb, mode), 1e-2, f"{mode} call {seed}")
    bias = torch.randn(N, device="cuda").to(torch.bfloat16)
    assert_near(api.scaled_mm(a, b, sa, sb, out_dtype=torch.bfloat16, bias=bias),
                reference(a, b, sa, sb, mode, bias), 1e-2, f"{mode} with a bias after calls without")
    with pytest.raises(ValueError, match="^scaled_mm: scale_a is on cpu but a is on cuda"):
        api.scaled_mm(a, b, sa.cpu(), sb, out_dtype=torch.bfloat16)
    flat = torch.empty(M * K + 16, device="cuda", dtype=torch.uint8).view(torch.float8_e4m3fn)
    shifted = flat[1:M * K + 1].view(M, K)
    shifted.copy_(a)
    with pytest.raises(ValueError, match="^scaled_mm: a must be 16-byte aligned"):
        api.scaled_mm(shifted, b, sa, sb, out_dtype=torch.bfloat16)
    wide = torch.stack([sb, torch.full_like(sb, float("nan"))], dim=-1)[..., 0]  # same values, strided
    assert not wide.is_contiguous() or wide.numel() == 1
    assert_near(api.scaled_mm(a, b, sa, wide, out_dtype=torch.bfloat16), reference(a, b, sa, sb, mode), 1e-2,
                f"{mode} with a strided scale_b")


def test_empty_and_placement_errors_on_the_gpu():
    torch, api = _torch(), _api()
    a, b, sa, sb = operands(32, 64, 128, "row")
    empty = api.scaled_mm(a[:0], b, sa[:0], sb)
    assert empty.shape == (0, 64) and empty.device.type == "cuda"
    with pytest.raises(ValueError, match="^scaled_mm: scale_a is on cpu but a is on cuda"):
        api.scaled_mm(a, b, sa.cpu(), sb)
    flat = torch.zeros(32 * 128 + 1, device="cuda").to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="^scaled_mm: a must be 16-byte aligned"):
        api.scaled_mm(flat[1:].view(32, 128), b, sa, sb)


def test_torch_compile_fullgraph_through_the_op():
    torch, api = _torch(), _api()
    torch._dynamo.reset()
    a, b, sa, sb = operands(96, 256, 512, "block")
    bias = torch.randn(256, device="cuda", dtype=torch.bfloat16)

    def f(a, b, sa, sb, bias):
        return torch.relu(api.scaled_mm(a, b, sa, sb, bias=bias))

    compiled = torch.compile(f, fullgraph=True)
    torch.testing.assert_close(compiled(a, b, sa, sb, bias), f(a, b, sa, sb, bias), rtol=0, atol=0)

    lin = torch.nn.Linear(512, 256, device="cuda", dtype=torch.bfloat16)
    layer = api.Fp8Linear.from_linear(lin, mode="row")
    x = torch.randn(3, 40, 512, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        eager, got = layer(x), torch.compile(layer, fullgraph=True)(x)
    assert got.shape == eager.shape == (3, 40, 256)
    assert_near(got, eager.double(), 1e-2, "compiled Fp8Linear")  # the quantization may fuse differently


def test_cuda_graph_capture_and_replay_with_new_inputs():
    torch, api = _torch(), _api()
    a, b, sa, sb = operands(200, 512, 640, "row")
    lin = torch.nn.Linear(640, 512, device="cuda", dtype=torch.bfloat16)
    layer = api.Fp8Linear.from_linear(lin, mode="block")
    x = torch.randn(2, 50, 640, device="cuda", dtype=torch.bfloat16)
    calls = lambda: (api.scaled_mm(a, b, sa, sb), layer(x))  # noqa: E731
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():  # warm up (JIT compile, load) outside the capture
        calls()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.no_grad():
        c1, c2 = calls()
    for i in range(3):
        na, nb, nsa, nsb = operands(200, 512, 640, "row", seed=100 + i)
        for t, new in ((a, na), (b, nb), (sa, nsa), (sb, nsb)):
            t.copy_(new)
        x.copy_(torch.randn_like(x))
        c1.fill_(float("nan"))
        c2.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert_near(c1, reference(a, b, sa, sb, "row"), 1e-2, f"replay {i}")
        with torch.no_grad():
            assert_near(c2, layer(x).double(), 1e-2, f"replay {i} Fp8Linear")


@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
@pytest.mark.parametrize("dtype_name", ["bfloat16", "float16"])
def test_fp8_linear_is_close_to_linear(mode, dtype_name):
    torch, api = _torch(), _api()
    dtype = getattr(torch, dtype_name)
    torch.manual_seed(0)
    lin = torch.nn.Linear(1024, 768, device="cuda", dtype=dtype)
    layer = api.Fp8Linear.from_linear(lin, mode=mode)
    x = torch.randn(4, 33, 1024, device="cuda", dtype=dtype)
    with torch.no_grad():
        y = layer(x)
        ref = torch.nn.functional.linear(x.double(), lin.weight.double(), lin.bias.double())
    assert y.shape == (4, 33, 768) and y.dtype == dtype
    assert_near(y, ref, 5e-2, f"Fp8Linear {mode} {dtype_name}")  # fp8's 3 mantissa bits on both operands


def test_backward_raises_one_clear_line():
    torch, api = _torch(), _api()
    layer = api.Fp8Linear.from_linear(torch.nn.Linear(256, 128, device="cuda", dtype=torch.bfloat16))
    x = torch.randn(8, 256, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    y = layer(x)  # the forward runs; a layer below would silently get no gradient: the backward raises
    assert y.shape == (8, 128) and y.requires_grad
    with pytest.raises(RuntimeError, match="^" + re.escape(api.NO_BACKWARD) + "$"):
        y.float().sum().backward()
    a, b, sa, sb = operands(16, 128, 256, "row")
    y = api.scaled_mm(a, b, sa.requires_grad_(), sb)
    with pytest.raises(RuntimeError, match="^" + re.escape(api.NO_BACKWARD) + "$"):
        y.float().sum().backward()
