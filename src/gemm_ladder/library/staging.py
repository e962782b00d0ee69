"""Scratch memory and staging copies of the library's prepared configurations (fastconfig.py).

An operand whose strides or address TMA cannot take is copied before the GEMM reads it,
into a buffer whose rows are 16-byte aligned (layout.Operand: K-major, or MN-major with
`stage_mn`). Those buffers and the small-M kernel's fp32 partials are a configuration's
`Scratch`, kept per stream. The copies are one launch of `gl_stage_copy` (kernels/
gl_stage.cuh, compiled into every TMA kernel's module) when each is a plain copy — the
source's rows contiguous — and torch's copies otherwise (fastconfig's `_stage_a/_b`).
"""
from __future__ import annotations

import ctypes
import threading

import torch

from ..cuda import driver
from . import layout

STAGE_COPY_ENTRY = "gl_stage_copy"  # kernels/gl_stage.cuh, in every TMA kernel's module
STAGE_COPY_BLOCKS = 1024  # its grid's blocks per operand at most (they stride over the rows' chunks)
STAGE_COPY_THREADS = 256  # its block (the kernel's launch bounds)
STAGE_COPY_UNROLL = 8  # elements per thread in a block's chunk of a row (the kernel's STAGE_UNROLL)
MAX_SCRATCH_BYTES = 32 << 20  # a configuration's set larger than this is allocated per call
MAX_SCRATCH_TOTAL = 512 << 20  # all sets kept at once (process-wide); beyond, per call
_scratch_total = [0]  # bytes of the sets kept, all configurations together
_scratch_total_lock = threading.Lock()  # two threads filling sets would miscount it


class Scratch:
    """Per-stream scratch memory of a configuration: staging copies of operands TMA cannot
    read in place, the small-M kernel's fp32 partials. Allocating them per call costs host
    time (torch.empty ~4 us on the H200's host, item 27), and a staged operand at a fresh
    address needs a fresh tensor map (an encode through the driver). Launches on one
    stream run in order, so the next call's copy lands after this call's kernels read the
    last one; `lock` (held by the caller from the first copy to the last launch) keeps two
    threads on one stream from interleaving copy and kernel. While a CUDA graph is
    captured, and for sets beyond the size limits, scratch comes fresh per call (from the
    graph's pool: a replay must not share it with launches outside the graph)."""

    def __init__(self, shapes: dict, device):
        self.shapes, self.device = shapes, device  # name -> (shape, dtype)
        self.nbytes = sum(torch.Size(sh).numel() * dt.itemsize for sh, dt in shapes.values())
        self.lock = threading.Lock()
        self._sets: dict[int, dict] = {}

    def get(self, stream: int, capturing: bool) -> dict:
        got = self._sets.get(stream)
        if got is not None and not capturing:
            return got
        fresh = {name: torch.empty(sh, dtype=dt, device=self.device) for name, (sh, dt) in self.shapes.items()}
        if capturing or self.nbytes > MAX_SCRATCH_BYTES:
            return fresh
        with _scratch_total_lock:
            if _scratch_total[0] + self.nbytes > MAX_SCRATCH_TOTAL:
                return fresh
            _scratch_total[0] += self.nbytes
            self._sets[stream] = fresh
        return fresh

    def __del__(self):
        with _scratch_total_lock:
            _scratch_total[0] -= self.nbytes * len(self._sets)


def copy_geometry(op: layout.Operand) -> tuple[int, int, int, int] | None:
    """(rows, cols, source row stride, copy row stride) of a staged operand's copy, from the
    strides the call gave (`Operand.strides`), or None when it is not a plain copy (the
    copy's rows are not contiguous in the source)."""
    if op.strides is None:
        return None
    line_stride, k_stride = op.strides
    line_stride = line_stride or 0  # a single line: never stepped over
    if op.stage_mn:  # the copy is (k, lines)
        rows, cols, rs, cs = op.k, op.rows, k_stride, line_stride
    else:  # (lines, k)
        rows, cols, rs, cs = op.rows, op.k, line_stride, k_stride
    if cs != 1 and cols != 1:
        return None
    return rows, cols, rs, op.staged_ld


def stage_copy_launch(kernel, geometries: list[tuple[int, int, int, int]]) -> driver.ReusableLaunch:
    """One launch of the module's `gl_stage_copy` (`kernel`: any entry of that module) for one
    or two copies (copy_geometry); per call it takes (source, scratch) pointers of each, in
    order, and a second pair that repeats the first when there is one copy (grid y = copies)."""
    args = []
    for rows, cols, rs, ld in geometries + geometries[:1] * (2 - len(geometries)):
        args += [ctypes.c_uint64(0), ctypes.c_uint64(0), ctypes.c_int64(rows), ctypes.c_int64(cols),
                 ctypes.c_int64(rs), ctypes.c_int64(ld)]
    width = STAGE_COPY_THREADS * STAGE_COPY_UNROLL
    chunks_max = max(rows * -(-cols // width) for rows, cols, _, _ in geometries)
    return driver.ReusableLaunch(kernel.sibling(STAGE_COPY_ENTRY), (min(chunks_max, STAGE_COPY_BLOCKS),
                                 len(geometries), 1), (STAGE_COPY_THREADS, 1, 1), args)
