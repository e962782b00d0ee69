"""The fp8 door without a GPU: quantize/dequantize, the scale-mode inference, every
validation error as one clear line, and scaled_mm / the custom op / Fp8Linear end to end
with the kernel replaced by an fp32 reference that checks what the runner is handed."""
import re

import pytest
import torch

from gemm_ladder.library import fp8_api
from gemm_ladder.library.fp8_api import (BLOCK, NO_BACKWARD, Fp8Linear, _scale_mode, dequantize_fp8,
                                         quantize_fp8, scaled_mm)

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def rnd(*shape, seed=0, scale=1.0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed + 31 * sum(shape))
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def group_amax(x, mode, operand):
    """Each element's quantization group's amax, broadcast to x's shape."""
    ax = x.float().abs()
    if mode == "tensor":
        return ax.amax().expand_as(ax)
    if mode == "row":
        return ax.amax(dim=1, keepdim=True).expand_as(ax)
    R, C = ax.shape
    rb = 1 if operand == "a" else BLOCK
    out = torch.empty_like(ax)
    for r in range(0, R, rb):
        for c in range(0, C, BLOCK):
            out[r:r + rb, c:c + BLOCK] = ax[r:r + rb, c:c + BLOCK].amax()
    return out


# ---- quantize / dequantize -------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
@pytest.mark.parametrize("operand", ["a", "b"])
@pytest.mark.parametrize("dtype,bound", [(E4M3, 0.04), (E5M2, 0.075)])
@pytest.mark.parametrize("shape", [(300, 272), (129, 16), (8, 512)])
def test_round_trip_error_is_bounded_by_the_group_amax(mode, operand, dtype, bound, shape):
    """Round to nearest in the top binade: at most half an ulp, 16/448 (e4m3) or 4096/57344 (e5m2) of the amax."""
    x = rnd(*shape, scale=3.0, dtype=torch.bfloat16)
    x[0, 0] = 50.0  # one outlier: the other groups keep their own range in row and block modes
    q, s = quantize_fp8(x, mode, dtype=dtype, operand=operand)
    assert q.dtype == dtype and q.shape == x.shape and q.is_contiguous()
    err = (dequantize_fp8(q, s, mode, operand) - x.float()).abs()
    assert (err <= bound * group_amax(x, mode, operand)).all(), (err / group_amax(x, mode, operand)).max()


@pytest.mark.parametrize("mode,operand,want", [
    ("tensor", "a", ()), ("tensor", "b", ()), ("row", "a", (300, 1)), ("row", "b", (1, 300)),
    ("block", "a", (300, 3)), ("block", "b", (3, 3))])
def test_scale_shapes_are_what_scaled_mm_takes(mode, operand, want):
    q, s = quantize_fp8(rnd(300, 272), mode, operand=operand)
    assert tuple(s.shape) == want and s.dtype == torch.float32


@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
@pytest.mark.parametrize("operand", ["a", "b"])
def test_zero_tiny_and_empty_inputs_stay_finite(mode, operand):
    for x in (torch.zeros(130, 144), torch.full((130, 144), 1e-42), torch.zeros(0, 144), torch.zeros(3, 0)):
        q, s = quantize_fp8(x, mode, operand=operand)
        assert torch.isfinite(s).all() and (s > 0).all() and torch.isfinite(q.float()).all()
        assert (dequantize_fp8(q, s, mode, operand) - x).abs().le(1e-40).all()
    q, s = quantize_fp8(torch.zeros(4, 32), "row")
    assert (s == 1).all() and not q.float().any()


def test_quantize_accepts_fp16_fp32_and_keeps_the_device():
    for dt in (torch.float16, torch.float32):
        q, s = quantize_fp8(rnd(4, 32, dtype=dt), "row")
        assert q.device.type == s.device.type == "cpu"
    q, s = quantize_fp8(torch.empty(4, 32, device="meta"), "block", operand="b")
    assert q.device.type == "meta" and s.shape == (1, 1)


@pytest.mark.parametrize("call,exc,match", [
    (lambda: quantize_fp8(rnd(4, 32), "column"), ValueError, "quantize_fp8: mode must be one of"),
    (lambda: quantize_fp8(rnd(4, 32), operand="c"), ValueError, "quantize_fp8: operand must be 'a'"),
    (lambda: quantize_fp8(rnd(4, 32), dtype=torch.float16), TypeError, "quantize_fp8: dtype must be"),
    (lambda: quantize_fp8([1.0]), TypeError, "quantize_fp8: x must be a torch.Tensor"),
    (lambda: quantize_fp8(torch.ones(4, 32, dtype=torch.int32)), TypeError, "quantize_fp8: x has dtype"),
    (lambda: quantize_fp8(rnd(2, 4, 32)), ValueError, "quantize_fp8: x must be 2-D"),
    (lambda: dequantize_fp8(torch.zeros(4, 32, dtype=E4M3), torch.ones(4), "row"), ValueError,
     r"dequantize_fp8: scale has shape \(4,\), expected \(4, 1\)"),
    (lambda: dequantize_fp8(torch.zeros(4, 32), torch.ones(4, 1), "row"), TypeError, "dequantize_fp8: dtype"),
])
def test_quantize_errors_are_one_line(call, exc, match):
    with pytest.raises(exc, match=match) as info:
        call()
    assert "\n" not in str(info.value)


# ---- the scale-mode inference ----------------------------------------------------------------

@pytest.mark.parametrize("M,N,K,sa,sb,want", [
    (64, 256, 512, (), (), "tensor"), (64, 256, 512, (1,), (1, 1), "tensor"),
    (64, 256, 512, (64, 1), (1, 256), "row"),
    (64, 256, 512, (64, 4), (2, 4), "block"), (64, 200, 400, (64, 4), (2, 4), "block"),
    (64, 256, 128, (64, 1), (2, 1), "block"),   # K <= 128: a's scales look row-wise; b's decide
    (1, 1, 64, (1, 1), (1, 1), "tensor"),       # every mode fits: all compute the same product
    (64, 1, 64, (64, 1), (1, 1), "row"),        # row and block fit (K <= 128, N == 1): the same product
    (1, 64, 128, (1, 1), (1, 1), "tensor"),     # tensor and block fit (M == 1, one block): the same product
])
def test_scale_mode_from_shapes(M, N, K, sa, sb, want):
    assert _scale_mode(M, N, K, sa, sb) == want
    assert _scale_mode(M, N, K, torch.ones(sa), torch.ones(sb)) == want


def test_scale_mode_lists_the_three_accepted_pairs():
    with pytest.raises(ValueError) as info:
        _scale_mode(64, 256, 512, (64,), (256,))
    msg = str(info.value)
    assert msg.startswith("scaled_mm: scale_a (64,) and scale_b (256,) fit no scaling mode") and "\n" not in msg
    assert "(1,) and (1,)" in msg and "(64, 1) and (1, 256)" in msg and "(64, 4) and (2, 4)" in msg


# ---- scaled_mm's validation ------------------------------------------------------------------

def operands(M=32, N=64, K=128, mode="row", da=E4M3, db=E4M3):
    a = rnd(M, K).to(da)
    b = rnd(N, K, seed=1).to(db).t()  # (K, N) column-major
    if mode == "tensor":
        return a, b, torch.tensor(0.5), torch.tensor(2.0)
    if mode == "row":
        return a, b, rnd(M, 1, seed=2).abs() + 0.1, rnd(1, N, seed=3).abs() + 0.1
    kb, nb = -(-K // BLOCK), -(-N // BLOCK)
    return a, b, rnd(M, kb, seed=2).abs() + 0.1, rnd(nb, kb, seed=3).abs() + 0.1


BAD_CALLS = [
    ("a list", lambda a, b, sa, sb: dict(a=[1], b=b, scale_a=sa, scale_b=sb), TypeError, "a must be a torch.Tensor"),
    ("scale float", lambda a, b, sa, sb: dict(a=a, b=b, scale_a=1.0, scale_b=sb), TypeError,
     "scale_a must be a torch.Tensor"),
    ("out int8", lambda a, b, sa, sb: dict(a=a, b=b, scale_a=sa, scale_b=sb, out_dtype=torch.int8), TypeError,
     "out_dtype torch.int8 is not supported"),
    ("a bf16", lambda a, b, sa, sb: dict(a=a.to(torch.bfloat16), b=b, scale_a=sa, scale_b=sb), TypeError,
     "a has dtype torch.bfloat16; it must be torch.float8_e4m3fn or torch.float8_e5m2"),
    ("both e5m2", lambda a, b, sa, sb: dict(a=a.float().to(E5M2), b=b.float().to(E5M2).t().contiguous().t(),
                                            scale_a=sa, scale_b=sb), TypeError, "both float8_e5m2"),
    ("a 3-D", lambda a, b, sa, sb: dict(a=a[None], b=b, scale_a=sa, scale_b=sb), ValueError, "must be 2-D"),
    ("K differs", lambda a, b, sa, sb: dict(a=a[:, :64], b=b, scale_a=sa, scale_b=sb), ValueError,
     "inner dimensions differ: a is 32x64, b is 128x64"),
    ("a transposed", lambda a, b, sa, sb: dict(a=a.float().t().contiguous().to(E4M3).t(), b=b, scale_a=sa,
                                               scale_b=sb), ValueError, "a must be row-major contiguous"),
    ("b row-major", lambda a, b, sa, sb: dict(a=a, b=b.contiguous(), scale_a=sa, scale_b=sb), ValueError,
     r"b must be column-major \(K, N\) .*: pass w.t\(\) of a row-major \(N, K\) weight"),
    ("K % 16", lambda a, b, sa, sb: dict(a=a[:, :120].contiguous(), b=b.t()[:, :120].contiguous().t(),
                                         scale_a=sa, scale_b=sb), ValueError, "K = 120 must be a multiple of 16"),
    ("N % 8", lambda a, b, sa, sb: dict(a=a, b=b[:, :60], scale_a=sa, scale_b=sb[:, :60]), ValueError,
     "N = 60 must be a multiple of 8 for torch.bfloat16 output"),
    ("N % 4 fp32", lambda a, b, sa, sb: dict(a=a, b=b[:, :62], scale_a=sa, scale_b=sb[:, :62],
                                             out_dtype=torch.float32), ValueError, "N = 62 must be a multiple of 4"),
    ("scale fp16", lambda a, b, sa, sb: dict(a=a, b=b, scale_a=sa.half(), scale_b=sb), TypeError,
     "scale_a has dtype torch.float16; scales must be torch.float32"),
    ("scale 1-D", lambda a, b, sa, sb: dict(a=a, b=b, scale_a=sa.reshape(-1), scale_b=sb), ValueError,
     r"fit no scaling mode for M=32, N=64, K=128: per-tensor .* row-wise \(32, 1\) and \(1, 64\)"),
    ("bias shape", lambda a, b, sa, sb: dict(a=a, b=b, scale_a=sa, scale_b=sb,
                                             bias=torch.zeros(1, 64, dtype=torch.bfloat16)), ValueError,
     r"bias has shape \(1, 64\), expected \(64,\)"),
    ("bias dtype", lambda a, b, sa, sb: dict(a=a, b=b, scale_a=sa, scale_b=sb, bias=torch.zeros(64)), TypeError,
     "bias has dtype torch.float32; it must be out_dtype torch.bfloat16"),
    ("bias type", lambda a, b, sa, sb: dict(a=a, b=b, scale_a=sa, scale_b=sb, bias=[0.0]), TypeError,
     "bias must be a torch.Tensor"),
    ("scale on meta", lambda a, b, sa, sb: dict(a=a, b=b, scale_a=sa.to("meta"), scale_b=sb), ValueError,
     "scale_a is on meta but a is on cpu: all tensors must be on one CUDA device"),
    ("cpu", lambda a, b, sa, sb: dict(a=a, b=b, scale_a=sa, scale_b=sb), ValueError,
     "a is on cpu; gemm_ladder's fp8 kernels need CUDA tensors"),
    ("a misaligned", lambda a, b, sa, sb: dict(a=torch.zeros(32 * 128 + 1, dtype=E4M3)[1:].view(32, 128), b=b,
                                               scale_a=sa, scale_b=sb), ValueError,
     r"a must be 16-byte aligned \(data_ptr % 16 = 1\)"),
]


@pytest.mark.parametrize("make,exc,match", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_scaled_mm_errors_are_one_clear_line(make, exc, match):
    kw = make(*operands())
    with pytest.raises(exc, match=match) as info:
        scaled_mm(kw.pop("a"), kw.pop("b"), kw.pop("scale_a"), kw.pop("scale_b"), **kw)
    msg = str(info.value)
    assert msg.startswith("scaled_mm: ") and "\n" not in msg, msg


def test_no_hopper_is_one_clear_line():
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    with pytest.raises(RuntimeError, match="^scaled_mm: no CUDA GPU is available"):
        fp8_api._check_gpu(torch.device("cuda"))


# ---- end to end with the kernel replaced by a reference --------------------------------------

def reference(a, b, scale_a, scale_b, mode, out_dtype, bias=None):
    """(a @ b) * scales (+ bias) in fp32 from scaled_mm's arguments (b (K, N))."""
    if mode == "block":
        ad, bd = dequantize_fp8(a, scale_a, "block", "a"), dequantize_fp8(b.t(), scale_b, "block", "b")
        y = ad @ bd.t()
    else:
        y = (a.float() @ b.float()) * scale_a.float() * scale_b.float()
    return (y if bias is None else y + bias.float()).to(out_dtype)


class FakeRunner:
    """run_fp8's contract checked on every call, then the fp32 reference."""

    def __init__(self):
        self.calls = []

    def __call__(self, a, b, scale_a, scale_b, *, mode, out_dtype, bias=None, fast_accum=False, checked=False):
        M, K = a.shape
        N = b.shape[0]
        assert a.is_contiguous() and b.is_contiguous() and b.shape[1] == K and K % 16 == 0 and M and N and K
        want = {"tensor": ((1,), (1,)), "row": ((M,), (N,)),
                "block": ((M, -(-K // BLOCK)), (-(-N // BLOCK), -(-K // BLOCK)))}[mode]
        if mode == "tensor":
            assert scale_a.numel() == scale_b.numel() == 1
        else:
            assert (tuple(scale_a.shape), tuple(scale_b.shape)) == want
        for s in (scale_a, scale_b) + ((bias,) if bias is not None else ()):
            assert s.is_contiguous() and s.data_ptr() % 16 == 0
        assert scale_a.dtype == scale_b.dtype == torch.float32 and isinstance(fast_accum, bool)
        assert bias is None or (bias.shape == (N,) and bias.dtype == out_dtype)
        assert checked, "the door validates, so the runner need not"
        self.calls.append(dict(mode=mode, fast_accum=fast_accum, shape=(M, N, K)))
        sa = scale_a.reshape(M, 1) if mode == "row" else scale_a
        sb = scale_b.reshape(1, N) if mode == "row" else scale_b
        return reference(a, b.t(), sa, sb, mode, out_dtype, bias)


@pytest.fixture
def fake_kernel(monkeypatch):
    run = FakeRunner()
    monkeypatch.setattr(fp8_api, "_run_fp8", run)
    monkeypatch.setattr(fp8_api, "_check_gpu", lambda device: None)
    return run


@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
@pytest.mark.parametrize("out_dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("M,N,K", [(1, 64, 128), (17, 136, 208), (33, 256, 512)])
def test_scaled_mm_hands_the_runner_its_forms(fake_kernel, mode, out_dtype, M, N, K):
    a, b, sa, sb = operands(M, N, K, mode)
    bias = rnd(N, seed=9).to(out_dtype)
    for bs in (None, bias):
        got = scaled_mm(a, b, sa, sb, out_dtype=out_dtype, bias=bs, use_fast_accum=bs is None)
        assert got.shape == (M, N) and got.dtype == out_dtype and got.is_contiguous()
        torch.testing.assert_close(got, reference(a, b, sa, sb, mode, out_dtype, bs))  # M == 1: fp32 order
    want_mode = "tensor" if M == 1 and mode == "block" and K <= 128 else mode
    assert [c["mode"] for c in fake_kernel.calls] == [want_mode] * 2
    assert [c["fast_accum"] for c in fake_kernel.calls] == [True, False]


def test_scales_and_bias_are_packed_for_the_runner(fake_kernel):
    a, b, sa, sb = operands(16, 64, 128, "row")
    sa_view = torch.cat([sa, sa], dim=1)[:, :1]  # (M, 1) with row stride 2
    bias = torch.zeros(2 * 64 + 1, dtype=torch.bfloat16)[1::2]  # strided and misaligned
    got = scaled_mm(a, b, sa_view, sb, bias=bias)
    torch.testing.assert_close(got, reference(a, b, sa, sb, "row", torch.bfloat16), rtol=0, atol=0)
    e5 = scaled_mm(a.float().to(E5M2), b, sa, sb)  # e5m2 x e4m3 is accepted
    assert e5.shape == (16, 64)


def test_empty_results_launch_nothing(fake_kernel):
    a, b, sa, sb = operands(32, 64, 128, "tensor")
    assert scaled_mm(a[:0], b, sa, sb).shape == (0, 64)
    assert scaled_mm(a, b[:, :0], sa, sb).shape == (32, 0)
    bias = torch.arange(64, dtype=torch.bfloat16)
    z = scaled_mm(a[:, :0], b[:0], sa, sb, bias=bias)
    assert z.shape == (32, 64) and torch.equal(z, bias.expand(32, 64))
    assert fake_kernel.calls == []


def test_custom_op_fake_gives_shape_dtype_device_on_meta():
    a, b, sa, sb = (t.to("meta") for t in operands(40, 64, 256, "block"))
    y = torch.ops.gemm_ladder.scaled_mm(a, b, sa, sb, torch.float16, None, False)
    assert y.shape == (40, 64) and y.dtype == torch.float16 and y.device.type == "meta" and y.is_contiguous()
    with pytest.raises(ValueError, match="scaled_mm: b must be column-major"):
        torch.ops.gemm_ladder.scaled_mm(a, b.contiguous(), sa, sb, torch.float16, None, False)


def test_opcheck_fake(fake_kernel):
    a, b, sa, sb = operands(24, 64, 256, "row")
    for args in ((a, b, sa, sb, torch.bfloat16, None, False),
                 (a, b, sa, sb, torch.float32, torch.ones(64), True)):
        torch.library.opcheck(torch.ops.gemm_ladder.scaled_mm.default, args,
                              test_utils=("test_faketensor",))  # test_schema: CPU has no fp8 mul


def test_torch_compile_fullgraph_goes_through_the_op(fake_kernel):
    torch._dynamo.reset()
    a, b, sa, sb = operands(48, 128, 256, "block")

    def f(a, b, sa, sb):
        return scaled_mm(a, b, sa, sb, out_dtype=torch.float32) * 2

    got = torch.compile(f, fullgraph=True, backend="aot_eager")(a, b, sa, sb)
    torch.testing.assert_close(got, 2 * reference(a, b, sa, sb, "block", torch.float32))
    assert len(fake_kernel.calls) == 1


def test_backward_raises_one_clear_line(fake_kernel):
    a, b, sa, sb = operands(16, 64, 128, "row")
    y = scaled_mm(a, b, sa.requires_grad_(), sb)
    assert y.requires_grad
    with pytest.raises(RuntimeError, match="^gemm_ladder.scaled_mm: backward is not supported"):
        y.float().sum().backward()
    with torch.no_grad():
        assert not scaled_mm(a, b, sa, sb).requires_grad
    meta = [t.detach().to("meta") for t in (a, b, sa, sb)]
    y = torch.ops.gemm_ladder.scaled_mm(meta[0], meta[1], meta[2].requires_grad_(), meta[3], torch.bfloat16,
                                        None, False)
    with pytest.raises(RuntimeError, match=re.escape(NO_BACKWARD)):
        y.sum().backward()


# ---- Fp8Linear -----------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_fp8_linear_matches_linear(fake_kernel, mode, dtype):
    torch.manual_seed(0)
    lin = torch.nn.Linear(272, 136)
    layer = Fp8Linear.from_linear(lin, mode=mode)
    assert layer.weight_fp8.shape == (136, 272) and layer.weight_fp8.dtype == E4M3
    assert list(dict(layer.named_parameters())) == []
    x = rnd(3, 5, 272, seed=4, dtype=dtype)
    y = layer(x)
    ref = lin(x.float())
    assert y.shape == (3, 5, 136) and y.dtype == dtype
    assert (y.float() - ref).abs().max() <= 5e-2 * ref.abs().max()
    assert fake_kernel.calls[-1]["mode"] == mode
    fresh = Fp8Linear(272, 136, bias=True, mode=mode, bias_dtype=torch.float32)
    fresh.load_state_dict(layer.state_dict())
    torch.testing.assert_close(fresh(x), y, rtol=0, atol=0)


def test_fp8_linear_repr_and_errors(fake_kernel):
    layer = Fp8Linear.from_linear(torch.nn.Linear(64, 32, bias=False), mode="block")
    assert "in_features=64, out_features=32, mode='block'" in repr(layer) and layer.bias is None
    assert layer(torch.zeros(0, 64, dtype=torch.bfloat16)).shape == (0, 32)
    x = torch.randn(4, 64, dtype=torch.bfloat16, requires_grad=True)
    with pytest.raises(RuntimeError, match="^" + re.escape(NO_BACKWARD)):  # not a silent zero gradient for x
        layer(x).sum().backward()
    with pytest.raises(ValueError, match="^Fp8Linear: x has shape \\(4, 48\\); its last dimension must be 64"):
        layer(torch.zeros(4, 48, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="^Fp8Linear: x must be a bfloat16 or float16 tensor"):
        layer(torch.zeros(4, 64))
    with pytest.raises(ValueError, match="^Fp8Linear: in_features \\(60\\) must be a multiple of 16"):
        Fp8Linear.from_linear(torch.nn.Linear(60, 32))
    with pytest.raises(ValueError, match="^Fp8Linear: mode must be one of"):
        Fp8Linear.from_linear(torch.nn.Linear(64, 32), mode="rows")
    with pytest.raises(TypeError, match="^Fp8Linear.from_linear: expected a torch.nn.Linear"):
        Fp8Linear.from_linear(torch.nn.Conv1d(4, 4, 1))
