"""The fp8 kernels (families/fp8.py: the library's entries and the ladder's step 11) against an
fp32 reference computed from the dequantized inputs: every entry, scale mode, output type, with
and without bias, on squares and odd shapes; outputs poisoned with NaN first, fresh random
inputs per case. The promotion's experimental builds that are no library entry's (VARIANTS)
take the same cases. Skipped without a Hopper GPU."""
import itertools

import pytest

from gemm_ladder.families import fp8
from gpu_util import needs_gpu

pytestmark = [needs_gpu, pytest.mark.gpu]

SHAPES = [(128, 256, 128), (256, 512, 1024), (1, 64, 16), (17, 264, 48), (257, 136, 4112), (1000, 3000, 2064),
          (2048, 2048, 2048), (64, 1024, 4096), (100, 520, 2064),
          (64, 1536, 4096)]  # the last three: split-K in 16 / 8, 6 and 5 / 11 planes
VARIANTS = fp8.checked_variants()  # e.g. op4 on 128 x 256 (okt is the 128-wide entries' own build)
_seed = itertools.count(7000)


def _operands(M, N, K, mode, seed, b_e5m2=False):
    """Quantized operands and their scales in the kernel's forms, and the fp32 reference."""
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    kb, nb = -(-K // 128), -(-N // 128)
    qa = (torch.randn((M, K), device="cuda", generator=g) * 2).to(torch.float8_e4m3fn)
    qb = (torch.randn((N, K), device="cuda", generator=g) * 2).to(torch.float8_e5m2 if b_e5m2 else
                                                                   torch.float8_e4m3fn)
    shapes = {"tensor": ((1,), (1,)), "row": ((M,), (N,)), "block": ((M, kb), (nb, kb))}[mode]
    sa = torch.rand(shapes[0], device="cuda", generator=g) + 0.5
    sb = torch.rand(shapes[1], device="cuda", generator=g) + 0.5
    fa, fb = qa.float(), qb.float()
    if mode == "tensor":
        ref = (fa @ fb.t()) * (sa * sb)
    elif mode == "row":
        ref = (fa @ fb.t()) * sa[:, None] * sb[None, :]
    else:
        sa_full = sa.repeat_interleave(128, dim=1)[:, :K]
        sb_full = sb.repeat_interleave(128, dim=0)[:N].repeat_interleave(128, dim=1)[:, :K]
        ref = torch.zeros((M, N), device="cuda")
        for k0 in range(0, K, 128):  # each k-block with its own scales
            ref += (fa[:, k0:k0 + 128] * sa_full[:, k0:k0 + 128]) @ (fb[:, k0:k0 + 128] * sb_full[:, k0:k0 + 128]).t()
    return qa, qb, sa, sb, ref


def _check(out, ref, out_dtype, what, fast=False):
    """Relative to the reference's largest magnitude; a sum kept in the tensor core's own
    accumulator (fast) is allowed that accumulator's rounding."""
    import torch
    assert torch.isfinite(out).all(), f"{what}: non-finite output (NaN poison left?)"
    err = float((out.float() - ref).abs().max() / ref.abs().max())
    tol = {torch.float32: 2e-3, torch.bfloat16: 1e-2, torch.float16: 2e-3}[out_dtype]
    if fast:
        tol = max(tol, 1.5e-2)
    assert err <= tol, f"{what}: relative error {err:.2e} > {tol:.0e}"


def _cases():
    for e in fp8.all_entries() + VARIANTS:
        for mode in e.modes:
            for out in e.outs:
                for shape in SHAPES:
                    if e.step == 11 and shape[1] % 8:
                        continue
                    yield pytest.param(e, mode, out, shape, id=f"{e.key}-{mode}-{out}-{'x'.join(map(str, shape))}")


@pytest.mark.parametrize("e,mode,out,shape", list(_cases()))
def test_fp8_entry(e, mode, out, shape):
    import torch
    from gemm_ladder.library.fp8_runner import run_fp8
    M, N, K = shape
    out_dtype = getattr(torch, out)
    qa, qb, sa, sb, ref = _operands(M, N, K, mode, next(_seed))
    c = torch.full((M, N), float("nan"), device="cuda", dtype=out_dtype)
    run_fp8(qa, qb, sa, sb, mode=mode, out_dtype=out_dtype, entry=e, out=c)
    _check(c, ref, out_dtype, f"{e.key} {mode} {out} {shape}", fast=e.fast_accum)


@pytest.mark.parametrize("e", list(fp8.ENTRIES.values()) + VARIANTS, ids=lambda e: e.key)
@pytest.mark.parametrize("out", ["bfloat16", "float32"])
def test_fp8_bias_and_e5m2(e, out):
    import torch
    from gemm_ladder.library.fp8_runner import run_fp8
    M, N, K = 300, 520, 784
    out_dtype = getattr(torch, out)
    refused = e.variant_problem(fp8.Variant("row", out, bias=True, b_e5m2=True)) if "row" in e.modes else ""
    mode = "row" if "row" in e.modes and not refused else "tensor" if "tensor" in e.modes else e.modes[0]
    qa, qb, sa, sb, ref = _operands(M, N, K, mode, next(_seed), b_e5m2=True)
    bias = torch.randn(N, device="cuda").to(out_dtype)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=out_dtype)
    if refused:  # row-wise scales with this bias spill on this entry: refused in one line, nothing launched
        from gemm_ladder.families.common import ConfigError
        rq = _operands(M, N, K, "row", next(_seed), b_e5m2=True)
        with pytest.raises(ConfigError, match="spill"):
            run_fp8(rq[0], rq[1], rq[2], rq[3], mode="row", out_dtype=out_dtype, bias=bias, entry=e, out=c)
        assert torch.isnan(c).all()
    run_fp8(qa, qb, sa, sb, mode=mode, out_dtype=out_dtype, bias=bias, entry=e, out=c)
    _check(c, ref + bias.float(), out_dtype, f"{e.key} bias e5m2 {out}", fast=e.fast_accum)


# 64: split-K (its reduction sums the planes in order); the variants on their own
@pytest.mark.parametrize("M,e", [(1024, None), (64, None)] + [(1024, v) for v in VARIANTS],
                         ids=lambda x: x.key if isinstance(x, fp8.Fp8Entry) else str(x))
def test_fp8_repeatable(M, e):
    """The same call twenty times gives bit-identical output (no race)."""
    import torch
    from gemm_ladder.library.fp8_runner import run_fp8
    qa, qb, sa, sb, _ = _operands(M, 1024, 4096, "block", next(_seed))
    first = run_fp8(qa, qb, sa, sb, mode="block", out_dtype=torch.bfloat16, entry=e)
    for _ in range(20):
        assert torch.equal(run_fp8(qa, qb, sa, sb, mode="block", out_dtype=torch.bfloat16, entry=e), first)
