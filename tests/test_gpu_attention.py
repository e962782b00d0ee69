"""The attention door on the GPU: every step against a float64 reference written here
(softmax(scale · Q Kᵀ + causal mask) V, lse = logsumexp of the scaled scores), held to twice
the error of torch's own SDPA in the same dtype; GQA/MQA, Sq != Sk, the (B, S, H, D)
transposed views, large logits, repeatability, torch.compile, CUDA graphs, and the refused
backward and mask."""
import importlib.util
import math
import re

import pytest

from gpu_util import needs_gpu

pytestmark = [needs_gpu, pytest.mark.gpu]

STEPS = ("A1", "A2", "A3", "A4", "A5", "A5:p", "A5:c3", "A5:c3p", "A5:d", "A5:c3d")  # the ladder and the library's builds
EPS = {"float16": 1e-3, "bfloat16": 8e-3}  # on top of twice torch SDPA's own error


def _torch():
    import torch
    return torch


def _api():
    from gemm_ladder.library import attention_api
    return attention_api


def require(step):
    """Skip a step that is not built yet: A1 is the door's own; step None needs the runner;
    the fused ones need their key in families.attention.STEPS."""
    if step == "A1":
        return
    if importlib.util.find_spec("gemm_ladder.library.attention_runner") is None:
        pytest.skip("gemm_ladder.library.attention_runner is not there yet")
    if step is None:
        return
    if importlib.util.find_spec("gemm_ladder.families.attention") is None:
        pytest.skip("gemm_ladder.families.attention is not there yet")
    from gemm_ladder.families import attention as family
    if step not in family.STEPS and step not in family.LIBRARY:
        pytest.skip(f"step {step} is not in gemm_ladder.families.attention")


def require_head_dim(step, D):
    """Skip a library build at a head dim it does not take (A5:c3 holds head dim 64 only)."""
    if step not in (None, "A1"):
        from gemm_ladder.families import attention as family
        if D not in dict(family.get(step).blocks):
            pytest.skip(f"{step} does not take head dim {D}")


def bshd(B, H, S, D, dtype, g, mul=1.0):
    """A (B, H, S, D) view of a (B, S, H, D) tensor, the layout models keep."""
    torch = _torch()
    return (torch.randn((B, S, H, D), device="cuda", generator=g) * mul).to(dtype).transpose(1, 2)


def make(B, Hq, Hkv, Sq, Sk, D, dtype_name, seed=0, mul=1.0):
    torch = _torch()
    dtype = getattr(torch, dtype_name)
    g = torch.Generator(device="cuda").manual_seed(seed)
    return bshd(B, Hq, Sq, D, dtype, g, mul), bshd(B, Hkv, Sk, D, dtype, g, mul), bshd(B, Hkv, Sk, D, dtype, g)


def scores(q, k, scale, round_to=None):
    """scale · Q Kᵀ in float64, kv heads repeated (GQA); round_to: the raw scores rounded to
    that dtype first, as step A1's GEMM writes them."""
    G = q.shape[1] // k.shape[1]
    s = q.double() @ k.double().repeat_interleave(G, dim=1).transpose(-1, -2)
    if round_to is not None:
        s = s.to(round_to).double()
    return s * scale


def reference(q, k, v, causal, scale, round_to=None):
    """(o, lse) in float64."""
    torch = _torch()
    s = scores(q, k, scale, round_to)
    if causal:
        Sq, Sk = s.shape[-2:]
        s = s.masked_fill(torch.ones((Sq, Sk), dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    G = q.shape[1] // k.shape[1]
    return torch.softmax(s, dim=-1) @ v.double().repeat_interleave(G, dim=1), torch.logsumexp(s, dim=-1)


def sdpa_error(q, k, v, causal, ref):
    """Max |torch SDPA - ref| in the inputs' dtype (its fused backends: flash, cuDNN, efficient)."""
    torch = _torch()
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    return (o.double() - ref).abs().max().item()


def poison_free_memory(nbytes):
    """Leave a NaN-filled block in torch's caching allocator, which the next allocation of
    that size is likely to get back: output the kernel does not write then shows as NaN."""
    torch = _torch()
    torch.full((nbytes // 4 + 1,), float("nan"), device="cuda")


def check(o, lse, q, k, v, causal, scale, step, dtype_name, what):
    """o against the reference (twice SDPA's error + EPS), no NaN; lse within its bound."""
    torch = _torch()
    assert o.shape == q.shape and o.dtype == q.dtype and o.is_contiguous(), what
    assert torch.isfinite(o).all(), f"{what}: non-finite output"
    ref, ref_lse = reference(q, k, v, causal, scale)
    err, bound = (o.double() - ref).abs().max().item(), 2 * sdpa_error(q, k, v, causal, ref) + EPS[dtype_name]
    assert err <= bound, f"{what}: max |o - ref| = {err:.3g} > {bound:.3g} (2 x torch SDPA's + {EPS[dtype_name]})"
    if lse is not None:
        assert lse.shape == q.shape[:3] and lse.dtype == torch.float32, what
        check_lse(lse, ref_lse, q, k, scale, step, what)


def check_lse(lse, ref_lse, q, k, scale, step, what):
    """lse within 1e-3 + 1e-5 |lse| of the reference; for step A1 plus scale x one ulp (in the
    dtype) of the largest raw score: A1's GEMM rounds each score to the dtype, and lse moves
    by at most as much as the scores do (the ulp covers the rounding and the fp32 sum)."""
    torch = _torch()
    lerr = (lse.double() - ref_lse).abs().max().item()
    bound = 1e-3 + 1e-5 * ref_lse.abs().max().item()
    if step == "A1":
        smax = scores(q, k, 1.0).abs().max().item()
        bound += scale * torch.finfo(q.dtype).eps * 2.0 ** math.floor(math.log2(max(smax, 1e-30)))
    assert lerr <= bound, f"{what}: max |lse - ref| = {lerr:.3g} > {bound:.3g}"


# (B, Hq, Hkv, Sq, Sk, D, causal): every S of (1, 17, 128, 200, 1000), each D, both masks,
# Sq < Sk and Sq > Sk, GQA (8 / 2) and MQA (8 / 1); small batch x heads
CASES = [(1, 2, 2, 1, 1, 64, False), (1, 2, 2, 17, 17, 128, True), (2, 2, 2, 128, 128, 256, True),
         (1, 8, 2, 200, 200, 64, False), (1, 8, 1, 1000, 1000, 128, True), (1, 4, 4, 17, 200, 64, True),
         (1, 4, 2, 200, 17, 256, True), (2, 8, 1, 1, 1000, 128, False), (1, 2, 2, 128, 1000, 256, False),
         (1, 8, 2, 1000, 128, 64, True),
         (4, 16, 4, 1000, 1000, 64, True), (4, 16, 4, 700, 900, 128, False),  # persistent: several tiles per CTA
         (4, 16, 4, 1000, 100, 128, True)]  # ... of one key block each


@pytest.mark.parametrize("case", CASES, ids=["x".join(map(str, c[:6])) + ("c" if c[6] else "") for c in CASES])
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("step", STEPS)
def test_matches_the_reference(step, dtype_name, case):
    require(step)
    B, Hq, Hkv, Sq, Sk, D, causal = case
    require_head_dim(step, D)
    api = _api()
    q, k, v = make(B, Hq, Hkv, Sq, Sk, D, dtype_name, seed=Sq * 7 + Sk)
    poison_free_memory(q.numel() * 2)
    o, lse = api.attention(q, k, v, causal=causal, return_lse=True, step=step)
    check(o, lse, q, k, v, causal, 1 / math.sqrt(D), step, dtype_name, f"{step} {dtype_name} {case}")
    o2 = api.attention(q, k, v, causal=causal, step=step)  # without lse: the same output
    assert _torch().equal(o2, o), f"{step} {dtype_name} {case}: return_lse changes o"
    if step != "A1":  # the runner's out=: every element of a NaN-filled output is written
        from gemm_ladder.library.attention_runner import run_attention
        out = _torch().full_like(o, float("nan"))
        run_attention(q, k, v, causal=causal, scale=1 / math.sqrt(D), return_lse=False, step=step, out=out)
        assert _torch().equal(out, o), f"{step} {dtype_name} {case}: out= differs from a fresh output"


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("step", [None] + list(STEPS))
def test_large_logits(step, dtype_name):
    """Raw scores in the thousands: finite, and correct. Step A1 rounds its scores to the
    dtype (its GEMM's output), so its output is held to a reference with those rounded
    scores, its lse to check_lse's bound."""
    require(step)
    require_head_dim(step, 128)
    torch, api = _torch(), _api()
    q, k, v = make(2, 4, 2, 200, 300, 128, dtype_name, seed=5, mul=17.0)
    scale = 1 / math.sqrt(128)
    assert scores(q, k, 1.0).abs().max().item() > 5000
    o, lse = api.attention(q, k, v, causal=True, return_lse=True, step=step)
    assert torch.isfinite(o).all() and torch.isfinite(lse).all()
    if step == "A1":
        ref, _ = reference(q, k, v, True, scale, round_to=q.dtype)
        err, bound = (o.double() - ref).abs().max().item(), 2 * sdpa_error(q, k, v, True, ref) + EPS[dtype_name]
        assert err <= bound, f"A1 {dtype_name}: max |o - ref(rounded scores)| = {err:.3g} > {bound:.3g}"
        check_lse(lse, reference(q, k, v, True, scale)[1], q, k, scale, step, f"A1 {dtype_name} large logits")
    else:
        check(o, lse, q, k, v, True, scale, step, dtype_name, f"{step} {dtype_name} large logits")


@pytest.mark.parametrize("step", STEPS)
def test_scale_argument(step):
    require(step)
    api = _api()
    require_head_dim(step, 64)
    q, k, v = make(1, 4, 2, 130, 70, 64, "float16", seed=3)
    o, lse = api.attention(q, k, v, scale=0.3, return_lse=True, step=step)
    check(o, lse, q, k, v, False, 0.3, step, "float16", f"{step} scale=0.3")


@pytest.mark.parametrize("step", STEPS)
def test_repeated_runs_are_bit_identical(step):
    require(step)
    torch, api = _torch(), _api()
    require_head_dim(step, 128)
    q, k, v = make(2, 4, 4, 1000, 1000, 128, "bfloat16", seed=11)
    first, first_lse = api.attention(q, k, v, causal=True, return_lse=True, step=step)
    check(first, first_lse, q, k, v, True, 1 / math.sqrt(128), step, "bfloat16", f"{step} repeat")
    differing = []
    for i in range(99):
        o, lse = api.attention(q, k, v, causal=True, return_lse=True, step=step)
        if not (torch.equal(o, first) and torch.equal(lse, first_lse)):
            differing.append(i + 1)
    assert not differing, f"{step}: runs {differing} differ from run 0"


@pytest.mark.parametrize("step", [None, "A1"])
def test_torch_compile_fullgraph(step):
    require(step)
    torch, api = _torch(), _api()
    torch._dynamo.reset()
    q, k, v = make(2, 8, 2, 128, 200, 128, "bfloat16", seed=7)

    def f(q, k, v):
        o, lse = api.attention(q, k, v, causal=True, return_lse=True, step=step)
        return o * 2, lse.exp()

    got, got_l = torch.compile(f, fullgraph=True)(q, k, v)
    want, want_l = f(q, k, v)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
    torch.testing.assert_close(got_l, want_l, rtol=0, atol=0)


@pytest.mark.parametrize("step", [None, "A1", "A5:d"])
def test_cuda_graph_capture_and_replay_with_new_inputs(step):
    require(step)
    torch, api = _torch(), _api()
    q, k, v = make(1, 8, 2, 200, 300, 64, "float16", seed=1)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up (JIT compile, load) outside the capture
        api.attention(q, k, v, causal=True, step=step)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        o, lse = api.attention(q, k, v, causal=True, return_lse=True, step=step)
    for i in range(3):
        for t, new in zip((q, k, v), make(1, 8, 2, 200, 300, 64, "float16", seed=100 + i)):
            t.copy_(new)
        o.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        check(o, lse, q, k, v, True, 1 / 8, step, "float16", f"{step} replay {i}")


@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("step", ["A5:d", "A5:c3d"])
def test_dynamic_walk_in_sections(step, causal, monkeypatch):
    """The dynamic walk with sections of 4 (batch, head) pairs out of 15 (the last holds 3),
    GQA: every output row written (NaN-poisoned out=) and equal to the reference, twice (the
    counter is fresh each call)."""
    require(step)
    torch = _torch()
    from gemm_ladder.families import attention as family
    from gemm_ladder.library import attention_runner as runner
    monkeypatch.setattr(family.AttnStep, "section", lambda self, *a, **kw: 4)
    monkeypatch.setattr(runner, "_LAUNCHES", {})
    D = 64 if step == "A5:c3d" else 128
    q, k, v = make(3, 5, 1, 700, 700, D, "bfloat16", seed=5)
    for rep in range(2):
        out = torch.full(q.shape, float("nan"), dtype=q.dtype, device=q.device)
        runner.run_attention(q, k, v, causal=causal, scale=1 / math.sqrt(D), return_lse=False, step=step, out=out)
        check(out, None, q, k, v, causal, 1 / math.sqrt(D), step, "bfloat16", f"{step} sections of 4, run {rep}")


def test_backward_and_mask_are_refused_in_one_line():
    torch, api = _torch(), _api()
    q, k, v = make(1, 2, 2, 17, 17, 64, "float16")
    o = api.attention(q.detach().requires_grad_(), k, v, step="A1")
    with pytest.raises(RuntimeError, match="^" + re.escape(api.NO_BACKWARD) + "$"):
        o.float().sum().backward()
    mask = torch.ones((17, 17), dtype=torch.bool, device="cuda")
    with pytest.raises(NotImplementedError, match="^attention: attn_mask is not supported"):
        api.attention(q, k, v, attn_mask=mask)
    with pytest.raises(NotImplementedError, match="^attention: dropout_p=0.5 is not supported"):
        api.attention(q, k, v, dropout_p=0.5)
    with pytest.raises(ValueError, match="^attention: k is on cpu but q is on cuda"):
        api.attention(q, k.cpu(), v)


def test_operands_tma_cannot_read_are_copied():
    """Rows of 68 elements (not 16-byte multiples) and a misaligned base: the door copies."""
    torch, api = _torch(), _api()
    q, k, v = make(1, 4, 2, 100, 90, 64, "bfloat16", seed=2)
    buf = torch.zeros((1, 4, 100, 68), device="cuda", dtype=torch.bfloat16)
    buf[..., :64] = q
    flat = torch.zeros(k.numel() + 1, device="cuda", dtype=torch.bfloat16)
    k_odd = flat[1:].view(k.shape)
    k_odd.copy_(k)
    q_odd = buf[..., :64]
    assert not api.tma_readable(q_odd) and not api.tma_readable(k_odd)
    want = api.attention(q, k, v, causal=True, step="A1")
    got = api.attention(q_odd, k_odd, v, causal=True, step="A1")
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_broadcast_kv_are_copied():
    """k and v expanded over the heads (stride 0): the door copies them rather than hand TMA a
    zero stride; the same result as from materialised k and v."""
    torch, api = _torch(), _api()
    q, k, v = make(1, 4, 4, 128, 128, 64, "bfloat16", seed=3)
    k1, v1 = k[:, :1].expand(-1, 4, -1, -1), v[:, :1].expand(-1, 4, -1, -1)
    assert k1.stride(1) == 0 and not api.tma_readable(k1)
    want = api.attention(q, k1.contiguous(), v1.contiguous())
    got = api.attention(q, k1, v1)
    torch.testing.assert_close(got, want, rtol=0, atol=0)
