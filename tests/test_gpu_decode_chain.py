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


def _plain(fam):
    return dataclasses.replace(fam, key=fam.key + "~plain", chain_pdl=False)


@pytest.mark.parametrize("M", (1, 16, 100))
@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_chain_matches_reference_and_stream_order(M, dtype):
    import torch
    import gemm_ladder
    from gemm_ladder.library import fastpath
    dt = getattr(torch, dtype)
    x, ws = _setup(M, dt, 700 + M)
    outs = [torch.full((M, N), float("nan"), dtype=dt, device="cuda") for N, _ in CHAIN]
    _chain(torch, gemm_ladder, x, ws, outs)
    torch.cuda.synchronize()
    a = x
    for w, out in zip(ws, outs):
        if M <= 16:  # decode rows: the small-M family (at 100 rows some GEMMs take a gemm entry)
            assert isinstance(fastpath.config_for("mm", a[:, :w.shape[1]], w.T, out).step, smallm.SmallM)
        assert_matches(out, a[:, :w.shape[1]].contiguous(), w)
        a = out
    plain = [torch.full_like(o, float("nan")) for o in outs]
    variants = {}

    def plain_step(a, w, out):
        fam = fastpath.config_for("mm", a, w.T, out).step
        return variants.setdefault(fam.key, _plain(fam)) if isinstance(fam, smallm.SmallM) else fam
    _chain(torch, gemm_ladder, x, ws, plain, step=plain_step)
    torch.cuda.synchronize()
    for i, (o, p) in enumerate(zip(outs, plain)):
        assert torch.equal(o.view(torch.int16), p.view(torch.int16)), f"GEMM {i}: programmatic launch changed bits"


def test_chain_in_a_graph_20_replays():
    """Replays with fresh inputs each time: a kernel that read A before the one before it had
    written it would show stale rows."""
    import torch
    import gemm_ladder
    dt = torch.bfloat16
    x, ws = _setup(16, dt, 711)
    outs = [torch.empty((16, N), dtype=dt, device="cuda") for N, _ in CHAIN]
    _chain(torch, gemm_ladder, x, ws, outs)  # warm-up outside the capture
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        _chain(torch, gemm_ladder, x, ws, outs)
    gen = torch.Generator(device="cuda").manual_seed(712)
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
