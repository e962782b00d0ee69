"""Edge and bad inputs at the public API without a GPU (the driver emulated by fake_gpu where a
call runs): a right result or one clear line, never a wrong result or an error from deep inside.
Each case here was once a wrong result or an obscure error."""
import math

import pytest
import torch

import gemm_ladder
from gemm_ladder.library import fastpath
from gemm_ladder.library import torch_ops  # noqa: F401  (registers the op)


def rnd(*shape, dtype=torch.float16, seed=0):
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).to(dtype)


def close(c, ref):
    return torch.allclose(c.float(), ref.float(), rtol=2e-2, atol=2e-2 * math.sqrt(ref.shape[-1] if ref.dim() else 1))


# ---- out= --------------------------------------------------------------------------------

def test_out_written_in_place_tells_autograd(gpu):
    """A tensor autograd saved and that matmul then overwrites in place must not pass as
    unchanged: backward raises torch's in-place error instead of using the new values."""
    a, b = rnd(16, 32), rnd(32, 24, seed=1)
    x = torch.randn(16, 24, dtype=torch.float16, requires_grad=True)
    w = torch.ones(16, 24, dtype=torch.float16)
    y = (x * w).float().sum()
    with torch.no_grad():
        v0 = w._version
        gemm_ladder.matmul(a, b, out=w)
        assert w._version > v0
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.backward()


def test_out_that_requires_grad_is_refused_in_grad_mode(gpu):
    a, b = rnd(16, 32), rnd(32, 24, seed=1)
    out = torch.zeros(16, 24, dtype=torch.float16, requires_grad=True)
    with pytest.raises(RuntimeError, match="out= does not support automatic differentiation"):
        gemm_ladder.matmul(a, b, out=out)
    with torch.no_grad():  # as torch's out= ops: allowed without grad
        gemm_ladder.matmul(a, b, out=out)
    assert close(out.detach(), a.float() @ b.float())


@pytest.mark.parametrize("which", ["a", "b"])
def test_out_aliasing_an_operand_goes_through_a_buffer(gpu, which):
    """out=a (a square product written over its input): the kernel would overwrite what other
    CTAs still read; the call writes a buffer and copies it (fake_gpu asserts every launch's C
    shares no byte with A or B)."""
    a, b = rnd(64, 64), rnd(64, 64, seed=1)
    ref = a.float() @ b.float()
    target = a if which == "a" else b
    c = gemm_ladder.matmul(a, b, out=target)
    assert c is target and close(target, ref)
    big = rnd(256, 64, seed=2)  # out a slice of a's rows, overlapping the rows read
    ref = big[:64].float() @ b.float()
    gemm_ladder.matmul(big[:64], b, out=big[32:96])
    assert close(big[32:96], ref)
    apart = rnd(128, 64, seed=3)  # disjoint halves of one tensor: written in place
    ref = apart[:64].float() @ b.float()
    gemm_ladder.matmul(apart[:64], b, out=apart[64:])
    assert close(apart[64:], ref) and gpu.launches[-1].maps[2].ptr == apart[64:].data_ptr()


# ---- views whose memory is not their value ---------------------------------------------------

def test_negated_views_read_and_written_with_their_sign(gpu):
    a, b = rnd(32, 48), rnd(48, 40, seed=1)
    na, nb = torch._neg_view(a), torch._neg_view(b)
    assert na.is_neg() and nb.is_neg()
    assert close(gemm_ladder.matmul(na, b), -(a.float() @ b.float()))
    assert close(gemm_ladder.matmul(na, nb), a.float() @ b.float())
    assert close(gemm_ladder.matmul_nt(a, torch._neg_view(b.t().contiguous())), -(a.float() @ b.float()))
    base = torch.zeros(32, 40, dtype=torch.float16)
    out = torch._neg_view(base)
    gemm_ladder.matmul(a, b, out=out)
    assert close(out.resolve_neg(), a.float() @ b.float()) and close(base, -(a.float() @ b.float()))


@pytest.mark.parametrize("layout", [torch.sparse_coo, torch.sparse_csr])
def test_sparse_operands_are_named(layout, gpu):
    a, b = rnd(16, 32), rnd(32, 24, seed=1)
    sa = a.float().to_sparse() if layout == torch.sparse_coo else a.float().to_sparse_csr()
    with pytest.raises(TypeError, match=r"matmul: a must be a dense \(strided\) tensor"):
        gemm_ladder.matmul(sa.half(), b)


# ---- autograd edges ------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(4, 0, 8), (4, 8, 0), (0, 8, 4)])
def test_backward_of_empty_products(gpu, shape):
    M, K, N = shape
    a = torch.randn(M, K, dtype=torch.float16, requires_grad=True)
    b = torch.randn(K, N, dtype=torch.float16, requires_grad=True)
    gemm_ladder.matmul(a, b).float().sum().backward()
    assert a.grad.shape == a.shape and b.grad.shape == b.shape
    assert not a.grad.any() and not b.grad.any()


def test_int_step_on_the_grad_path(gpu):
    a = rnd(64, 64).requires_grad_()
    b = rnd(64, 64, seed=1)
    c = gemm_ladder.matmul(a, b, step=9)
    assert close(c.detach(), a.detach().float() @ b.float())


@pytest.mark.parametrize("step", [1.5, [], object(), True])
def test_step_of_a_wrong_type_is_named(gpu, step):
    a, b = rnd(64, 64), rnd(64, 64, seed=1)
    with pytest.raises(TypeError, match="matmul: step must be a kernel key"):
        gemm_ladder.matmul(a, b, step=step)
    with pytest.raises(TypeError, match="matmul: step must be a kernel key"):
        gemm_ladder.matmul(a.clone().requires_grad_(), b, step=step)
    with pytest.raises(TypeError, match="warmup: step must be a kernel key"):
        gemm_ladder.warmup(step=step)


def test_non_tensor_operand_beside_a_grad_one(gpu):
    a = rnd(8, 8).requires_grad_()
    with pytest.raises(TypeError, match="matmul: b must be a torch.Tensor, got list"):
        gemm_ladder.matmul(a, [[1.0]])


# ---- flags and arguments -------------------------------------------------------------------

@pytest.mark.parametrize("value", ["no", 1, [], None])
def test_promises_must_be_bools(gpu, value):
    a, b = rnd(16, 32), rnd(32, 24, seed=1)
    with pytest.raises(TypeError, match="static_b must be True or False"):
        gemm_ladder.matmul(a, b, static_b=value)
    with pytest.raises(TypeError, match="static_b must be True or False"):
        gemm_ladder.matmul_nt(a, b.t(), static_b=value)
    with pytest.raises(TypeError, match="static_weight must be True or False"):
        gemm_ladder.linear(a, b.t(), static_weight=value)
    with pytest.raises(TypeError, match="static_weight must be True or False"):
        gemm_ladder.Linear(32, 24, static_weight=value)
    with pytest.raises(TypeError, match="mn_major must be True or False"):
        gemm_ladder.warmup(mn_major=value)


def test_static_b_never_reads_a_staged_copy_early(gpu):
    """b_early's loads run before the kernel waits for the grid before it: a b that a staging
    copy writes just before must be waited for, so such a call keeps the waiting build."""
    x = rnd(16, 4096)
    w_in_place = rnd(4096, 4096, seed=1)
    cfg = fastpath.config_for("mm", x, w_in_place.t(), static_b=True)
    assert cfg.b.direct and cfg.step.key.endswith("~b_early")
    w_staged = rnd(4096, 4099, seed=2)[:, :4096]  # rows 8198 bytes apart: not a 16-byte stride
    cfg = fastpath.config_for("mm", x, w_staged.t(), static_b=True)
    assert not cfg.b.direct and not cfg.step.key.endswith("~b_early")
    assert close(gemm_ladder.matmul(x, w_staged.t(), static_b=True), x.float() @ w_staged.float().t())


def test_linear_names_its_weight_and_takes_one_row(gpu):
    x = rnd(5, 32)
    with pytest.raises(ValueError, match=r"linear: weight must be a 2-D \(out_features, in_features\) tensor, got list"):
        gemm_ladder.linear(x, [[1.0]])
    with pytest.raises(ValueError, match=r"linear: weight must be a 2-D .* got shape \(32,\)"):
        gemm_ladder.linear(x, rnd(32))
    with pytest.raises(TypeError, match="Linear.from_linear takes a torch.nn.Linear, got str"):
        gemm_ladder.Linear.from_linear("x")
    w = rnd(24, 32, seed=1)
    y = gemm_ladder.linear(x[0], w)  # 1-D input, as torch.nn.functional.linear
    assert y.shape == (24,) and close(y, x[0].float() @ w.float().t())
    lin = gemm_ladder.Linear(32, 24, bias=True, dtype=torch.float16)
    assert lin(x[0]).shape == (24,)


def test_best_step_arguments():
    assert gemm_ladder.best_step(64, 64, 64, dtype="fp16").key == gemm_ladder.best_step(64, 64, 64).key
    assert gemm_ladder.best_step(64, 64, 64, dtype=torch.bfloat16).key == gemm_ladder.best_step(64, 64, 64,
                                                                                                 "bfloat16").key
    with pytest.raises(TypeError, match="best_step: dtype must be float16 or bfloat16"):
        gemm_ladder.best_step(64, 64, 64, dtype="float32")
    for bad in ("a", None, 4096.5, True, 0):
        with pytest.raises(TypeError, match="best_step: M must be a positive int"):
            gemm_ladder.best_step(bad, 64, 64)
    with pytest.raises(ValueError, match="over 2147483647: the kernels index with 32-bit ints"):
        gemm_ladder.best_step(1 << 31, 64, 64)


def test_warmup_dtypes_are_checked_before_the_device():
    with pytest.raises(TypeError, match="warmup: dtypes must be torch.float16 and/or torch.bfloat16"):
        gemm_ladder.warmup(dtypes=[torch.float32])
    with pytest.raises(TypeError, match="warmup: dtypes must be"):
        gemm_ladder.warmup(dtypes="fp16")
    with pytest.raises(TypeError, match="warmup: device must be a CUDA device"):
        gemm_ladder.warmup(1.5)


def test_fast_accum_must_be_a_bool():
    with pytest.raises(TypeError, match="scaled_mm: use_fast_accum must be True or False"):
        gemm_ladder.scaled_mm(None, None, None, None, use_fast_accum="no")


def test_attention_flag_types_are_named_fully():
    np = pytest.importorskip("numpy")
    q = torch.zeros(1, 1, 8, 64, dtype=torch.float16)
    with pytest.raises(TypeError, match=r"attention: causal must be a bool, got numpy\.bool"):
        gemm_ladder.attention(q, q, q, causal=np.bool_(True))


# ---- fp8 quantization of non-finite values -------------------------------------------------

@pytest.mark.parametrize("mode", ["tensor", "row", "block"])
def test_an_infinity_spoils_only_itself(mode):
    """e4m3 has no infinity: an Inf (or NaN) becomes NaN in x_fp8, and the rest of its scale
    group keeps its values (its scale comes from the finite ones)."""
    x = torch.randn(4, 256)
    x[1, 3], x[2, 5] = float("inf"), float("nan")
    q, s = gemm_ladder.quantize_fp8(x, mode)
    back = gemm_ladder.dequantize_fp8(q, s, mode)
    bad = torch.zeros_like(x, dtype=torch.bool)
    bad[1, 3] = bad[2, 5] = True
    assert back[bad].isnan().all() and back[~bad].isfinite().all()
    assert torch.allclose(back[~bad], x[~bad], rtol=0.07, atol=1e-3 * x[~bad].abs().max())


# ---- transforms and tensors whose value is not their memory ---------------------------------

def test_forward_mode_duals_are_named_not_dropped(gpu):
    """A dual's tangent would be dropped by a raw launch (a silent zero Jacobian): one line."""
    import torch.autograd.forward_ad as fwAD
    a, b = rnd(8, 16), rnd(16, 4, seed=1)
    with fwAD.dual_level():
        dual = fwAD.make_dual(a, torch.ones_like(a))
        with pytest.raises(NotImplementedError, match="matmul: a is a forward-mode AD dual tensor"):
            gemm_ladder.matmul(dual, b)
        with pytest.raises(NotImplementedError, match="forward-mode AD dual"):
            gemm_ladder.linear(dual, b.t().contiguous())
        assert close(gemm_ladder.matmul(a, b), a.float() @ b.float())  # plain tensors inside a level: fine
    with pytest.raises(NotImplementedError, match="forward-mode AD"):
        torch.autograd.functional.jacobian(lambda x: gemm_ladder.matmul(x, b), a, strategy="forward-mode",
                                           vectorize=True)


def test_vmap_runs_per_slice_and_func_grad_is_named(gpu):
    import torch.func as tf
    xs, b = rnd(3, 8, 16), rnd(16, 4, seed=1)
    ys = tf.vmap(lambda x: gemm_ladder.matmul(x, b))(xs)
    assert ys.shape == (3, 8, 4) and close(ys, xs.float() @ b.float())
    with pytest.raises(NotImplementedError, match="matmul: a is a torch.func transform's tensor"):
        tf.grad(lambda x: gemm_ladder.matmul(x, b).float().sum())(xs[0])


def test_wrapper_subclass_without_memory_is_named(gpu):
    """A subclass that wraps another tensor (DTensor's, torchao's pattern) has no data pointer
    of its own: refused in one line rather than launched on address 0."""
    from torch.utils import _pytree as pytree

    class Wrap(torch.Tensor):
        @staticmethod
        def __new__(cls, inner):
            return torch.Tensor._make_wrapper_subclass(cls, inner.shape, dtype=inner.dtype, device=inner.device)

        def __init__(self, inner):
            self.inner = inner

        @classmethod
        def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
            unwrap = lambda t: t.inner if isinstance(t, Wrap) else t  # noqa: E731
            return func(*pytree.tree_map(unwrap, args), **pytree.tree_map(unwrap, kwargs or {}))

    a, b = rnd(8, 16), rnd(16, 4, seed=1)
    with pytest.raises(TypeError, match=r"matmul: a \(Wrap\) has no memory of its own"):
        gemm_ladder.matmul(Wrap(a), b)


def test_jit_trace_records_the_op(gpu):
    """torch.jit.trace of a function calling matmul: the custom op is recorded, so the trace
    computes the product of new inputs (a raw launch would leave an empty tensor in the trace)."""
    import warnings
    b = rnd(16, 4, seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(lambda x: gemm_ladder.matmul(x, b), (rnd(8, 16),))
    x = rnd(8, 16, seed=5)
    assert close(traced(x), x.float() @ b.float())


def test_fp8_linear_keeps_its_weight_through_casts_and_loads():
    lin = torch.nn.Linear(64, 32, bias=True)
    layer = gemm_ladder.Fp8Linear.from_linear(lin, mode="row")
    w, s = layer.weight_fp8.clone(), layer.weight_scale.clone()
    layer.to(torch.bfloat16)
    layer.half()
    assert layer.weight_fp8.dtype == torch.float8_e4m3fn and layer.weight_scale.dtype == torch.float32
    assert torch.equal(layer.weight_fp8.view(torch.uint8), w.view(torch.uint8)) and torch.equal(layer.weight_scale, s)
    assert layer.bias.dtype == torch.float16  # the bias is cast as nn.Linear's would be
    other = gemm_ladder.Fp8Linear.from_linear(lin, mode="row", dtype=torch.float8_e5m2)
    with pytest.raises(RuntimeError, match="weight_fp8 is torch.float8_e5m2 in the state dict"):
        layer.load_state_dict(other.state_dict())
    with pytest.raises(AttributeError, match="Fp8Linear.mode is fixed by its quantized weight"):
        layer.mode = "tensor"


def test_vmap_over_b_too(gpu):
    import torch.func as tf
    x, bs = rnd(8, 16), rnd(3, 16, 4, seed=1)
    ys = tf.vmap(lambda w: gemm_ladder.matmul(x, w))(bs)
    assert ys.shape == (3, 8, 4) and close(ys, x.float() @ bs.float())
    xs = rnd(3, 8, 16, seed=2)
    ys = tf.vmap(gemm_ladder.matmul)(xs, bs)
    assert close(ys, xs.float() @ bs.float())


@pytest.mark.parametrize("step", ["gemm:nope", 12])
def test_unknown_step_through_the_op_is_one_line(gpu, step):
    """A call that goes through the custom op (an operand requires grad) looks its `step` up
    before the op, as the direct path does: an unknown key is named in one line."""
    a, b = rnd(16, 32).requires_grad_(), rnd(32, 24, seed=1)
    with pytest.raises(KeyError, match="unknown (step|kernel)") as e:
        gemm_ladder.matmul(a, b, step=step)
    assert "\n" not in str(e.value)
    st = gemm_ladder.matmul(a.detach().requires_grad_(), b, step=9)  # a ladder step's number
    assert close(st, a.detach() @ b)
