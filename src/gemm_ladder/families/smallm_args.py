"""The small-M family's launch pieces (its entries and deal model: families/smallm.py): the
split-K kernel's and the reduction's arguments, grids and workspace. `SmallMArgs` is mixed into
`SmallM`: it reads the entry's fields. The runner (library/runner.py, `plan_smallm`) builds
both launches from these pieces.

The reduction is our own second kernel, not torch's `ws.sum(0).to(dtype)`: one pass that
reads the fp32 partials once and writes the 16-bit C straight into `out` (torch would
write an fp32 M x N sum and then convert it in a second kernel), in an order we state
(plane 0, 1, 2, ... in fp32, rounded once), not one that depends on torch's reduction code.
"""
from __future__ import annotations

import ctypes

from ..cuda import driver
from .common import MN_BLOCK, ConfigError, short_box_rows
from .splitk_deal import Deal, cdiv, fixup_flag_floats

# A k-tile's block: 64 k-columns, one 128-byte row of 16-bit elements (the widest swizzled box).
# Every box of A and B is one block deep in K; a 128-wide k-tile (bk 128) is two of them.
K_BLOCK = 64
C_BOX = 64  # C's TMA box: 64 x 64, one consumer's rows of one 128-byte chunk (the staged epilogue)
REDUCE_THREADS = 128  # second pass: threads per block (the kernel's launch bounds), 2 elements each
REDUCE_BATCH = 8  # second pass: planes read per batch, all loads before the first add (the kernel's REDUCE_BATCH)
REDUCE_MAX_REGS = 40  # ... and registers per thread for a block to fit beside a split-K CTA


class SmallMArgs:
    """What `SmallM` (families/smallm.py) adds to run: the kernels' arguments, grids and
    workspace. It reads the entry's tile, ring and switches."""

    def workspace_shape(self, M: int, N: int, d: "Deal") -> tuple[int, ...] | None:
        """fp32 partials ws[plane][M][N]; None when no tile is split (the kernel writes C).
        Fixup: flags (one int per CTA and consumer, padded to 256 bytes) and a BM x BN slot
        per CTA, flat; it must start zeroed."""
        if d.fixup:
            return (fixup_flag_floats(d.ctas, self.consumers) + d.ctas * self.bm * self.bn,) if d.split_tiles else None
        return (d.planes, M, N) if d.planes else None

    reduce_entry = "gemm_smallm_reduce"  # the second pass (kernels/smallm/smallm_reduce.cuh)

    def reduce_grid(self, M: int, N: int) -> tuple[int, int, int]:
        """(blocks along a row, rows): 2 elements per thread."""
        return (cdiv(N // 2, REDUCE_THREADS), M, 1)

    def kernel_args(self, a_ptr: int, b_ptr: int, ws_ptr: int, c_ptr: int, M: int, N: int, K: int,
                    units: int, *, bf16: bool, lda: int | None = None, ldb: int | None = None,
                    ldc: int | None = None, make_map=None, b_mn: bool = False) -> list:
        """The split-K kernel's arguments: A (M, K) K-major and B (N, K) K-major, or with b_mn
        a row-major (K, N) matrix (N-major; a build with layout_defines(b_mn=True)), row strides
        lda, ldb in elements (default packed); C, an (M, ldc) row-major matrix (default ldc = N,
        packed), as a tensor map (box 64 x 64: whole tiles leave through TMA) and as a pointer
        (pieces, the fixup), the fp32 workspace (0 when no tile is split), the run length in
        k-tiles (a shared-load deal's pieces per tile: `Deal.kernel_units`), and the rows of A's
        box (`a_box_rows`). make_map builds the tensor maps
        (default driver.TensorMap), as in Step.kernel_args.

        With ldc > N (N not a multiple of 8, C's rows padded to 16 bytes) the kernel computes
        all ldc columns, the sizes it is given being (M, ldc, K): B's map still ends at N, so
        TMA reads its rows past N as zeros and the padding columns of C get zeros. The caller
        owns that padding (the rows of C are ldc long, the last one too)."""
        make_map = make_map or driver.TensorMap
        n_out = ldc or N
        if not N <= n_out < N + 8 or n_out % 8 and n_out != N:
            raise ConfigError(f"{self.key}: C's row stride {n_out} must be N={N} or N rounded up to 8")
        # an N-major B travels as 64-wide blocks of K_BLOCK k-rows (128-byte rows), as in step 9;
        # a multicast pair's CTAs (or a shared-B cluster's) each load BN / cluster_m rows of a
        # K-major B (the box is that tall)
        b_map = (make_map(b_ptr, K, N, ldb or N, K_BLOCK, MN_BLOCK, bf16) if b_mn
                 else make_map(b_ptr, N, K, ldb or K, self.bn // self.cluster_m, K_BLOCK, bf16))
        a_rows = self.a_box_rows(M)  # shared A: each CTA of a cluster row loads a slice of them
        return [make_map(a_ptr, M, K, lda or K, a_rows // self.share_a, K_BLOCK, bf16), b_map,
                make_map(c_ptr, M, n_out, n_out, C_BOX, C_BOX, bf16),
                ctypes.c_uint64(ws_ptr), ctypes.c_uint64(c_ptr), M, n_out, K, units, a_rows]

    def a_box_rows(self, M: int) -> int:
        """Rows of A's TMA box (common.short_box_rows)."""
        return short_box_rows(M, self.bm)

    @staticmethod
    def reduce_args(ws_ptr: int, c_ptr: int, M: int, N: int, K: int, units: int) -> list:
        """The second pass's arguments: the workspace, C (packed (M, N)), sizes and the run
        length (it recomputes the deal to find each tile's planes)."""
        return [ctypes.c_uint64(ws_ptr), ctypes.c_uint64(c_ptr), M, N, K, units]
