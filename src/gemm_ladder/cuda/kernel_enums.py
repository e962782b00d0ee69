"""The enums the kernels and Python share (roles, barriers, trace events), read from the
kernel headers so the two sides cannot drift apart."""
from __future__ import annotations

import re
from functools import lru_cache

from .jit import KERNEL_DIR


@lru_cache(maxsize=None)
def enum_values(header: str, enum: str) -> dict[int, str]:
    """`enum <enum> : unsigned { NAME = 1, ... };` in kernels/common/<header> -> {1: "NAME", ...}."""
    text = (KERNEL_DIR / "common" / header).read_text()
    found = re.search(r"enum\s+" + enum + r"\s*:\s*unsigned\s*\{(.*?)\};", text, re.S)
    if found is None:
        raise LookupError(f"enum {enum} not found in kernels/common/{header}")
    return {int(v): n for n, v in re.findall(r"(\w+)\s*=\s*(\d+)", found.group(1))}


def role_names() -> dict[int, str]:
    return {k: v.removeprefix("ROLE_").lower() for k, v in enum_values("gl_roles.cuh", "GlRole").items()}


def barrier_names() -> dict[int, str]:
    return {k: v.removeprefix("BAR_").lower() for k, v in enum_values("gl_roles.cuh", "GlBarrier").items()}


def event_ids() -> dict[str, int]:
    """Trace event name (EV_...) -> id."""
    return {v: k for k, v in enum_values("gl_trace.cuh", "GlEvent").items()}


def block_flags() -> dict[str, int]:
    """An attention block record's flags (BLOCK_...; gl_trace.cuh's GlBlockFlag) -> bit."""
    return {v.removeprefix("BLOCK_"): k for k, v in enum_values("gl_trace.cuh", "GlBlockFlag").items()}
