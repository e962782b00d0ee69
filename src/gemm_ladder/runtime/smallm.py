"""The small-M family (decode-like shapes, M <= 128): split K over the grid, a deterministic
second pass. Its configuration and its launch live here together, as a step's do in steps.py
and launch.py.

Not a rung of the ladder: a kernel family beside it (kernels/smallm_splitk.cu). Its entries
are reached by key through `steps.get_step("smallm")` / `"smallm:n128"` and are never listed by
`steps.all_steps()`, so nothing that walks the ladder meets them by accident. An entry has
the parts of a `Step` the shared machinery reads (key, label, source, entry, threads,
kernel_defines(), dynamic_smem, barriers, compile(), shape_problems(), accepts(), claims), so
`launch.prepare`, `launch.plan`/`run_step`, the compile report and the benchmark take it as
they take a step; what differs (the split, the workspace, two launches) is here.

The split rule (`split_plan`), for kernel selection to read: one CTA per SM (the ring fills
~200 KB of shared memory), each CTA one 64 x BN tile over one K range. Among splits s with
at least MIN_KT_PER_SPLIT k-tiles each, pick the s that minimizes the busiest SM's work in
k-tile stages streamed (`split_cost`):
    waves(s) * (ceil(k_tiles / s) + CTA_OVERHEAD_KT)                       the split-K kernel
  + [s > 1] * (REDUCE_OVERHEAD_KT + s * M * N * 4 / (SMs * stage bytes))   the second pass
with waves(s) = ceil(tiles * s / SMs); CTA_OVERHEAD_KT prices a CTA's ring fill and tile
store, REDUCE_OVERHEAD_KT the second launch. Ties go to fewer splits. At 16 x 4096 x 4096
with BN = 256: 16 tiles x 8 splits = 128 CTAs of 8 k-tiles each, one wave. `busiest_sm_bytes`
puts the cost in bytes, comparable between tile widths.

The reduction is our own second kernel, not torch's `ws.sum(0).to(dtype)`: one pass that
reads the fp32 partials once and writes the 16-bit C straight into `out` (torch would
write an fp32 M x N sum and then convert it in a second kernel), in an order we state
(split 0, 1, 2, ... in fp32, rounded once), not one that depends on torch's reduction code.
"""
from __future__ import annotations

import ctypes
import dataclasses
from dataclasses import dataclass

from . import driver, jit, launch
from .steps import MAX_SMEM_PER_BLOCK, ConfigError, build

MIN_KT_PER_SPLIT = 4  # k-tiles per split at least: a shorter K range never fills the ring
CTA_OVERHEAD_KT = 3   # a CTA's fixed cost in k-tiles: ring fill latency + partial-tile store
REDUCE_OVERHEAD_KT = 2  # the second launch's fixed cost, in k-tiles of one SM
REDUCE_THREADS = 128  # second pass: threads per block (the kernel's launch bounds), 4 elements each
REDUCE_MAX_REGS = 40  # ... and registers per thread for a block to fit beside a split-K CTA


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class SmallM:
    key: str
    bn: int = 256  # CTA tile columns (m64nBNk16)
    depth: int = 5  # operand ring stages
    name: str = "small M, split K"
    forced_move: str = "at small M, 128-row tiles waste the MMA and too few CTAs stream the weights"
    mechanism: str = ("64 x BN tile (one m64 row block, rows >= M zero-filled by TMA), K split over the "
                      "grid's z, fp32 partials to a workspace, a second kernel sums the splits in order; "
                      "TMA producer warp + one wgmma consumer warpgroup, setmaxnreg 40/232")
    source: str = "smallm_splitk.cu"
    entry: str = "gemm_smallm_splitk"
    reduce_entry: str = "gemm_smallm_reduce"
    threads: int = 256
    bm: int = 64
    bk: int = 64
    max_m: int = 128  # the family is for decode-like shapes; larger M belongs to the ladder
    # ... and programmatic launch: PREEXIT (griddepcontrol.launch_dependents), ACQBULK (.wait)
    sass_claims: tuple[str, ...] = ("HGMMA", "UTMALDG", "SYNCS", "USETMAXREG", "PREEXIT", "ACQBULK")
    sass_absent: tuple[str, ...] = ("FFMA",)
    uses_tma: bool = True
    persistent: bool = False  # one tile and one K range per CTA; the split sizes the grid
    variant: str = ""
    pdl: bool = True  # the reduction launches programmatically (waits on the SMs for the partials)

    def __post_init__(self) -> None:
        if self.bm != 64 or self.bk != 64 or self.bn not in (128, 256):
            raise ValueError(f"{self.key}: the kernel takes a 64 x 128 or 64 x 256 tile, k-tile 64")
        if self.depth < 2:
            raise ValueError(f"{self.key}: the ring needs depth >= 2")

    # -- what the shared machinery reads ----------------------------------------------------
    @property
    def label(self) -> str:
        return f"{self.key} ({self.name}, {self.bm}x{self.bn}, depth {self.depth})"

    @property
    def claims(self) -> tuple[str, ...]:
        return self.sass_claims + (f"HGMMA.64x{self.bn}x16",)

    @property
    def barriers(self) -> int:
        return 2 * self.depth  # tma2mma + mma2tma per stage

    @property
    def stage_bytes(self) -> int:
        return (self.bm + self.bn) * self.bk * 2

    @property
    def dynamic_smem(self) -> int:
        """Operand stages + barriers + 1 KB to align the tiles to 1024 bytes (the kernel
        static_asserts that its SharedStorage fits)."""
        return 1024 + self.depth * self.stage_bytes + 8 * self.barriers

    def smem_problem(self, static_smem: int = 0) -> str:
        total = self.dynamic_smem + static_smem
        if total <= MAX_SMEM_PER_BLOCK:
            return ""
        return f"needs {total:,} bytes of shared memory, over the {MAX_SMEM_PER_BLOCK:,}-byte limit per block"

    def smem_ai(self) -> float:
        return 2 * self.bm * self.bn * self.bk / self.stage_bytes

    def kernel_defines(self) -> dict[str, int]:
        return dict(GL_BM=self.bm, GL_BN=self.bn, GL_BK=self.bk, GL_DEPTH=self.depth,
                    GL_DYNAMIC_SMEM=self.dynamic_smem)

    def compile(self, *, bf16: bool = False, extra_defines: dict | None = None,
                use_cache: bool = True, strict: bool = True) -> jit.CompiledKernel:
        """Both entries of the file (split-K kernel and reduction) in one module."""
        return build(self.source, self.entry, self.kernel_defines(), bf16=bf16, extra_defines=extra_defines,
                     use_cache=use_cache, strict=strict)

    def shape_problems(self, M: int, N: int, K: int) -> list[str]:
        p = []
        if min(M, N, K) < 1:
            p.append(f"M, N, K must be >= 1 (got {M}, {N}, {K})")
        if M > self.max_m:
            p.append(f"M={M} is over {self.max_m}: the small-M family is for decode-like shapes")
        if K % 8:
            p.append(f"K={K} must be a multiple of 8 (TMA needs 16-byte row strides for A and B)")
        if N % 8:
            p.append(f"N={N} must be a multiple of 8 (16-byte rows of C and of the workspace)")
        if max(M, N, K) >= 2**31:
            p.append("dimensions must be < 2^31")
        return p

    def accepts(self, M: int, N: int, K: int) -> bool:
        return not self.shape_problems(M, N, K)

    # -- the split --------------------------------------------------------------------------
    def tiles(self, M: int, N: int) -> tuple[int, int]:
        """(m_tiles, n_tiles) of C."""
        return _cdiv(M, self.bm), _cdiv(N, self.bn)

    def k_tiles(self, K: int) -> int:
        return _cdiv(K, self.bk)

    def fixed_split(self, K: int, splits: int) -> tuple[int, int]:
        """(splits, k-tiles per split) for a requested split count: no split is left empty,
        so fewer may result (e.g. 3 k-tiles asked to split 4 ways give 3 splits)."""
        if splits < 1:
            raise ValueError(f"splits must be >= 1, got {splits}")
        kt = self.k_tiles(K)
        per = _cdiv(kt, min(splits, kt))
        return _cdiv(kt, per), per

    def split_cost(self, M: int, N: int, K: int, num_sms: int, splits: int) -> float:
        """The busiest SM's work for this split, in k-tile stages (module docstring)."""
        splits, per = self.fixed_split(K, splits)
        m_tiles, n_tiles = self.tiles(M, N)
        cost = _cdiv(m_tiles * n_tiles * splits, num_sms) * (per + CTA_OVERHEAD_KT)
        if splits > 1:
            cost += REDUCE_OVERHEAD_KT + splits * M * N * 4 / (num_sms * self.stage_bytes)
        return cost

    def busiest_sm_bytes(self, M: int, N: int, K: int, num_sms: int) -> float:
        """The cost of the chosen split in bytes: comparable between tile widths."""
        return self.split_cost(M, N, K, num_sms, self.split_plan(M, N, K, num_sms)[0]) * self.stage_bytes

    def split_plan(self, M: int, N: int, K: int, num_sms: int) -> tuple[int, int]:
        """(splits, k-tiles per split) by the rule in the module docstring."""
        best = None
        for s in range(1, max(1, self.k_tiles(K) // MIN_KT_PER_SPLIT) + 1):
            splits, per = self.fixed_split(K, s)
            cost = (self.split_cost(M, N, K, num_sms, splits), splits)
            if best is None or cost < best[0]:
                best = (cost, (splits, per))
        return best[1]

    def grid(self, M: int, N: int, splits: int) -> tuple[int, int, int]:
        m_tiles, n_tiles = self.tiles(M, N)
        return (n_tiles, m_tiles, splits)

    def workspace_shape(self, M: int, N: int, splits: int) -> tuple[int, int, int] | None:
        """fp32 partials ws[split][M][N]; None with one split (the kernel writes C itself)."""
        return (splits, M, N) if splits > 1 else None

    def reduce_grid(self, M: int, N: int) -> tuple[int, int, int]:
        return (_cdiv(M * N // 4, REDUCE_THREADS), 1, 1)

    def kernel_args(self, a_ptr: int, b_ptr: int, ws_ptr: int, c_ptr: int, M: int, N: int, K: int,
                    kt_per_split: int, *, bf16: bool, lda: int | None = None, ldb: int | None = None,
                    make_map=None) -> list:
        """The split-K kernel's arguments: A (M, K) and B (N, K) K-major (row strides lda, ldb
        in elements; default packed), the fp32 workspace (0 with one split) and C, a packed
        (M, N) matrix. make_map builds the tensor maps (default driver.TensorMap), as in
        Step.kernel_args."""
        make_map = make_map or driver.TensorMap
        return [make_map(a_ptr, M, K, lda or K, self.bm, self.bk, bf16),
                make_map(b_ptr, N, K, ldb or K, self.bn, self.bk, bf16),
                ctypes.c_uint64(ws_ptr), ctypes.c_uint64(c_ptr), M, N, K, kt_per_split]

    @staticmethod
    def reduce_args(ws_ptr: int, c_ptr: int, M: int, N: int, splits: int) -> list:
        """The second pass's arguments: the workspace, C (packed (M, N)), sizes and splits."""
        return [ctypes.c_uint64(ws_ptr), ctypes.c_uint64(c_ptr), M, N, splits]

    # -- the launch -------------------------------------------------------------------------
    def plan(self, a, b, out=None, *, splits: int | None = None, debug: bool = False,
             pdl: bool | None = None) -> "SmallMPlan":
        """Validate, compile, load, allocate the workspace and build both launches of
        C = A @ B^T once; calling the plan launches them on the stream current now.
        pdl: launch the reduction programmatically (default: the entry's `pdl`)."""
        import torch
        if problem := self.smem_problem():
            raise ConfigError(f"{self.key} cannot run: {problem}")
        M, N, K = launch.check_operands(a, b, out, step=self)
        launch.check_device(a.device)
        if out is None:
            out = torch.empty((M, N), dtype=a.dtype, device=a.device)
        dev = a.device.index if a.device.index is not None else torch.cuda.current_device()
        bf16 = a.dtype == torch.bfloat16
        with torch.cuda.device(dev):
            prep = launch.prepare(self, dev, bf16=bf16, debug=debug)
            s, per = (self.fixed_split(K, splits) if splits is not None
                      else self.split_plan(M, N, K, launch.num_sms(dev)))
            shape = self.workspace_shape(M, N, s)
            ws = torch.empty(shape, dtype=torch.float32, device=a.device) if shape else None
            ws_ptr = ws.data_ptr() if ws is not None else 0
            stream = torch.cuda.current_stream(dev).cuda_stream
            args = self.kernel_args(a.data_ptr(), b.data_ptr(), ws_ptr, out.data_ptr(), M, N, K, per, bf16=bf16)
            launches = [driver.PreparedLaunch(prep.kernel, self.grid(M, N, s), (self.threads, 1, 1), args,
                                              stream=stream, dynamic_smem=self.dynamic_smem)]
            if ws is not None:
                reduce = _reduce_kernel(prep.kernel, self.reduce_entry)
                launches.append(driver.PreparedLaunch(
                    reduce, self.reduce_grid(M, N), (REDUCE_THREADS, 1, 1),
                    self.reduce_args(ws_ptr, out.data_ptr(), M, N, s), stream=stream,
                    pdl=self.pdl if pdl is None else pdl))
        return SmallMPlan(self, prep, _InOrder(launches), (a, b, out, ws), dev, debug, splits=s, kt_per_split=per,
                          grid=self.grid(M, N, s))


_REDUCE: dict[tuple, driver.LoadedKernel] = {}


def _reduce_kernel(main: driver.LoadedKernel, name: str) -> driver.LoadedKernel:
    """The reduction entry of the loaded module, looked up once per module."""
    key = (main.compiled.key, main.device_index, name)
    if key not in _REDUCE:
        _REDUCE[key] = main.sibling(name)
    return _REDUCE[key]


class _InOrder:
    """Launches one after the other on their stream (split-K kernel, then the reduction)."""

    def __init__(self, launches: list):
        self.launches = launches

    def __call__(self) -> None:
        for go in self.launches:
            go()


@dataclass
class SmallMPlan(launch.Plan):
    splits: int = 1
    kt_per_split: int = 0
    grid: tuple[int, int, int] = (1, 1, 1)  # of the split-K kernel: (n_tiles, m_tiles, splits)

    @property
    def workspace(self):
        return self.tensors[3]


# The family's entries, by key (steps.get_step looks here).
FAMILIES: dict[str, SmallM] = {
    "smallm": SmallM("smallm"),
    "smallm:n128": SmallM("smallm:n128", bn=128, depth=8, variant="n128"),
}


def get_family(key: str = "smallm") -> SmallM:
    try:
        return FAMILIES[key]
    except KeyError:
        raise KeyError(f"unknown small-M configuration {key!r}; known: {', '.join(FAMILIES)}") from None


def run_smallm(a, b, out=None, splits: int | None = None, *, family: str | SmallM = "smallm",
               debug: bool = False, sync: bool = False):
    """C = A @ B^T for a (M, K) and b (N, K) contiguous fp16/bf16 CUDA tensors, M <= 128, with
    the small-M split-K kernel and its deterministic reduction. `splits`: the K split (default:
    the family's rule). Returns `out` (allocated if None). The workspace comes from torch's
    caching allocator on the current stream and is released once both launches are queued:
    the allocator hands it out again only to work ordered after them on that stream."""
    fam = family if isinstance(family, SmallM) else get_family(family)
    p = fam.plan(a, b, out, splits=splits, debug=debug)
    res = p()
    if sync and not debug:
        p.synchronize()
    return res


def with_fields(fam: SmallM, name: str, **fields) -> SmallM:
    """An ad-hoc configuration (e.g. another depth) named `name`, for experiments."""
    return dataclasses.replace(fam, key=f"{fam.key}:{name}", variant=name, **fields)
