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


def run_child(code: str, timeout: int = 300):
    """Run `code` in a fresh Python process with this checkout's src on its path (debug builds
    whose trap would end this process's CUDA context); returns the CompletedProcess."""
    import os
    import subprocess
    import sys
    from pathlib import Path
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)


def assert_repeatable(plan, out, a, b, runs: int = 20, what: str = "") -> None:
    """Launch `plan` `runs` times, poisoning `out` before each: the first result matches the
    fp32 reference and every later one has the same bits (a moving result is a race)."""
    import torch
    bits = []
    for _ in range(runs):
        out.fill_(float("nan"))
        plan()
        bits.append(out.view(torch.int16).clone())
    plan.synchronize()
    assert_matches(bits[0].view(out.dtype), a, b)
    differing = [i for i, r in enumerate(bits) if not torch.equal(r, bits[0])]
    assert not differing, f"{what}: runs {differing} differ from run 0"
