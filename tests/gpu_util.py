"""Shared helpers for the GPU tests (skip cleanly without an sm_90 GPU)."""
import pytest


def has_hopper() -> bool:
    try:
        import torch
        return torch.cuda.is_available() and torch.cuda.get_device_capability(0) == (9, 0)
    except Exception:
        return False


needs_gpu = pytest.mark.skipif(not has_hopper(), reason="needs a CUDA sm_90 (Hopper) GPU")


def fresh(M, N, K, dtype, seed):
    import torch
    g = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn((M, K), device="cuda", generator=g).to(dtype)
    b = torch.randn((N, K), device="cuda", generator=g).to(dtype)
    return a, b


def assert_matches(out, a, b):
    """out == a @ b.T against an fp32 reference (TF32 off); NaN poison must be overwritten."""
    from gemm_ladder.measure.accuracy import check_product
    ok, mx, rel, msg = check_product(out, a, b)
    assert ok, msg
