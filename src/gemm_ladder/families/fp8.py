"""The fp8 family: C = (A @ B^T) scaled, A (M, K) and B (N, K) in fp8, both K-major (Hopper's
fp8 wgmma has no transpose), fp32 accumulation, the scales applied in the epilogue or while
promoting (kernels/fp8/fp8_scales.cuh). Its kernels: the ladder's step 11 (the lesson: step 9 on
fp8 operands, one scale per tensor) and the library's `fp8/fp8_gemm.cu` (every scale mode,
promotion, fp32 output, bias).

An entry owns its configuration and its launch (DeepGEMM's shape): the defines its kernel is
built with, the per-call variant (scale mode, output type, bias, operand formats), its tensor
maps and its grid. library/fp8_runner.py chooses an entry and launches it.
"""
from __future__ import annotations

import ctypes
import dataclasses
from dataclasses import dataclass

from ..cuda import driver, jit
from ..cuda.device import H200
from .common import ConfigError, build, short_box_rows
from .protocol import Facts, KernelFamily, KMajorOnly

FAMILY = "fp8"
SCALE_MODES = ("tensor", "row", "block")
OUT_TYPES = ("bfloat16", "float16", "float32")
_SCALE_DEFINE = {"tensor": 0, "row": 1, "block": 2}
_OUT_DEFINE = {"bfloat16": 0, "float16": 1, "float32": 2}
OUT_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4}
REDUCE_BATCH = 4  # split-K's second pass: planes per batch, every load before the first add (4 x 16 bytes: ptxas
# issued no more loads of float4 ahead of the first add)
BK = 128  # fp8 elements per k-tile: one 128-byte swizzle row
SCALE_BLOCK = 128  # the block scales' k-block and B's n-block
_CLAIMS = ("QGMMA", "UTMALDG", "UTMASTG", "SYNCS", "USETMAXREG", "UTMACCTL.PF")
_ON_CHIP_SUM_CLAIMS = ("LD.E.128", "UCGABAR_ARV", "UCGABAR_WAIT")  # peers' shared memory read, cluster barriers


@dataclass(frozen=True)
class Variant:
    """One call's build: the scale mode, the output type, a bias, and which operand is e5m2."""
    mode: str = "tensor"
    out: str = "bfloat16"
    bias: bool = False
    a_e5m2: bool = False
    b_e5m2: bool = False

    def defines(self) -> dict[str, int]:
        return {"GL_FP8_SCALE": _SCALE_DEFINE[self.mode], "GL_FP8_OUT": _OUT_DEFINE[self.out],
                "GL_FP8_BIAS": int(self.bias), "GL_BF16": int(self.out == "bfloat16"),
                "GL_FP8_A_E5M2": int(self.a_e5m2), "GL_FP8_B_E5M2": int(self.b_e5m2)}


@dataclass(frozen=True)
class Fp8Entry(KMajorOnly, KernelFamily):
    name: str  # the entry's key after "fp8:" (or the ladder's "11")
    label: str
    source: str
    entry: str
    bn: int
    depth: int
    cluster_m: int = 2
    promote: int = 1  # k-tiles per promotion into fp32 registers; 0: the sum stays in the tensor core
    pieces: int = 1  # column pieces a promoted k-tile's MMAs run in (through one partial sum)
    split: bool = False  # split-K: a tile's k-tiles over several CTAs, partials summed by a reduction
    split_cluster: bool = False  # split-K summed on chip: a tile's splits are a cluster (split must be set)
    overlap_kt: bool = False  # two partials: the next k-tile's MMAs in flight while one is promoted
    overlap_pieces: bool = False  # two partials in turn over the pieces: the next piece's MMAs in flight
    # while one is promoted, across the k-tile boundary too (pieces even, e.g. four on 128 x 256)
    late_scales: bool = False  # block scales read under the MMAs, from per-tile pointers
    scale_rows: bool = False  # block scales read a k-tile ahead from per-tile pointers (not indexed per k-tile)
    modes: tuple[str, ...] = SCALE_MODES
    outs: tuple[str, ...] = OUT_TYPES
    row_bias16: bool = True  # row-wise scales with a 16-bit bias fit the registers (False: they spill)
    bm: int = 128
    bk: int = BK
    consumers: int = 2
    epi_stages: int = 2
    group_m: int = 16
    mma_lag: int = 1
    threads: int = 384
    step: int | None = None  # 11 for the ladder's step

    dtypes = ("float8_e4m3fn", "float8_e5m2")
    kmajor_only_why = "fp8 operands are read K-major only (fp8 wgmma has no transpose)"

    @property
    def key(self) -> str:
        return "11" if self.step == 11 else f"{FAMILY}:{self.name}"

    @property
    def cluster(self) -> tuple[int, int, int]:
        return (self.cluster_m, 1, 1)

    def launch_cluster(self, splits: int = 1) -> tuple[int, int, int]:
        """The launch's cluster shape: the multicast pair's, or an on-chip split-K's splits."""
        return (splits, 1, 1) if self.split_cluster else self.cluster

    @property
    def planes(self) -> bool:
        """Split-K through a workspace of planes and a second launch (not on chip)."""
        return self.split and not self.split_cluster

    @property
    def fast_accum(self) -> bool:
        return self.promote == 0

    @property
    def claims(self) -> tuple[str, ...]:
        cluster = ("UTMALDG.2D.MULTICAST",) if self.cluster_m > 1 else ()
        # on-chip split-K: C leaves through plain stores after the cluster's sum over its peers' shared memory
        own = tuple(c for c in _CLAIMS if c != "UTMASTG") + _ON_CHIP_SUM_CLAIMS if self.split_cluster else _CLAIMS
        return own + cluster + (f"QGMMA.64x{self.bn // self.pieces}x32.F32.E4M3.E4M3",)

    # -- shared memory -------------------------------------------------------------------------
    @property
    def barriers(self) -> int:
        return 2 * self.depth + 2 * self.epi_stages

    @property
    def dynamic_smem(self) -> int:
        """Operand stages (one byte per element) + the chunk slots (128 rows x 128 bytes) +
        barriers + 1 KB to align the tiles to 1024 bytes."""
        return 1024 + self.depth * (self.bm + self.bn) * self.bk + self.epi_stages * self.bm * 128 + 8 * self.barriers

    def smem_problem(self, static_smem: int = 0) -> str:
        """Why this configuration's shared memory cannot be launched; "" if it can."""
        total = self.dynamic_smem + static_smem
        if total <= H200.smem_per_block:
            return ""
        return f"needs {total:,} bytes of shared memory, over the {H200.smem_per_block:,}-byte limit"

    # -- the protocol --------------------------------------------------------------------------
    def facts(self) -> Facts:
        return Facts(bm=self.bm, bn=self.bn, bk=self.bk, cluster_m=self.cluster_m, consumers=self.consumers,
                     persistent=True, ctas_per_sm=1)

    def kernel_defines(self) -> dict[str, int]:
        d = {"GL_BM": self.bm, "GL_BN": self.bn, "GL_BK": self.bk, "GL_DEPTH": self.depth, "GL_GROUP_M": self.group_m,
             "GL_CLUSTER_M": self.cluster_m, "GL_CONSUMERS": self.consumers, "GL_EPI_STAGES": self.epi_stages,
             "GL_DYNAMIC_SMEM": self.dynamic_smem, "GL_MMA_LAG": self.mma_lag}
        if self.step != 11:
            d.update(GL_FP8_PROMOTE=self.promote, GL_FP8_PIECES=self.pieces,
                     GL_FP8_SPLIT=2 if self.split_cluster else int(self.split), GL_FP8_REDUCE_BATCH=REDUCE_BATCH)
            # the promotion's variants only where set (the other entries' builds keep their defines)
            d.update({k: 1 for k, on in (("GL_FP8_OVERLAP_KT", self.overlap_kt),
                                          ("GL_FP8_OVERLAP_PIECES", self.overlap_pieces),
                                          ("GL_FP8_LATE_SCALES", self.late_scales),
                                          ("GL_FP8_SCALE_ROWS", self.scale_rows)) if on})
        return d

    def variant_problem(self, v: Variant) -> str:
        """Why this entry cannot build the call's variant; "" if it can."""
        if v.mode not in self.modes:
            return f"{self.key} takes {', '.join(self.modes)} scales, not {v.mode}"
        if v.out not in self.outs:
            return f"{self.key} writes {', '.join(self.outs)}, not {v.out}"
        if v.a_e5m2 and v.b_e5m2:
            return "e5m2 x e5m2 is not supported (one operand must be e4m3)"
        if self.step == 11 and (v.bias or v.a_e5m2 or v.b_e5m2):
            return "step 11 takes e4m3 operands and no bias"
        if self.overlap_pieces and (problem := self._pieces_problem(v)):
            return f"{self.key}: overlap_pieces {problem}"
        if self.overlap_kt and self.pieces != 1:
            return f"{self.key}: overlap across k-tiles takes one piece per k-tile (two partials of {self.bn} columns)"
        if v.mode == "row" and v.bias and v.out != "float32" and not self.row_bias16:
            return f"row-wise scales with a {v.out} bias spill registers on this tile"
        return ""

    def _pieces_problem(self, v: Variant) -> str:
        """Why overlap_pieces cannot build this call ("" if it can)."""
        width = self.bn // self.pieces if self.pieces else 0
        if self.overlap_kt:
            return "and overlap_kt order one promotion two ways: set one"
        if self.promote != 1 or self.pieces < 2 or self.pieces % 2 or self.bn % self.pieces:
            return (f"takes promotion every k-tile and an even number of pieces (piece h runs in partial "
                    f"h % 2), not promote={self.promote}, pieces={self.pieces}")
        if width not in (64, 128, 192, 256):
            return f"takes pieces of 64, 128, 192 or 256 columns (the fp8 wgmma wrappers), not {width}"
        if self.bn // 2 + width > 192:  # the sum's registers and two partials of width / 2
            return (f"holds a {self.bn // 2}-register sum and two {width // 2}-register partials; more than "
                    f"192 do not fit a consumer's 232 registers (use more pieces)")
        if v.mode == "block" and SCALE_BLOCK % width:
            return f"with block scales takes pieces inside one {SCALE_BLOCK}-column n-block, not {width} wide"
        return ""

    def compile(self, *, bf16: bool = False, extra_defines: dict | None = None, use_cache: bool = True,
                strict: bool = True, variant: Variant | None = None) -> jit.CompiledKernel:
        """Build the kernel for one call variant (default: per-tensor scales, bf16 out, or
        fp16 with bf16=False where the entry writes it)."""
        v = variant or Variant(mode=self.modes[0], out="bfloat16" if bf16 or "float16" not in self.outs else "float16")
        if problem := self.variant_problem(v):
            raise ConfigError(problem)
        defines = {**self.kernel_defines(), **v.defines()}
        if self.overlap_kt and self.bn > 64 and (v.bias or v.mode == "row" and not self.split):
            # on 128-wide tiles two partials spill beside a bias or row-wise column factors
            # (split-K's epilogue leaves room for the latter): those builds keep one partial
            defines.pop("GL_FP8_OVERLAP_KT")
        if self.step == 11:
            defines = {k: x for k, x in defines.items() if k not in ("GL_FP8_SCALE", "GL_FP8_BIAS", "GL_FP8_A_E5M2",
                                                                    "GL_FP8_B_E5M2", "GL_FP8_OUT")}
        try:
            return build(self.source, self.entry, defines, extra_defines=extra_defines, use_cache=use_cache,
                         strict=strict)
        except jit.KernelBuildError:
            if "GL_FP8_OVERLAP_KT" not in defines:
                raise
            # another ptxas may allocate two partials less tightly: one partial is the same sum
            defines.pop("GL_FP8_OVERLAP_KT")
            return build(self.source, self.entry, defines, extra_defines=extra_defines, use_cache=use_cache,
                         strict=strict)

    def shape_problems(self, M: int, N: int, K: int, *, b_mn: bool = False, out: str = "bfloat16") -> list[str]:
        p = []
        if min(M, N, K) < 1:
            p.append(f"M, N, K must be >= 1 (got {M}, {N}, {K})")
        if K % 16:
            p.append(f"K={K} must be a multiple of 16 (TMA needs 16-byte rows of fp8 A and B)")
        per_row = 16 // OUT_BYTES[out]
        if N % per_row:
            p.append(f"N={N} must be a multiple of {per_row} ({out} rows of C must be 16-byte multiples)")
        if b_mn:
            p.append("B must be K-major (fp8 wgmma has no transpose)")
        return p

    # -- the launch ----------------------------------------------------------------------------
    def grid(self, M: int, N: int, num_sms: int, max_clusters: int | None = None,
             splits: int = 1) -> tuple[int, int, int]:
        """Persistent: at most one CTA per SM (or the clusters that fit at once), no more than
        the units (tiles x splits); a cluster covers cluster_m vertically adjacent tiles. The
        on-chip split-K: one CTA per unit (a cluster per tile holds its pieces until summed)."""
        tiles_m, tiles_n = -(-M // self.bm), -(-N // self.bn)
        if self.split_cluster:
            return (tiles_m * tiles_n * splits, 1, 1)
        clusters = min(num_sms // self.cluster_m, -(-tiles_m // self.cluster_m) * tiles_n * splits)
        if max_clusters:
            clusters = min(clusters, max_clusters)
        return (max(1, clusters) * self.cluster_m, 1, 1)

    def map_specs(self, M: int, N: int, K: int, out: str, splits: int = 1) -> tuple[tuple, tuple, tuple]:
        """(rows, cols, row stride, box rows, box cols, element, planes) of the maps of A (M, K),
        B (N, K) (fp8: bytes) and C (M, N); C's box is 128 rows x one 128-byte chunk (64 16-bit
        or 32 fp32 columns), B's the slice one CTA of a cluster loads. Split-K: C's map is the
        (splits, M, N) fp32 workspace's (on chip: C's, which the kernel does not store through)."""
        c_elem = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}[out]
        c = ((M, N, N, self.bm, 32, "f32", splits) if self.planes else
             (M, N, N, self.bm, 128 // OUT_BYTES[out], c_elem, None))
        return ((M, K, K, self.a_box_rows(M), self.bk, "u8", None),
                (N, K, K, self.bn // self.cluster_m, self.bk, "u8", None), c)

    def a_box_rows(self, M: int) -> int:
        """Rows of A's TMA box (common.short_box_rows) where there is no multicast pair; the
        pairs and step 11 take whole boxes."""
        return self.bm if self.step == 11 or self.cluster_m > 1 else short_box_rows(M, self.bm)

    def splits_for(self, M: int, N: int, K: int, num_sms: int, max_clusters=None) -> int:
        """Split-K's split of each tile's k-tiles: enough units to fill the SMs, at least two
        k-tiles per split, at most 16 planes, and no split left empty. On chip: 1, 2, 4 or 8
        (a tile's column slices, a portable cluster), and no more than let every tile's cluster
        run in one wave (max_clusters(splits): how many clusters of that size fit at once; more
        would be correct, a second wave of clusters after the first, but slower)."""
        if not self.split:
            return 1
        tiles = _tiles(M, N, self.bm, self.bn)
        k_tiles = -(-K // self.bk)
        s = max(1, min(num_sms // tiles, k_tiles // 2, 8 if self.split_cluster else 16))
        if self.split_cluster:
            s = 1 << (s.bit_length() - 1)
        while s > 1 and (-(-k_tiles // s) * (s - 1) >= k_tiles
                         or self.split_cluster and max_clusters is not None and max_clusters(s) < tiles):
            s = s // 2 if self.split_cluster else s - 1
        return s

    def kernel_args(self, a_ptr: int, b_ptr: int, c_ptr: int, sa_ptr: int, sb_ptr: int, bias_ptr: int,
                    M: int, N: int, K: int, out: str, make_map=None, splits: int = 1) -> list:
        """The tensor maps (map_specs; make_map(ptr, rows, cols, ld, box rows, box cols,
        element=..., planes=...) builds each, default driver.TensorMap), the sizes, the scale and
        bias pointers, the split count, C's pointer (written directly by the on-chip split-K) and
        the rows of A's box (a_box_rows).
        Split-K through planes: c_ptr is the workspace (and C's pointer is not read)."""
        make_map = make_map or driver.TensorMap
        (a_map, b_map, c_map) = (make_map(p, *spec[:5], element=spec[5], planes=spec[6])
                                 for p, spec in zip((a_ptr, b_ptr, c_ptr), self.map_specs(M, N, K, out, splits)))
        args = [a_map, b_map, c_map, M, N, K, ctypes.c_uint64(sa_ptr), ctypes.c_uint64(sb_ptr)]
        if self.step != 11:
            args += [ctypes.c_uint64(bias_ptr), splits, ctypes.c_uint64(c_ptr), self.a_box_rows(M)]
        return args

    def reduce_args(self, ws_ptr: int, c_ptr: int, sa_ptr: int, sb_ptr: int, bias_ptr: int, M: int, N: int,
                    splits: int) -> list:
        """fp8_splitk_reduce's arguments (kernels/fp8/fp8_split.cuh)."""
        return [ctypes.c_uint64(ws_ptr), ctypes.c_uint64(c_ptr), M, N, splits, ctypes.c_uint64(sa_ptr),
                ctypes.c_uint64(sb_ptr), ctypes.c_uint64(bias_ptr)]

    REDUCE_THREADS = 256

    def reduce_grid(self, M: int, N: int) -> tuple[int, int, int]:
        return (-(-(M * (N // 4)) // self.REDUCE_THREADS), 1, 1)


def _library(name: str, bn: int, depth: int, promote: int, cluster_m: int = 2, modes=SCALE_MODES,
             pieces: int = 1, split: bool = False, row_bias16: bool = True, overlap_kt: bool = False,
             split_cluster: bool = False, overlap_pieces: bool = False, bm: int = 128) -> Fp8Entry:
    every = "every k-tile" if promote == 1 else f"every {promote} k-tiles"
    how = (f"promoted {every}" + (f" in {pieces} column pieces" if pieces > 1 else "")
           + (" through two partials in turn, each promoted under the next piece's MMAs" if overlap_pieces else "")
           if promote else "summed in the tensor core") + (", overlapped with the next k-tile's MMAs" if overlap_kt
                                                            else "") + \
        (", split-K summed on chip" if split_cluster else ", split-K" if split else "") + \
        (", no cluster" if cluster_m == 1 and not split_cluster else ", a cluster per tile" if split_cluster else "")
    # 64 rows: one consumer warpgroup (a producer warpgroup beside it)
    return Fp8Entry(name, f"fp8 {bm}x{bn}, {how}", "fp8/fp8_gemm.cu", "fp8_gemm", bn=bn, depth=depth,
                    cluster_m=cluster_m, promote=promote, modes=modes, pieces=pieces, split=split or split_cluster,
                    row_bias16=row_bias16, overlap_kt=overlap_kt, split_cluster=split_cluster,
                    overlap_pieces=overlap_pieces, bm=bm, consumers=bm // 64, threads=128 * (1 + bm // 64))


STEP11 = Fp8Entry("11", "step 11: fp8 (step 9 on e4m3 operands, one scale per tensor)", "ladder/step11_fp8.cu",
                  "gemm_step11_fp8", bn=256, depth=4, promote=0, modes=("tensor",), outs=("bfloat16", "float16"),
                  step=11)

ENTRIES: dict[str, Fp8Entry] = {e.key: e for e in (
    # promoted (torch's default, use_fast_accum=False): a partial sum and the tile's sum in
    # registers, so 64 x 128 per consumer; block scales need one n-block per tile anyway
    _library("128x128p", 128, 6, promote=1, overlap_kt=True),
    # promoted on 128 x 256 tiles: each k-tile's MMAs in two 128-column pieces through one
    # 64-register partial sum, so the tile's 128-register sum fits beside it (twice the operand
    # reuse of 128 x 128; block scales: each piece is one n-block). Row-wise scales with a
    # 16-bit bias spill here (their column factors and the bias per chunk): those go to 128 x 128.
    _library("128x256p", 256, 4, promote=1, pieces=2, row_bias16=False),
    # block scales on 128 x 256: four 64-column pieces through two 32-register partials in turn,
    # so a piece's promotion runs under the next piece's MMAs (op4, PROMOTION_VARIANTS): 2.5-4 %
    # faster than two pieces through one partial (docs/perf-notes.md item 98)
    _library("128x256pb", 256, 4, promote=1, pieces=4, overlap_pieces=True, modes=("block",)),
    # one tile row (M <= 128): no cluster, whose second CTA would take a tile below C; narrower
    # tiles where 128-wide ones leave SMs idle (64 wide: no block scales, whose n-block is 128)
    _library("128x128pc1", 128, 6, promote=1, cluster_m=1, overlap_kt=True),
    _library("128x64pc1", 64, 6, promote=1, cluster_m=1, modes=("tensor", "row")),
    _library("128x256c1", 256, 4, promote=0, cluster_m=1, modes=("tensor", "row")),
    _library("128x128c1", 128, 6, promote=0, cluster_m=1, modes=("tensor", "row")),
    _library("128x64c1", 64, 6, promote=0, cluster_m=1, modes=("tensor", "row")),
    # small M, split-K: 128 x 128 tiles, promoted, each tile's k-tiles split over several CTAs;
    # their fp32 partials summed in order by a second launch: where C has a quarter of a wave
    # of tiles or fewer (64 x 4096 x 7168: 1.16x _scaled_mm row-wise, docs/perf-notes.md item 84)
    _library("128x128sk", 128, 6, promote=1, cluster_m=1, split=True, overlap_kt=True),
    # 64-row tiles, one consumer: at M <= 64 no second consumer computes rows below C, and at
    # M = 65-128 twice the CTAs of 128-row tiles without a split (docs/perf-notes.md item 100);
    # 64 wide, two partials fit beside row-wise column factors and a bias too
    _library("64x64pc1", 64, 13, promote=1, cluster_m=1, modes=("tensor", "row"), overlap_kt=True, bm=64),
    _library("64x128pc1", 128, 8, promote=1, cluster_m=1, overlap_kt=True, bm=64),
    _library("64x64sk", 64, 13, promote=1, cluster_m=1, modes=("tensor", "row"), split=True, overlap_kt=True, bm=64),
    _library("64x128sk", 128, 8, promote=1, cluster_m=1, split=True, overlap_kt=True, bm=64),
    _library("64x64c1", 64, 13, promote=0, cluster_m=1, modes=("tensor", "row"), bm=64),
    # summed in the tensor core (use_fast_accum=True): step 11's 128 x 256 with every scale mode
    # that applies at the end, and 128 x 128 where 128 x 256 tiles fill the waves badly
    _library("128x256", 256, 4, promote=0, modes=("tensor", "row")),
    _library("128x128", 128, 6, promote=0, modes=("tensor", "row")),
)}


# The promotion's build variants, by name (fields of an entry; with_fields builds one). okt is
# the 128-wide promoted entries' own build (measured, docs/perf-notes.md item 89); late is an
# experiment (measured level or behind); op4 is an experiment not yet measured (the SASS:
# experiments/fp8/2026-12-04_fp8_pieces_sass_*.txt)
PROMOTION_VARIANTS: dict[str, dict] = {
    "okt": {"overlap_kt": True},  # two partials: one 128-wide piece only (128 x 128 tiles)
    "late": {"late_scales": True},  # any tile; with overlap_kt the scales are read late anyway
    "rows": {"scale_rows": True},  # any tile: late's pointers, at the as-is build's place
    # four pieces, two partials in turn: 64-column pieces on 128 x 256 tiles (128 + 2 x 32 registers)
    "op4": {"pieces": 4, "overlap_pieces": True},
}


def with_fields(entry: Fp8Entry, name: str, **fields) -> Fp8Entry:
    """An experiment's configuration of an entry (e.g. overlap_kt=True), named `name` so the
    runner's launch cache keeps it apart from the entry it comes from."""
    return dataclasses.replace(entry, name=f"{entry.name}-{name}", **fields)


# Variant builds that no library entry is, checked beside the entries by the GPU tests against
# the fp32 reference and by scripts/compile_all.py under each NVRTC: (entry key, variant name)
# Split-K's build variant "chip": the splits' partials summed on chip, a cluster per tile (each CTA
# stages its partial in its drained ring and sums a column slice of the tile over the cluster's
# shared memory: no workspace, no second launch). Not the entry's build: where the second launch
# costs most (64-128 x 4096 x 7168, 2-3 us of 17), the 32 tiles' clusters of 4 do not fit at once
# (30 do), so the split falls to 2 and the kernel runs 4 us longer (docs/perf-notes.md item 98).
SPLIT_VARIANTS: dict[str, dict] = {"chip": {"split_cluster": True}}

CHECKED_VARIANTS = (("fp8:128x256p", "op4"), ("fp8:128x128sk", "chip"))  # op4: its tensor and row builds too


def checked_variants() -> list[Fp8Entry]:
    fields = {**PROMOTION_VARIANTS, **SPLIT_VARIANTS}
    return [with_fields(get(key), name, **fields[name]) for key, name in CHECKED_VARIANTS]


def get(key: str) -> Fp8Entry:
    if key == "11":
        return STEP11
    if key not in ENTRIES:
        raise KeyError(f"no fp8 entry {key!r}; known: {', '.join(['11', *ENTRIES])}")
    return ENTRIES[key]


def all_entries() -> list[Fp8Entry]:
    return [STEP11, *ENTRIES.values()]


def wave_fill(tiles: int, ctas: int) -> float:
    """The share of a persistent grid's CTA turns that get a tile: tiles over turns x CTAs."""
    return tiles / (-(-tiles // ctas) * ctas) if tiles else 0.0


# M <= 128 (one tile row of 128): the entries tried widest first, promoted, then summed in the
# tensor core (fast). 128-row tiles only above 64 rows, where no consumer computes only rows below C.
_ONE_ROW = ("fp8:128x128pc1", "fp8:64x128pc1", "fp8:64x64pc1")
_ONE_ROW_FAST = ("fp8:128x256c1", "fp8:128x128c1", "fp8:128x64c1", "fp8:64x64c1")
SPLIT_MIN_K_TILES = 32  # split-K only over long K: at 16 k-tiles the split's second pass costs more than it saves


def _tiles(M: int, N: int, bm: int, bn: int) -> int:
    return -(-M // bm) * -(-N // bn)


def choose(M: int, N: int, K: int, mode: str, fast_accum: bool, num_sms: int = H200.sms, *,
           bias16: bool = False) -> Fp8Entry:
    """The library's entry for a call (choice, without its reason)."""
    return choice(M, N, K, mode, fast_accum, num_sms, bias16=bias16)[0]


def choice(M: int, N: int, K: int, mode: str, fast_accum: bool, num_sms: int = H200.sms, *,
           bias16: bool = False) -> tuple[Fp8Entry, str]:
    """The library's entry for a call and why (`gemm-ladder explain M N K --fp8 MODE`), from the
    graph-timed measurements of every entry
    (docs/perf-notes.md items 84, 98, 100): promoted unless the caller asked for the tensor
    core's own accumulation and the scales apply at the end.
    - M <= 128: the widest tile (_ONE_ROW, _ONE_ROW_FAST; 128-row tiles above 64 rows only; 64
      wide takes no block scales) whose tiles fill 80 % of the SMs; where none does, split-K on
      64-row tiles if a long K (SPLIT_MIN_K_TILES) meets few tiles (64 x 128 tiles filling half
      the SMs or less for block scales, 64 x 64 tiles a quarter for the others), else the
      narrowest tile (64 x 64 at 128 x 4096 x 7168: 128 CTAs, no split, 1.03x _scaled_mm per
      tensor against 0.82 for 128 x 128 tiles split four ways).
    - Several tile rows whose 128 x 128 tiles would fill at most half of the SMs: 64 x 128 (one
      consumer) for promoted per-tensor and block scales, 128 x 64 for row-wise ones and fast
      accumulation.
    - Several tile rows: promoted per-tensor scales on 128 x 128, whose promotion runs under
      the next k-tile's MMAs (overlap_kt: 0.979-1.014x _scaled_mm at 4096^3-8192^3 and two LLM
      shapes against 0.910-0.982 on 128 x 256, docs/perf-notes.md item 89); otherwise 128 x 256
      where its tiles fill every wave to 90 % or more, or one wave to 80 % (promoted row-wise and
      block scales) (twice the operand reuse of 128 x 128; not
      row-wise scales with a 16-bit bias, bias16, which spill there; block scales in four
      overlapped pieces, fp8:128x256pb), else 128 x 128."""
    fast = fast_accum and mode != "block"
    acc = "summed in the tensor core" if fast else "promoted"
    if M <= 128:
        usable = [e for e in map(ENTRIES.get, _ONE_ROW_FAST if fast else _ONE_ROW)
                  if mode in e.modes and (e.bm == 64 or M > 64)]
        for e in usable:
            if (t := _tiles(M, N, e.bm, e.bn)) >= 0.8 * num_sms:
                return e, (f"one tile row (M <= 128), {acc}: {e.bm} x {e.bn}, the widest tile whose {t} tiles "
                           f"fill 80 % of the {num_sms} SMs")
        if not fast and (kt := -(-K // BK)) >= SPLIT_MIN_K_TILES:
            # block scales' heavier k-tile splits up to half a wave of 64 x 128 tiles, the rest a quarter of 64 x 64
            split, share = (ENTRIES["fp8:64x128sk"], 2) if mode == "block" else (ENTRIES["fp8:64x64sk"], 4)
            if share * (t := _tiles(M, N, split.bm, split.bn)) <= num_sms:
                return split, (f"one tile row, no tile fills 80 % of the SMs, and K has {kt} k-tiles: split-K over "
                               f"{t} tiles of {split.bm} x {split.bn} (1/{share} of a wave or less)")
        e = usable[-1]
        return e, (f"one tile row, {acc}: no tile fills 80 % of the {num_sms} SMs, the narrowest ({e.bm} x {e.bn}, "
                   f"{_tiles(M, N, e.bm, e.bn)} tiles), not split")
    # few tile rows and columns (1024^3: 64 tiles of 128 x 128): tiles of half the area, twice as
    # many CTAs; 64 x 128 with one consumer (two partials) for per-tensor and block scales, 128 x 64
    # for row-wise ones (1024^3: per tensor 1.07x _scaled_mm against 0.99 on 128 x 64, block 0.96
    # against 0.78 on 128 x 128, row-wise 1.14 on 128 x 64 against 1.05; perf-notes items 98, 100)
    if 2 * (t := _tiles(M, N, 128, 128)) <= num_sms:
        e = ENTRIES["fp8:128x64c1" if fast else "fp8:128x64pc1" if mode == "row" else "fp8:64x128pc1"]
        return e, f"{t} tiles of 128 x 128 fill half of the SMs or less: {e.bm} x {e.bn} tiles, twice the CTAs"
    wide = ENTRIES["fp8:128x256" if fast else "fp8:128x256pb" if mode == "block" else "fp8:128x256p"]
    fits = mode in wide.modes and (fast or mode != "tensor") and (wide.row_bias16 or not (mode == "row" and bias16))
    tiles = _tiles(M, N, 128, 256)
    # promoted row-wise and block scales also where 128 x 256 tiles fill one wave to 80 % (2048^3,
    # 512 x 7168 x 2048: +4-6 % over 128 x 128, whose row-wise build keeps one partial; item 100)
    one_wave = not fast and 0.8 * num_sms <= tiles <= num_sms
    fill = wave_fill(tiles, num_sms)
    if fits and (tiles >= num_sms and fill >= 0.9 or one_wave):
        return wide, (f"{tiles} tiles of 128 x 256, {acc}, fill " + ("one wave to 80 % or more" if one_wave else
                                                                      f"every wave to {fill:.0%}"))
    e = ENTRIES["fp8:128x128" if fast else "fp8:128x128p"]
    if not fast and mode == "tensor":
        why = "promoted per-tensor scales: 128 x 128, its promotion under the next k-tile's MMAs"
    elif not fits:
        why = "row-wise scales with a 16-bit bias spill on 128 x 256: 128 x 128"
    else:
        why = f"{tiles} tiles of 128 x 256 would fill the waves to {fill:.0%} (under 90 %): 128 x 128"
    return e, why
