"""gemm-ladder: a readable, measured GEMM ladder for Hopper, JIT-compiled from Python.

    import gemm_ladder
    c = gemm_ladder.matmul(a, b)        # a @ b, fp16/bf16, CUDA (sm_90a)
    c = gemm_ladder.matmul_nt(a, b)     # a @ b.T (both operands K-major, no copy)
"""
__version__ = "0.1.0"

from .runtime.api import best_step, matmul, matmul_nt  # noqa: E402
from .runtime.steps import STEPS, VARIANTS, ShapeError, get_step  # noqa: E402

__all__ = ["matmul", "matmul_nt", "best_step", "get_step", "STEPS", "VARIANTS", "ShapeError", "__version__"]
