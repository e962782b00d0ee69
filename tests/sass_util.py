"""Shared helper for the CPU tests that read SASS: skip cleanly where no disassembler is found."""
import pytest

from gemm_ladder.measure import sass


def sass_or_skip(cubin) -> str:
    """The cubin's SASS text, or skip the test where no disassembler is found."""
    try:
        return sass.disassemble(cubin)
    except sass.SassUnavailable as e:
        pytest.skip(str(e))
