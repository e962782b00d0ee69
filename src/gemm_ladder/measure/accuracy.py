"""Is a kernel's output right? The one check against an fp32 reference, shared by the
benchmark, `gemm-ladder check`, the traces, the GPU what-ifs and the GPU tests."""
from __future__ import annotations

import math


def tolerance(dtype_name: str) -> tuple[float, float]:
    """(max |err| / max |ref|, ||err|| / ||ref||) accepted for fp32-accumulated output."""
    return (2e-3, 1e-3) if dtype_name == "float16" else (1.6e-2, 8e-3)


def reference(a, b):
    """C = A @ B^T in fp32 with TF32 off (A is (M, K), B is (N, K))."""
    import torch
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        return a.float() @ b.float().T
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32


def check_output(out, ref, dtype_name: str) -> tuple[bool, float, float, str]:
    """(ok, max |err|, relative norm error, why not ok) of `out` against `ref`."""
    import torch
    o = out.float()
    if not torch.isfinite(o).all():
        bad = (~torch.isfinite(o)).sum().item()
        return False, math.inf, math.inf, f"{bad} non-finite elements (unwritten or wrong)"
    err = (o - ref)
    max_abs = err.abs().max().item()
    scale = ref.abs().max().item() or 1.0
    rel = (err.norm() / (ref.norm() + 1e-30)).item()
    tol_max, tol_rel = tolerance(dtype_name)
    ok = max_abs / scale <= tol_max and rel <= tol_rel
    return ok, max_abs, rel, "" if ok else f"error too large: max|err|/max|ref|={max_abs / scale:.2e}, rel={rel:.2e}"


def check_product(out, a, b) -> tuple[bool, float, float, str]:
    """check_output of `out` = A @ B^T against the fp32 reference, at out's dtype."""
    return check_output(out, reference(a, b), str(out.dtype).removeprefix("torch."))
