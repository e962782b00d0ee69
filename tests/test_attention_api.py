"""The attention door without a GPU: every rejected call as one clear line before anything
launches, what the runner is handed (TMA-readable operands, the scale, the step), empty
queries, the custom op's fake, torch.compile and the refused backward, with the kernel
replaced by a float64 reference; and step A1's loop with the GEMM replaced by torch's."""
import math
import re
from types import SimpleNamespace

import pytest
import torch

import gemm_ladder
from gemm_ladder.library import attention_a1, attention_api, layout
from gemm_ladder.library.attention_api import NO_BACKWARD, attention, tma_readable

F16, BF16 = torch.float16, torch.bfloat16


def rnd(*shape, seed=0, dtype=F16, scale=1.0):
    g = torch.Generator().manual_seed(seed + 31 * sum(shape))
    return (torch.randn(*shape, generator=g) * scale).to(dtype)


def qkv(B=2, Hq=4, Hkv=2, Sq=17, Sk=33, D=64, dtype=F16, seed=0):
    return rnd(B, Hq, Sq, D, seed=seed, dtype=dtype), rnd(B, Hkv, Sk, D, seed=seed + 1, dtype=dtype), \
        rnd(B, Hkv, Sk, D, seed=seed + 2, dtype=dtype)


def reference(q, k, v, causal, scale):
    """(o, lse) in float64: softmax(scale · q kᵀ + causal mask) v, kv heads repeated for GQA."""
    G = q.shape[1] // k.shape[1]
    qd, kd, vd = q.double(), k.double().repeat_interleave(G, dim=1), v.double().repeat_interleave(G, dim=1)
    s = qd @ kd.transpose(-1, -2) * scale
    if causal:
        Sq, Sk = s.shape[-2:]
        s = s.masked_fill(torch.ones(Sq, Sk, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    return torch.softmax(s, dim=-1) @ vd, lse


class FakeRunner:
    """run_attention's contract checked on every call, then the float64 reference."""

    def __init__(self):
        self.calls = []

    def __call__(self, q, k, v, *, causal, scale, return_lse, step=None, checked=False):
        for t in (q, k, v):
            assert tma_readable(t), t.stride()
            assert t.dtype == q.dtype and t.device == q.device
        assert checked, "the door validates, so the runner need not"
        assert isinstance(scale, float) and isinstance(causal, bool) and isinstance(return_lse, bool)
        assert q.shape[2] >= 1 and k.shape[2] >= 1
        self.calls.append(dict(q=q, k=k, v=v, causal=causal, scale=scale, return_lse=return_lse, step=step))
        o, lse = reference(q, k, v, causal, scale)
        return o.to(q.dtype).contiguous(), (lse.float() if return_lse else None)


@pytest.fixture
def fake_kernel(monkeypatch):
    run = FakeRunner()
    monkeypatch.setattr(attention_api, "_run_attention", run)
    monkeypatch.setattr(attention_api, "_check_gpu", lambda device: None)
    return run


# ---- rejections: one line, before anything launches ----------------------------------------

def _bad(**change):
    """A call's arguments with `change` applied; the tensors are valid ones otherwise."""
    q, k, v = qkv()
    kw = dict(q=q, k=k, v=v)
    kw.update(change)
    return kw


BAD_CALLS = [
    ("q a list", lambda: _bad(q=[1.0]), TypeError, "attention: q must be a torch.Tensor, got list"),
    ("v None", lambda: _bad(v=None), TypeError, "attention: v must be a torch.Tensor, got NoneType"),
    ("fp32", lambda: _bad(q=rnd(2, 4, 17, 64, dtype=torch.float32)), TypeError,
     "attention: q has dtype torch.float32; use torch.float16 or torch.bfloat16"),
    ("mixed", lambda: _bad(k=rnd(2, 2, 33, 64, dtype=BF16)), TypeError,
     "attention: q, k and v must have one dtype, got torch.float16, torch.bfloat16 and torch.float16"),
    ("3-D", lambda: _bad(q=rnd(4, 17, 64)), ValueError,
     r"attention: q must be 4-D \(batch, heads, seq, head_dim\), got shape \(4, 17, 64\)"),
    ("batch", lambda: _bad(q=rnd(3, 4, 17, 64)), ValueError, "attention: batch sizes differ: q has 3, k and v have 2"),
    ("k v shapes", lambda: _bad(v=rnd(2, 2, 32, 64)), ValueError,
     r"attention: k and v must have one shape, got \(2, 2, 33, 64\) and \(2, 2, 32, 64\)"),
    ("heads", lambda: _bad(q=rnd(2, 3, 17, 64)), ValueError,
     "attention: q has 3 heads, k and v 2: Hq must be a multiple of Hkv >= 1"),
    ("no kv heads", lambda: _bad(k=rnd(2, 0, 33, 64), v=rnd(2, 0, 33, 64)), ValueError,
     "attention: q has 4 heads, k and v 0"),
    ("dims differ", lambda: _bad(q=rnd(2, 4, 17, 128)), ValueError,
     "attention: head dims differ: q has 128, k and v have 64; they must be equal"),
    ("dim 96", lambda: _bad(q=rnd(2, 4, 17, 96), k=rnd(2, 2, 33, 96), v=rnd(2, 2, 33, 96)), ValueError,
     "attention: head dim 96 is not supported; supported: 64, 128, 256"),
    ("Sk 0", lambda: _bad(k=rnd(2, 2, 0, 64), v=rnd(2, 2, 0, 64)), ValueError,
     "attention: k and v have sequence length 0"),
    ("mask", lambda: _bad(attn_mask=torch.ones(17, 33, dtype=torch.bool)), NotImplementedError,
     r"attention: attn_mask is not supported \(use causal=True"),
    ("dropout", lambda: _bad(dropout_p=0.1), NotImplementedError, "attention: dropout_p=0.1 is not supported"),
    ("dropout str", lambda: _bad(dropout_p="0"), TypeError, "attention: dropout_p must be a number, got str"),
    ("scale nan", lambda: _bad(scale=float("nan")), ValueError,
     "attention: scale must be a finite positive number, got nan"),
    ("scale inf", lambda: _bad(scale=float("inf")), ValueError,
     "attention: scale must be a finite positive number, got inf"),
    ("scale 0", lambda: _bad(scale=0.0), ValueError, "attention: scale must be a finite positive number, got 0.0"),
    ("scale < 0", lambda: _bad(scale=-0.125), ValueError, "attention: scale must be a finite positive number"),
    ("scale str", lambda: _bad(scale="0.1"), ValueError,
     "attention: scale must be a finite positive number, got '0.1'"),
    ("scale tensor", lambda: _bad(scale=torch.tensor(0.1)), TypeError, "attention: scale must be a Python number, got a tensor"),
    ("step", lambda: _bad(step="A9"), ValueError,
     "attention: unknown step 'A9'; use None \\(the library's choice\\) or one of A1, A2, A3, A4, A5"),
    ("causal", lambda: _bad(causal="yes"), TypeError, "attention: causal must be a bool, got str"),
    ("return_lse", lambda: _bad(return_lse=1), TypeError, "attention: return_lse must be a bool, got int"),
    ("no gqa", lambda: _bad(enable_gqa=False), ValueError,
     "attention: q has 4 heads and k 2, but enable_gqa=False: pass enable_gqa=True"),
    ("gqa str", lambda: _bad(enable_gqa="no"), TypeError, "attention: enable_gqa must be None or a bool, got str"),
    ("devices", lambda: _bad(v=rnd(2, 2, 33, 64).to("meta")), ValueError,
     "attention: v is on meta but q is on cpu: q, k and v must be on one CUDA device"),
]


@pytest.mark.parametrize("make,exc,match", [c[1:] for c in BAD_CALLS], ids=[c[0] for c in BAD_CALLS])
def test_rejections_are_one_clear_line_and_launch_nothing(fake_kernel, make, exc, match):
    kw = make()
    with pytest.raises(exc, match="^" + match) as info:
        attention(kw.pop("q"), kw.pop("k"), kw.pop("v"), **kw)
    assert "\n" not in str(info.value)
    assert fake_kernel.calls == []


def test_cpu_tensors_are_rejected_in_one_line():
    with pytest.raises(ValueError, match="^attention: q is on cpu; gemm_ladder's attention kernels need CUDA tensors$"):
        attention(*qkv())
    with pytest.raises(ValueError, match="^attention: q is on cpu"):  # empty queries too: no silent CPU result
        attention(*qkv(Sq=0))


def test_no_hopper_is_one_clear_line():
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    with pytest.raises(RuntimeError, match="^attention: no CUDA GPU is available") as info:
        attention_api._check_gpu(torch.device("cuda"))
    assert "\n" not in str(info.value)


def test_enable_gqa_true_and_equal_heads_are_accepted(fake_kernel):
    q, k, v = qkv(Hq=4, Hkv=4)
    assert attention(q, k, v, enable_gqa=False).shape == q.shape
    q, k, v = qkv(Hq=4, Hkv=1)
    assert attention(q, k, v, enable_gqa=True).shape == q.shape
    assert len(fake_kernel.calls) == 2


# ---- what the runner is handed -----------------------------------------------------------

def _as_bshd(t):
    """t (B, H, S, D) stored as (B, S, H, D): the transposed view SDPA callers pass."""
    return t.transpose(1, 2).contiguous().transpose(1, 2)


def _padded_rows(t, pad):
    """t with each row of D elements inside a wider buffer (row stride D + pad)."""
    B, H, S, D = t.shape
    buf = torch.zeros(B, H, S, D + pad, dtype=t.dtype)
    buf[..., :D] = t
    return buf[..., :D]


def _misaligned(t):
    flat = torch.zeros(t.numel() + 1, dtype=t.dtype)
    view = flat[1:].view(t.shape)
    view.copy_(t)
    return view


def _odd_unit_stride(t):
    """t with a size-1 batch whose stride no other dimension's multiple is (3 elements)."""
    assert t.shape[0] == 1
    return t.contiguous().as_strided(t.shape, (3,) + t.stride()[1:])


@pytest.mark.parametrize("make,in_place", [
    (lambda t: t, True), (_as_bshd, True), (lambda t: _padded_rows(t, 8), True),
    (lambda t: _padded_rows(t, 4), False), (lambda t: t[..., ::1].transpose(-1, -2).contiguous().transpose(-1, -2),
                                            False),
    (_misaligned, False), (_odd_unit_stride, False)],
    ids=["contiguous", "bshd", "pad8", "pad4", "d-major", "misaligned", "size1-stride3"])
def test_operands_reach_the_runner_tma_readable(fake_kernel, make, in_place):
    q0, k0, v0 = qkv(B=1, Hq=4, Hkv=2, Sq=24, Sk=40)
    q, k, v = make(q0), make(k0), make(v0)
    assert tma_readable(q) == in_place
    o, lse = attention(q, k, v, causal=True, return_lse=True)
    call = fake_kernel.calls[-1]
    for name, sent, given in (("q", call["q"], q), ("k", call["k"], k), ("v", call["v"], v)):
        assert tma_readable(sent), (name, sent.stride())
        assert (sent.data_ptr() == given.data_ptr()) == in_place, name  # read in place, or copied
        assert torch.equal(sent, given)
    ref, ref_lse = reference(q0, k0, v0, True, 1 / 8)
    torch.testing.assert_close(o, ref.to(F16), rtol=0, atol=0)
    torch.testing.assert_close(lse, ref_lse.float(), rtol=0, atol=0)


@pytest.mark.parametrize("D", [64, 128, 256])
def test_scale_defaults_to_one_over_sqrt_d(fake_kernel, D):
    q, k, v = qkv(Sq=5, Sk=9, D=D)
    o = attention(q, k, v)
    assert fake_kernel.calls[-1]["scale"] == 1 / math.sqrt(D)
    torch.testing.assert_close(o, reference(q, k, v, False, 1 / math.sqrt(D))[0].to(F16), rtol=0, atol=0)
    attention(q, k, v, scale=2)  # an int is a number
    assert fake_kernel.calls[-1]["scale"] == 2.0 and isinstance(fake_kernel.calls[-1]["scale"], float)


@pytest.mark.parametrize("dtype", [F16, BF16])
@pytest.mark.parametrize("causal", [False, True])
def test_return_lse_shapes_and_flags(fake_kernel, dtype, causal):
    q, k, v = qkv(B=3, Hq=8, Hkv=1, Sq=7, Sk=5, D=128, dtype=dtype)
    o = attention(q, k, v, causal=causal)
    assert isinstance(o, torch.Tensor) and o.shape == (3, 8, 7, 128) and o.dtype == dtype
    assert fake_kernel.calls[-1]["return_lse"] is False and fake_kernel.calls[-1]["causal"] is causal
    o, lse = attention(q, k, v, causal=causal, return_lse=True)
    assert o.shape == (3, 8, 7, 128) and o.dtype == dtype and o.is_contiguous()
    assert lse.shape == (3, 8, 7) and lse.dtype == torch.float32
    assert fake_kernel.calls[-1]["return_lse"] is True


def test_step_is_passed_to_the_runner(fake_kernel):
    q, k, v = qkv()
    for step in (None, "A2", "A3", "A4", "A5"):
        attention(q, k, v, step=step)
        assert fake_kernel.calls[-1]["step"] == step


@pytest.mark.parametrize("shape", [(2, 4, 0), (0, 4, 17), (2, 0, 17)], ids=["Sq=0", "B=0", "H=0"])
def test_empty_queries_launch_nothing(fake_kernel, shape):
    B, Hq, Sq = shape
    q = rnd(B, Hq, Sq, 64)
    k = v = rnd(B, 2 if Hq else 1, 33, 64)
    o, lse = attention(q, k, v, causal=True, return_lse=True)
    assert o.shape == (B, Hq, Sq, 64) and o.dtype == F16 and lse.shape == (B, Hq, Sq) and lse.dtype == torch.float32
    assert attention(q, k, v).shape == (B, Hq, Sq, 64)
    assert fake_kernel.calls == []


def test_lazy_export():
    assert gemm_ladder.attention is attention and "attention" in gemm_ladder.__all__


# ---- the custom op -----------------------------------------------------------------------

def test_fake_gives_shapes_and_dtypes_on_meta():
    q, k, v = (t.to("meta") for t in qkv(B=2, Hq=8, Hkv=2, Sq=3, Sk=300, D=256, dtype=BF16))
    o, lse = torch.ops.gemm_ladder.attention(q, k, v, True, 0.0625, True, "A3")
    assert o.shape == (2, 8, 3, 256) and o.dtype == BF16 and o.device.type == "meta" and o.is_contiguous()
    assert lse.shape == (2, 8, 3) and lse.dtype == torch.float32
    o, lse = torch.ops.gemm_ladder.attention(q, k, v, False, 0.0625, False, None)
    assert o.shape == (2, 8, 3, 256) and lse.shape == (0,)
    with pytest.raises(ValueError, match="^attention: head dims differ"):
        torch.ops.gemm_ladder.attention(q[..., :128], k, v, False, 0.0625, False, None)


def test_fused_steps_count_their_tiles_in_32_bits():
    q = torch.empty((65536, 32768, 1, 64), dtype=F16, device="meta")  # 2^31 tiles of 64 query rows
    k = v = torch.empty((65536, 1, 4, 64), dtype=F16, device="meta")
    for step in (None, "A5"):
        with pytest.raises(ValueError, match=r"^attention: B=65536 x Hq=32768 x Sq=1 is more tiles than the fused "
                                             r"kernels count \(2,147,483,647 of 64 query rows\); step 'A1' takes any$"):
            torch.ops.gemm_ladder.attention(q, k, v, False, 0.125, False, step)
    o, _ = torch.ops.gemm_ladder.attention(q[:, :2], k, v, False, 0.125, False, "A5")
    assert o.shape == (65536, 2, 1, 64)



def test_fake_under_fake_tensor_mode():
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        q, k, v = (mode.from_tensor(t) for t in qkv(Sq=9, Sk=12, D=128))
        o, lse = torch.ops.gemm_ladder.attention(q, k, v, True, 0.1, True, None)
    assert o.shape == (2, 4, 9, 128) and o.dtype == F16 and lse.shape == (2, 4, 9)


@pytest.mark.parametrize("return_lse", [False, True])
def test_opcheck(fake_kernel, return_lse):
    q, k, v = qkv(Sq=9, Sk=12)
    torch.library.opcheck(torch.ops.gemm_ladder.attention.default, (q, k, v, True, 0.125, return_lse, None),
                          test_utils=("test_schema", "test_faketensor"))


def test_torch_compile_fullgraph_goes_through_the_op(fake_kernel):
    torch._dynamo.reset()
    q, k, v = qkv(Hq=8, Hkv=2, Sq=16, Sk=20, D=64)

    def f(q, k, v):
        o, lse = attention(q, k, v, causal=True, return_lse=True)
        return o.float() * 2, lse + 1

    o, lse = torch.compile(f, fullgraph=True, backend="aot_eager")(q, k, v)
    ref, ref_lse = reference(q, k, v, True, 1 / 8)
    torch.testing.assert_close(o, 2 * ref.to(F16).float(), rtol=0, atol=0)
    torch.testing.assert_close(lse, ref_lse.float() + 1)
    assert len(fake_kernel.calls) == 1


def test_backward_raises_one_clear_line(fake_kernel):
    q, k, v = qkv()
    o = attention(q.requires_grad_(), k, v)
    assert o.requires_grad
    with pytest.raises(RuntimeError, match="^" + re.escape(NO_BACKWARD)) as info:
        o.float().sum().backward()
    assert "\n" not in str(info.value)
    o, lse = attention(q, k, v.requires_grad_(), return_lse=True)
    with pytest.raises(RuntimeError, match="^" + re.escape(NO_BACKWARD)):
        lse.sum().backward()
    with torch.no_grad():
        assert not attention(q, k, v).requires_grad
    with pytest.raises(ValueError, match="^attention: head dim 96"):  # checked before the dispatcher
        attention(rnd(2, 4, 17, 96).requires_grad_(), rnd(2, 2, 33, 96), rnd(2, 2, 33, 96))


# ---- step A1 with torch's GEMM in place of the library's ---------------------------------

class TorchGemm:
    """fastpath.run's contract for A1's calls: the product in the operands' dtype (fp32
    accumulation), a fresh result with the library's row stride (rounded up to 8)."""

    def __init__(self):
        self.shapes = []

    def run(self, kind, a, b, out=None, step=None):
        assert step is None and a.dim() == b.dim() == 2 and a.dtype == b.dtype
        prod = (a.float() @ (b.float().t() if kind == "nt" else b.float())).to(a.dtype)
        self.shapes.append((kind, tuple(a.shape), tuple(b.shape)))
        if out is not None:
            assert out.shape == prod.shape and out.dtype == a.dtype
            return out.copy_(prod)
        shape, strides = layout.result_strides(tuple(prod.shape[:-1]), prod.shape[-1])
        return torch.empty_strided(shape, strides, dtype=a.dtype).copy_(prod)


@pytest.fixture
def torch_gemm(monkeypatch, fake_kernel):
    gemm = TorchGemm()
    monkeypatch.setattr(attention_a1, "fastpath", SimpleNamespace(run=gemm.run))
    return gemm


# S and P are rounded to the inputs' dtype: fp16's 11 bits and bf16's 8 bits
A1_TOL = {F16: 4e-3, BF16: 3e-2}


@pytest.mark.parametrize("dtype", [F16, BF16])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("B,Hq,Hkv,Sq,Sk,D", [(1, 1, 1, 1, 1, 64), (2, 4, 4, 17, 17, 64), (1, 8, 2, 33, 13, 128),
                                              (2, 8, 1, 5, 40, 256), (1, 2, 1, 50, 9, 64)])
def test_a1_matches_the_reference(torch_gemm, fake_kernel, dtype, causal, B, Hq, Hkv, Sq, Sk, D):
    q, k, v = qkv(B, Hq, Hkv, Sq, Sk, D, dtype=dtype, seed=Sq + Sk)
    q = _as_bshd(q)
    o, lse = attention(q, k, v, causal=causal, return_lse=True, step="A1")
    assert o.shape == (B, Hq, Sq, D) and o.dtype == dtype and o.is_contiguous()
    assert lse.shape == (B, Hq, Sq) and lse.dtype == torch.float32
    ref, ref_lse = reference(q, k, v, causal, 1 / math.sqrt(D))
    assert (o.double() - ref).abs().max() <= A1_TOL[dtype]
    assert (lse.double() - ref_lse).abs().max() <= A1_TOL[dtype] * ref_lse.abs().max().clamp(min=1)
    G = Hq // Hkv
    assert torch_gemm.shapes[:2] == [("nt", (G * Sq, D), (Sk, D)), ("mm", (G * Sq, Sk), (Sk, D))]
    assert len(torch_gemm.shapes) == 2 * B * Hkv  # one GEMM pair per (batch, kv head)
    assert fake_kernel.calls == []  # A1 is the door's own, not the runner's
    assert attention(q, k, v, causal=causal, step="A1").shape == o.shape


def test_a1_causal_rows_see_only_earlier_keys(torch_gemm):
    """Changing key j changes only the outputs of queries i >= j (top-left aligned)."""
    q, k, v = qkv(B=1, Hq=2, Hkv=1, Sq=12, Sk=20, D=64, dtype=torch.float16)
    o1 = attention(q, k, v, causal=True, step="A1")
    k2, v2 = k.clone(), v.clone()
    k2[:, :, 7:] += 1
    v2[:, :, 7:] -= 1
    o2 = attention(q, k2, v2, causal=True, step="A1")
    assert torch.equal(o1[:, :, :7], o2[:, :, :7]) and not torch.equal(o1[:, :, 7:], o2[:, :, 7:])
