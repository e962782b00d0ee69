"""What every kernel family shares: its errors, the build call, the tile geometry the kernels
fix (epilogue chunk, MN-major block), the SASS vocabulary of its claims, and which operand
layouts a kernel reads in place."""
from __future__ import annotations

from ..cuda import jit

# SASS instruction classes (prefixes of opcodes in `cuobjdump --dump-sass`) and what they mean.
SASS_MEANING = {
    "HGMMA": "wgmma (warpgroup tensor-core MMA)",
    "QGMMA": "wgmma on fp8 operands (e4m3/e5m2)",
    "HMMA": "mma.sync (warp tensor-core MMA)",
    "FFMA": "fp32 fused multiply-add (CUDA cores)",
    "UTMALDG": "TMA tensor load (cp.async.bulk.tensor global->shared)",
    "UTMASTG": "TMA tensor store (cp.async.bulk.tensor shared->global)",
    "UTMACMDFLUSH": "TMA bulk-group commit",
    "SYNCS": "mbarrier operations (arrive / expect_tx / try_wait)",
    "USETMAXREG": "setmaxnreg (register hand-over between warpgroups)",
    "STSM": "stmatrix (registers -> shared, 8x8 matrices)",
    "LDG.E.128": "16-byte global loads",
    "STS.128": "16-byte shared stores",
    "BAR": "CTA / named barriers",
    "LD.E.128": "16-byte generic loads (a peer CTA's shared memory: ld.shared::cluster)",
    "UCGABAR_ARV": "cluster barrier arrive (barrier.cluster.arrive)",
    "UCGABAR_WAIT": "cluster barrier wait (barrier.cluster.wait)",
}
# What a multicasting 2-CTA cluster adds to the SASS.
CLUSTER_CLAIMS = ("UTMALDG.2D.MULTICAST", "SYNCS.ARRIVE.TRANS64.RED", "UCGABAR_ARV", "UCGABAR_WAIT")

# Columns of C per TMA store box and per epilogue staging chunk (64 fp16 = one 128-byte swizzle row).
EPI_CHUNK_COLS = 64
MN_BLOCK = 64  # elements per 128-byte row of an MN-major operand tile


class ShapeError(ValueError):
    """The inputs are valid matrices, but this step cannot take their shape or layout."""


class ConfigError(ValueError):
    """The step's configuration cannot run (e.g. its shared memory exceeds the limit)."""


def build(source: str, entry: str, defines: dict, *, bf16: bool = False, extra_defines: dict | None = None,
          use_cache: bool = True, strict: bool = True) -> jit.CompiledKernel:
    """Compile a kernel with its configuration (`defines`), the element type and the
    ablation/debug switches (GL_TRACE, ...) of this build."""
    d = dict(defines)
    if bf16:
        d["GL_BF16"] = 1
    d.update(extra_defines or {})
    return jit.compile_kernel(source, entry, d, use_cache=use_cache, strict=strict)


def short_box_rows(M: int, bm: int) -> int:
    """Rows of A's TMA box for a tile of bm rows: bm, or M rounded up to 8 (a whole 128-byte
    swizzle atom) when the problem has fewer rows than a tile. TMA writes a box's out-of-range
    rows as zeros one by one (docs/perf-notes.md items 39 and 98); the stage's rows past the box
    keep stale data, whose garbage rows of C no epilogue stores."""
    return min(bm, -(-M // 8) * 8)


def reads_mn(st) -> tuple[bool, bool]:
    """(reads an M-major A in place, reads an N-major B in place): the kernel's answer
    (families/protocol.py); neither for no kernel (an empty product)."""
    return st.reads_mn() if st is not None else (False, False)
