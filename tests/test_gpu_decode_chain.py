"""Chains of small-M GEMMs on the GPU, each reading the output of the one before, with the
main kernel launched programmatically (it may start before the previous kernel ends and waits
for it before its first load): every output against fp32 on the inputs it read, eagerly and
in a CUDA graph, bit for bit the same as the stream-ordered launch; a torch kernel rewriting
A right before each call; and the decode-chain benchmark's forms. Skipped without a Hopper GPU."""
import dataclasses

import pytest

from gemm_ladder.families import smallm
from gpu_util import assert_matches, needs_gpu

pytestmark = [needs_gpu, pytest.mark.gpu]

# (N, K) of a chain whose first GEMM is long (many k-tiles per CTA, a long tail for the next
# one to overlap) and whose later ones read slices of the output before them
CHAIN = ((28672, 4096), (4096, 14336), (6144, 4096), (4096, 4096))


def _chain(torch, gemm_ladder, x, ws, outs, step=None):
    a = x
    for w, out in zip(ws, outs):
        gemm_ladder.matmul(a[:, :w.shape[1]], w.T, out, step=step(a[:, :w.shape[1]], w, out) if step else None)
        a = out


def _setup(M, dtype, seed):
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn((M, CHAIN[0][1]), device="cuda", generator=g).to(dtype)
    ws = [(torch.randn((N, K), device="cuda", generator=g) / K ** 0.5).to(dtype) for N, K in CHAIN]
    return x, ws


def _two_chains(M, dt, seed, step):
    """Fresh inputs; the library's chain into poisoned outputs, then the same chain with `step`
    choosing each GEMM's kernel into others: (x, ws, outputs, the others')."""
    import torch
    import gemm_ladder
    x, ws = _setup(M, dt, seed)
    outs = [torch.full((M, N), float("nan"), dtype=dt, device="cuda") for N, _ in CHAIN]
    other = [torch.full_like(o, float("nan")) for o in outs]
    _chain(torch, gemm_ladder, x, ws, outs)
    _chain(torch, gemm_ladder, x, ws, other, step=step)
    torch.cuda.synchronize()
    return x, ws, outs, other


def _plain(fam):
    return dataclasses.replace(fam, key=fam.key + "~plain", chain_pdl=False)


def _b_early_steps():
    """A step chooser for _chain: the library's pick as static_b=True makes it."""
    from gemm_ladder.library import fastpath
    return lambda a, w, out: fastpath.b_early(fastpath.config_for("mm", a, w.T, out).step)


@pytest.mark.parametrize("M", (1, 16, 100))
@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_chain_matches_reference_and_stream_order(M, dtype):
    import torch
    from gemm_ladder.library import fastpath
    variants = {}

    def plain_step(a, w, out):
        fam = fastpath.config_for("mm", a, w.T, out).step
        return variants.setdefault(fam.key, _plain(fam)) if isinstance(fam, smallm.SmallM) else fam
    x, ws, outs, plain = _two_chains(M, getattr(torch, dtype), 700 + M, plain_step)
    a = x
    for w, out in zip(ws, outs):
        if M <= 16:  # decode rows: the small-M family (at 100 rows some GEMMs take a gemm entry)
            assert isinstance(fastpath.config_for("mm", a[:, :w.shape[1]], w.T, out).step, smallm.SmallM)
        assert_matches(out, a[:, :w.shape[1]].contiguous(), w)
        a = out
    for i, (o, p) in enumerate(zip(outs, plain)):
        assert torch.equal(o.view(torch.int16), p.view(torch.int16)), f"GEMM {i}: programmatic launch changed bits"


@pytest.mark.parametrize("early", (False, True), ids=("library", "b_early"))
def test_chain_in_a_graph_20_replays(early):
    """Replays with fresh inputs each time: a kernel that read A before the one before it had
    written it would show stale rows (b_early: B, the weights, is read before the wait; A never)."""
    import torch
    import gemm_ladder
    dt = torch.bfloat16
    x, ws = _setup(16, dt, 721 if early else 711)
    outs = [torch.empty((16, N), dtype=dt, device="cuda") for N, _ in CHAIN]
    step = _b_early_steps() if early else None
    _chain(torch, gemm_ladder, x, ws, outs, step=step)  # warm-up outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        _chain(torch, gemm_ladder, x, ws, outs, step=step)
    gen = torch.Generator(device="cuda").manual_seed(722 if early else 712)
    for rep in range(20):
        x.copy_(torch.randn(x.shape, device="cuda", generator=gen).to(dt))
        for o in outs:
            o.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        a = x
        for i, (w, out) in enumerate(zip(ws, outs)):
            assert_matches(out, a[:, :w.shape[1]].contiguous(), w)
            a = out


def test_a_rewritten_just_before_each_call():
    """A torch kernel writes A, then the GEMM (launched programmatically) reads it: 20 times,
    each result the product of the new A."""
    import torch
    import gemm_ladder
    gen = torch.Generator(device="cuda").manual_seed(713)
    a = torch.empty((16, 4096), dtype=torch.float16, device="cuda")
    w = (torch.randn((4096, 4096), device="cuda", generator=gen) / 64).half()
    for _ in range(20):
        src = torch.randn((16, 4096), device="cuda", generator=gen).half()
        a.copy_(src)
        out = gemm_ladder.matmul(a, w.T)
        torch.cuda.synchronize()
        assert_matches(out, src, w)


def test_decode_chain_benchmark_forms_are_correct():
    """The benchmark's forms (cuBLAS, ours, with the prefetch, in stream order) at M = 1,
    checked as the benchmark checks them, and timed: the library's, the prefetch experiment and stream order."""
    from gemm_ladder.measure import decode_chain
    res = decode_chain.run(rows=(1,), dtypes=("bfloat16",), reps=3, log=lambda m: None)
    forms = {r["form"]: r for r in res["rows"]}
    assert set(forms) == set(decode_chain.FORMS)
    assert all(r["ok"] for r in forms.values()), [r["error"] for r in forms.values() if not r["ok"]]
    assert all(r["chain_us"] > 0 and r["frac_copy_bw"] > 0 for r in forms.values())
    assert all(k.endswith("~no_pdl") for k in forms["no_pdl"]["kernels"])
    assert all(k.endswith("~prefetch") for k in forms["prefetch"]["kernels"])
    assert all(k.endswith("~b_early") for k in forms["ours"]["kernels"] if k.startswith("smallm"))
    assert not any(k.endswith("~b_early") for k in forms["b_waits"]["kernels"])


@pytest.mark.parametrize("M", (1, 16, 100))
@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_b_early_chain_matches_reference_and_the_library_bit_for_bit(M, dtype):
    """B issued before the wait, A after it: the chain's outputs are the library's, bit for bit."""
    import torch
    x, ws, outs, early = _two_chains(M, getattr(torch, dtype), 720 + M, _b_early_steps())
    a = x
    for i, (w, o, e) in enumerate(zip(ws, outs, early)):
        assert_matches(e, a[:, :w.shape[1]].contiguous(), w)
        assert torch.equal(o.view(torch.int16), e.view(torch.int16)), f"GEMM {i}: B issued early changed bits"
        a = o


@pytest.mark.parametrize("key", ("smallm:n64", "smallm:n64alt", "smallm:n128", "smallm", "smallm:c2n64", "smallm:c2n64d",
                                 "smallm:n32"))
@pytest.mark.parametrize("M,N,K", [(1, 4096, 4096), (16, 1000, 8192), (100, 512, 16384), (7, 200, 72), (128, 1024, 8192)])
@pytest.mark.parametrize("b_layout", ("nk", "kn"))
def test_b_early_single_calls_every_deal(key, M, N, K, b_layout):
    """Whole tiles, workspace planes, cluster sums, one k-tile, ragged N; B K-major and N-major."""
    import torch
    import gemm_ladder
    from gemm_ladder.families.keys import get_step
    from gemm_ladder.library import fastpath
    fam = get_step(key)
    problems = fam.shape_problems(M, N, K, b_mn=b_layout == "kn")
    problems += [f"{key} reads B K-major only"] if b_layout == "kn" and not fam.b_mn_major else []
    if problems:
        pytest.skip(f"{key}: {problems[0]}")
    st = fastpath.b_early(fam)
    gen = torch.Generator(device="cuda").manual_seed(M * 7 + N + K)
    a = torch.randn((M, K), device="cuda", generator=gen).half()
    w = (torch.randn((N, K), device="cuda", generator=gen) / K ** 0.5).half()
    b = w.T if b_layout == "nk" else w.T.contiguous()
    out = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    gemm_ladder.matmul(a, b, out, step=st)
    torch.cuda.synchronize()
    assert_matches(out, a, w)


def test_static_b_through_the_api_and_linear():
    """matmul(static_b=True) and Linear(static_weight=True) under no_grad run the b_early
    builds of the small-M picks, bit for bit the library's default."""
    import torch
    import gemm_ladder
    from gemm_ladder.library import fastpath
    dt = torch.bfloat16
    x, ws = _setup(8, dt, 731)
    a = x
    for w in ws:
        a_in = a[:, :w.shape[1]]
        ref = gemm_ladder.matmul(a_in, w.T)
        got = gemm_ladder.matmul(a_in, w.T, static_b=True)
        nt = gemm_ladder.matmul_nt(a_in, w, static_b=True)
        st = fastpath.config_for("mm", a_in, w.T, static_b=True).step
        assert st.key.endswith("~b_early") or not isinstance(st, smallm.SmallM) or st.multicast > 1
        torch.cuda.synchronize()
        assert torch.equal(ref.view(torch.int16), got.view(torch.int16))
        assert torch.equal(ref.view(torch.int16), nt.view(torch.int16))
        a = ref
    lin = gemm_ladder.Linear(4096, 6144, device="cuda", dtype=dt, static_weight=True)
    with torch.no_grad():
        y = lin(x)
        torch.cuda.synchronize()
        assert torch.equal(y.view(torch.int16), gemm_ladder.matmul(x, lin.weight.T).view(torch.int16))
