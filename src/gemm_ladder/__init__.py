"""gemm-ladder: a readable, measured GEMM ladder for Hopper, JIT-compiled from Python.

    import gemm_ladder
    c = gemm_ladder.matmul(a, b)        # a @ b, fp16/bf16, CUDA (sm_90a)
    c = gemm_ladder.matmul_nt(a, b)     # a @ b.T (both operands K-major, no copy)
    y = gemm_ladder.linear(x, w)        # x @ w.T, like torch.nn.functional.linear without bias
    layer = gemm_ladder.Linear(4096, 4096, device="cuda", dtype=torch.float16)
    c = gemm_ladder.scaled_mm(a8, w8.t(), sa, sw)  # fp8, like torch._scaled_mm (quantize_fp8)
    o = gemm_ladder.attention(q, k, v, causal=True)  # like F.scaled_dot_product_attention (forward)
"""
__version__ = "0.1.0"

from .families.common import ShapeError  # noqa: E402
from .families.keys import get_step  # noqa: E402
from .families.ladder import STEPS, VARIANTS  # noqa: E402
from .library.select import best_step  # noqa: E402

# The torch-facing names load torch (and register the gemm_ladder::matmul op) on first
# use, so the CLI's torch-free commands stay quick to start.
_LAZY = {name: "library.api" for name in ("matmul", "matmul_nt", "warmup", "linear", "Linear")}
_LAZY.update({name: "library.fp8_api" for name in ("scaled_mm", "quantize_fp8", "dequantize_fp8", "Fp8Linear")})
_LAZY["attention"] = "library.attention_api"


def __getattr__(name):
    if name in _LAZY:
        import importlib
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value  # later lookups are plain attribute reads
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["matmul", "matmul_nt", "linear", "Linear", "warmup", "scaled_mm", "quantize_fp8", "dequantize_fp8",
           "Fp8Linear", "attention", "best_step", "get_step", "STEPS", "VARIANTS",
           "ShapeError", "__version__"]
