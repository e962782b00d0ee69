"""The command line: `gemm-ladder` / `python -m gemm_ladder`."""
from .commands import main

__all__ = ["main"]
