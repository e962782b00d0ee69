"""Prepared configurations of the library's hot path: what fastpath.py caches per call
configuration (call kind, step, dtype, device, shapes, strides, alignment, `out` layout).

A configuration is built once: each operand's layout (layout.py: read in place, K- or
MN-major, or staged by a copy), the kernel compiled and loaded with the layout's defines
(`Step.layout_defines`), the launch (grid, cluster, shared memory, an argument array laid
out by `Step.kernel_args` / the small-M family's `kernel_args`). Per call it only stages
what cannot be read in place (into per-stream scratch kept by the configuration, like the
small-M kernel's partials: staging.py), allocates the result with torch (current stream,
caching allocator: CUDA-graph safe), finds the tensor maps of the call's pointers (built by the
same `kernel_args`, each map encoded once per pointer and geometry in a bounded LRU) and
launches on `torch.cuda.current_stream()` — the stream is read per call, never cached.
"""
from __future__ import annotations

import contextlib
import functools
import threading
from collections import OrderedDict

import torch

from ..cuda import device as cuda_device
from ..cuda import driver
from ..families.common import ShapeError, reads_mn
from ..families.ladder_step import Step
from ..families.smallm import REDUCE_THREADS, SmallM
from ..families.splitk_deal import Deal
from . import layout, runner, staging
from .staging import Scratch

MAX_TENSOR_MAPS = 1024  # encoded CUtensorMaps kept: a model reuses its weights and buffers
MAPS_PER_CONFIG = 32  # pointer tuples remembered per configuration

# Per-call CUDA queries: the raw forms skip building Python stream/device objects.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda dev: torch.cuda.current_stream(dev).cuda_stream)
_current_device = getattr(torch._C, "_cuda_getDevice", None) or (lambda: torch.cuda.current_device())
_Tensor = torch.Tensor
_capturing = torch.cuda.is_current_stream_capturing
_grad_enabled = torch.is_grad_enabled
# torch.autograd.graph.increment_version's own call (it takes a tuple), without the wrapper's 0.2 us
_increment_version = getattr(torch._C, "_increment_version", None) or torch.autograd.graph.increment_version


class LRU:
    """A bounded mapping that forgets the least recently used entry. Lookups need no lock
    (a concurrent eviction only costs a rebuild); inserts take one. `misses` counts
    lookups that found nothing (i.e. builds). `entries` is the mapping itself, most recent
    last: the per-call path reads it directly (a method call costs more than the lookup), and
    moves a hit to the recent end only once more than `recency_from` entries are held (until
    eviction is in sight, recency is not worth its ~0.3 us a call)."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self.recency_from = maxsize // 2
        self.entries: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.misses = 0

    def get(self, key):
        v = self.entries.get(key)
        if v is None:
            self.misses += 1
            return None
        try:
            self.entries.move_to_end(key)
        except KeyError:  # evicted by another thread meanwhile: v is still valid
            pass
        return v

    def put(self, key, value):
        with self._lock:
            self.entries[key] = value
            self.entries.move_to_end(key)
            while len(self.entries) > self.maxsize:
                self.entries.popitem(last=False)
        return value

    def __len__(self):
        return len(self.entries)

    def clear(self):
        with self._lock:
            self.entries.clear()
            self.misses = 0


TENSOR_MAPS = LRU(MAX_TENSOR_MAPS)


def tensor_map(ptr: int, rows: int, cols: int, ld: int, box_rows: int, box_cols: int, bf16: bool = False,
               swizzle_128b: bool = True):
    """driver.TensorMap with these arguments, encoded once and kept in a bounded LRU: the
    `make_map` the fast path hands to `kernel_args`."""
    key = (ptr, rows, cols, ld, box_rows, box_cols, bf16, swizzle_128b)
    m = TENSOR_MAPS.get(key)
    if m is None:
        m = TENSOR_MAPS.put(key, driver.TensorMap(ptr, rows, cols, ld, box_rows, box_cols, bf16, swizzle_128b))
    return m


# ---- layouts -----------------------------------------------------------------------------

def operand_layouts(kind: str, a, b, mn_ok: tuple[bool, bool], M: int, N: int, K: int
                    ) -> tuple[layout.Operand, layout.Operand]:
    """How the kernel reads A (M x K) and B^T (N x K) of a validated call; kind "mm": b is
    (K, N), "nt": b is (N, K). mn_ok: the step reads an M-major A, an N-major B
    (common.reads_mn)."""
    folded = layout.fold_rows(a.shape, a.stride())
    if folded is None:
        a_op = layout.Operand(M, K, "K", layout.round_up(K, 8), False, "leading dimensions do not fold into rows")
    else:
        a_op = layout.operand(M, K, folded[1], a.stride(-1), ptr_aligned=a.data_ptr() % layout.ALIGN == 0,
                              mn_major_ok=mn_ok[0])
    n_stride, k_stride = (b.stride(1), b.stride(0)) if kind == "mm" else (b.stride(0), b.stride(1))
    b_op = layout.operand(N, K, n_stride if N > 1 else None, k_stride,
                          ptr_aligned=b.data_ptr() % layout.ALIGN == 0, mn_major_ok=mn_ok[1])
    return a_op, b_op


def output_layout(out, M: int, N: int) -> layout.Output:
    """How the kernel writes C: a fresh result in place (row stride N rounded up to 8), or
    `out` in place when its strides allow, else through a buffer copied into it."""
    if out is None:
        return layout.Output(M, N, layout.round_up(N, 8), True)
    if out.is_neg():  # a negated view: its memory holds -C (copy_ writes it so)
        return layout.Output(M, N, layout.round_up(N, 8), False, "out is a negated view")
    folded = layout.fold_rows(out.shape, out.stride())
    if folded is None:
        return layout.Output(M, N, layout.round_up(N, 8), False, "leading dimensions do not fold into rows")
    return layout.output(M, N, folded[1], out.stride(-1), ptr_aligned=out.data_ptr() % layout.ALIGN == 0)


def mn_flags(a_op: layout.Operand, b_op: layout.Operand) -> tuple[bool, bool]:
    """(A read M-major, B read N-major): in place, or from an MN-major copy."""
    return a_op.read_mn, b_op.read_mn


# ---- kernels -----------------------------------------------------------------------------

@contextlib.contextmanager
def _capture_relaxed():
    """Compiling and loading a module while a CUDA graph is captured: allowed for this thread
    (module load is not a stream operation, and nothing here synchronizes)."""
    if not torch.cuda.is_current_stream_capturing():
        yield
        return
    with driver.capture_mode_relaxed():
        yield


def device_index(device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


@contextlib.contextmanager
def building(dev: int):
    """Where a configuration's kernel is loaded and its launch built: on its device, and
    allowed while a CUDA graph is captured."""
    with _capture_relaxed(), torch.cuda.device(dev):
        yield


def prepare_kernel(st, dev: int, bf16: bool, defines: dict | None = None):
    return runner.prepare(st, dev, bf16=bf16, extra_defines=defines or None)


# ---- the teaching steps' copying path ---------------------------------------------------

def _aligned_contiguous(t, cols_multiple: int = 8):
    """t as a contiguous, 16-byte aligned row-major matrix whose row length is a multiple
    of `cols_multiple` elements (zero-padded); a copy only when needed."""
    rows, cols = t.shape
    pad = (-cols) % cols_multiple
    if pad == 0 and t.is_contiguous() and t.data_ptr() % 16 == 0:
        return t
    out = torch.zeros((rows, cols + pad), dtype=t.dtype, device=t.device)
    out[:, :cols].copy_(t)
    return out


def matmul_nt_copying(a, b, st: Step):
    """C = a @ b.T with a strict step (e.g. the teaching steps 1-3, which read contiguous
    operands with their own shape rules) on validated 2-D operands: copies into aligned,
    padded buffers as that step needs, launched without validating again. Returns a
    contiguous (M, N) tensor."""
    M, K = a.shape
    N = b.shape[0]
    a2, b2 = _aligned_contiguous(a), _aligned_contiguous(b)
    Kp = a2.shape[1]
    Np = N + (-N) % 8
    if not st.accepts(M, Np, Kp):
        raise ShapeError(f"step {st.key} cannot run {M}x{N}x{K}: "
                                + "; ".join(st.shape_problems(M, Np, Kp)))
    if Np != N:  # C's row stride must be 16-byte aligned: compute into a padded buffer
        b2 = torch.cat([b2, torch.zeros((Np - N, Kp), dtype=b2.dtype, device=b2.device)])
    c = runner.run_checked(st, a2, b2)  # the call was validated once (fastpath.validate)
    return c[:, :N].contiguous() if Np != N else c


# ---- configurations ----------------------------------------------------------------------

class Config:
    """A configuration without a fast launch: empty products, and the teaching steps (strict,
    contiguous operands) through copies (matmul_nt_copying)."""

    def __init__(self, kind: str, a, b, out, st, lead: tuple, N: int, K: int):
        self.kind, self.step, self.lead, self.N, self.K = kind, st, lead, N, K
        self.M = M = int(torch.Size(lead).numel())
        self.dtype, self.device = a.dtype, a.device
        self.dev = device_index(a.device)
        self.shape, self.strides = layout.result_strides(lead, N)
        self.a, self.b = operand_layouts(kind, a, b, reads_mn(st), M, N, K)
        self.c = output_layout(out, M, N)

    def __call__(self, a, b, out, pa: int, pb: int):
        M, N, K = self.M, self.N, self.K
        res = out if out is not None else torch.empty_strided(self.shape, self.strides, dtype=self.dtype,
                                                              device=self.device)
        if M == 0 or N == 0:
            return res
        if K == 0:
            return res.zero_()
        c = matmul_nt_copying(a.reshape(M, K), b.t() if self.kind == "mm" else b, self.step)
        return res.copy_(c.view(res.shape))


class _Fast(Config):
    """A TMA kernel's configuration: staging copies, result allocation, `out` handling; the
    subclass builds the launch (`_launch`)."""

    def __init__(self, kind: str, a, b, out, st, lead: tuple, N: int, K: int):
        super().__init__(kind, a, b, out, st, lead, N, K)
        M = self.M
        problems = self._shape_problems(M, N, K) + layout.problems(M, N, K)
        if problems:
            raise ShapeError(f"step {st.key} cannot run {M}x{N}x{K}: " + "; ".join(problems))
        self.bf16 = a.dtype == torch.bfloat16
        self.lda = self.a.ld if self.a.direct else self.a.staged_ld
        self.ldb = self.b.ld if self.b.direct else self.b.staged_ld
        self._maps = LRU(MAPS_PER_CONFIG)
        self._staged = not (self.a.direct and self.b.direct)
        self._copy, self._copy_ops = None, ()  # the subclass sets the staging copy's launch
        buffers = {}
        if not self.a.direct:
            buffers["a"] = ((self.K, self.a.staged_ld) if self.a.stage_mn else (M, self.a.staged_ld), a.dtype)
        if not self.b.direct:
            buffers["b"] = ((self.K, self.b.staged_ld) if self.b.stage_mn else (N, self.b.staged_ld), a.dtype)
        self.scratch = Scratch(self._scratch_shapes(buffers), a.device)
        # A fresh result with rows padded to 16 bytes owns its last row's padding too: the
        # kernels write it (a TMA store's last granule of a row; the small-M kernel's ldc columns)
        self._whole_rows = N % 8 != 0
        # the bytes an operand read in place and `out` span from their first element (out=a)
        self._a_span = layout.byte_span(a) if self.a.direct else 0
        self._b_span = layout.byte_span(b) if self.b.direct else 0
        self._out_span = layout.byte_span(out) if out is not None else 0

    def _shape_problems(self, M: int, N: int, K: int) -> list[str]:
        # TMA zero-fills the K edge and the result's rows are padded to 16 bytes, so the
        # step's multiple-of-8 rules apply to the padded sizes
        return self.step.shape_problems(M, layout.round_up(N, 8), layout.round_up(K, 8))

    def _scratch_shapes(self, buffers: dict) -> dict:
        """The configuration's scratch (name -> (shape, dtype)): the staging buffers, and what
        the subclass adds."""
        return buffers

    def _init_stage_copy(self, kernel) -> None:
        """The staged operands' copies as one launch of the module's staging kernel when each
        is a plain copy (staging.stage_copy_launch); else torch's copies (`_stage_a/_b`)."""
        ops = [(name, staging.copy_geometry(op)) for name, op in (("a", self.a), ("b", self.b)) if not op.direct]
        if ops and all(geo is not None for _, geo in ops):
            with building(self.dev):
                self._copy = staging.stage_copy_launch(kernel, [geo for _, geo in ops])
            self._copy_ops = tuple(name for name, _ in ops)

    # -- staging copies (only for operands the kernel cannot read in place) --
    # Copies go to scratch (aligned, lines padded to 16 bytes), also when the source is
    # contiguous but misaligned. An MN-major source read by an MN-major kernel stays
    # MN-major (`stage_mn`): a plain copy, no transpose.
    def _stage_a(self, a, buf):
        src = a.reshape(self.M, self.K)
        return self._stage_lines(src.t() if self.a.stage_mn else src, buf)

    def _stage_b(self, b, buf):
        n_by_k = b.t() if self.kind == "mm" else b  # (N, K)
        return self._stage_lines(n_by_k.t() if self.b.stage_mn else n_by_k, buf)

    @staticmethod
    def _stage_lines(x, buf) -> int:
        """x (lines, cols) copied into the first cols of buf's rows; buf's address."""
        (buf if buf.shape[1] == x.shape[1] else buf[:, :x.shape[1]]).copy_(x)
        return buf.data_ptr()

    def __call__(self, a, b, out, pa: int, pb: int):
        if _current_device() != self.dev:
            with torch.cuda.device(self.dev):  # inside, the current device is ours: no recursion
                return self(a, b, out, pa, pb)
        if self.scratch.shapes:
            with self.scratch.lock:  # from the first copy to the last launch (Scratch)
                return self._run(a, b, out, pa, pb)
        return self._run(a, b, out, pa, pb)

    def _run(self, a, b, out, pa: int, pb: int):
        if out is not None and out.requires_grad and _grad_enabled():
            raise RuntimeError("matmul: out= does not support automatic differentiation (out requires grad)")
        a_ptr, b_ptr = pa, pb  # the operands' own memory (pa, pb become the staged copies')
        stream = _raw_stream(self.dev)
        scratch = self.scratch.get(stream, _capturing()) if self.scratch.shapes else None
        if self._copy is not None:  # one launch for both operands
            src = {"a": pa, "b": pb}
            ptrs = []
            for name in self._copy_ops:
                ptrs += [src[name], scratch[name].data_ptr()]
            self._copy(stream, (), tuple(ptrs) + tuple(ptrs[:2]) * (2 - len(self._copy_ops)))
            if "a" in self._copy_ops:
                pa = scratch["a"].data_ptr()
            if "b" in self._copy_ops:
                pb = scratch["b"].data_ptr()
        elif self._staged:
            if not self.a.direct:
                pa = self._stage_a(a, scratch["a"])
            if not self.b.direct:
                pb = self._stage_b(b, scratch["b"])
        if out is None:
            # a's device and dtype are the configuration's; Tensor.new_empty_strided parses
            # fewer arguments than torch.empty_strided (a subclass might override it: not used)
            if self._whole_rows:
                c = torch.empty(self.M * self.c.ld, dtype=self.dtype, device=self.device).as_strided(
                    self.shape, self.strides)
            else:
                c = (a.new_empty_strided(self.shape, self.strides) if a.__class__ is _Tensor else
                     torch.empty_strided(self.shape, self.strides, dtype=self.dtype, device=self.device))
        elif self.c.direct and not self._out_overlaps(out.data_ptr(), a_ptr, b_ptr):
            c = out
        else:  # through a buffer: out's layout, or out is an operand's memory (out=a: the kernel
            c = torch.empty((self.M, self.c.ld), dtype=self.dtype, device=self.device)  # would overwrite its input)
        self._launch(pa, pb, c.data_ptr(), stream, scratch)
        if out is not None:
            if c is not out:
                out.copy_((c if self.c.ld == self.N else c[:, :self.N]).view(out.shape))
            else:  # written behind autograd's back: a tensor saved for backward must not pass as unchanged
                _increment_version((out,))
            return out
        return c

    def _out_overlaps(self, pc: int, pa: int, pb: int) -> bool:
        """`out` shares bytes with an operand the kernel reads in place (a staged one was copied first)."""
        end = pc + self._out_span
        return bool(self._a_span and pa < end and pc < pa + self._a_span
                    or self._b_span and pb < end and pc < pb + self._b_span)

    def _launch(self, pa: int, pb: int, pc: int, stream: int, scratch: dict | None) -> None:
        raise NotImplementedError

    def _kernel_args(self, pa: int, pb: int, pc: int) -> list:
        """The launch's arguments for these pointers, tensor maps built by `tensor_map`."""
        raise NotImplementedError

    def _map_addresses(self, pa: int, pb: int, pc: int) -> tuple:
        """The tensor-map addresses of a pointer triple: a small memo per configuration over
        the tensor-map LRU, so a call with known pointers costs one lookup (hits skip the
        recency update: an evicted triple is rebuilt from the LRU, not re-encoded)."""
        got = self._maps.entries.get((pa, pb, pc))
        if got is None:
            args = self._kernel_args(pa, pb, pc)
            maps = tuple(args[i] for i in self.launch.map_slots)
            got = self._maps.put((pa, pb, pc), (tuple(m.address() for m in maps), maps))
        return got[0]


# Stream-K workspaces (flags + slots), zeroed once per (device, stream): the kernel lowers
# every flag it raised, and launches on one stream run in order. Never shared between
# streams (two launches at once would meet on the same flags).
_WORKSPACES: dict[tuple[int, int], torch.Tensor] = {}


def stream_k_workspace(dev: int, stream: int, floats: int, device) -> torch.Tensor:
    """A zeroed stream-K workspace of at least `floats` for launches on `stream`. While a
    CUDA graph is captured a fresh one (from the graph's pool, zeroed in the graph), so a
    replay never shares flags with launches outside the graph."""
    if _capturing():
        return torch.zeros(floats, dtype=torch.float32, device=device)
    ws = _WORKSPACES.get((dev, stream))
    if ws is None or ws.numel() < floats:
        # a smaller one still in use by queued launches on this stream is freed in stream order
        ws = _WORKSPACES[(dev, stream)] = torch.zeros(floats, dtype=torch.float32, device=device)
    return ws


class LadderConfig(_Fast):
    """A ladder step (a `Step` with TMA): one launch; M-major A / N-major B read in place
    when the step has `mn_major`; a stream-K step's workspace per stream
    (`stream_k_workspace`)."""

    def __init__(self, kind: str, a, b, out, st: Step, lead: tuple, N: int, K: int):
        super().__init__(kind, a, b, out, st, lead, N, K)
        a_mn, b_mn = mn_flags(self.a, self.b)
        self.map_args = dict(bf16=self.bf16, a_mn=a_mn, b_mn=b_mn, lda=self.lda, ldb=self.ldb, ldc=self.c.ld)
        self.defines = st.layout_defines(a_mn, b_mn)
        with building(self.dev):
            prep = prepare_kernel(st, self.dev, self.bf16, self.defines)
            grid = runner.launch_grid(st, prep.kernel, self.M, N, self.dev)
        self.sk_deal = st.stream_k_deal(self.M, N, K, grid[0])  # (0, 1) for steps without stream-K
        self.ws_floats = st.workspace_floats(grid[0]) if self.sk_deal[0] else 0
        template = st.kernel_args(0, 0, 0, self.M, N, K, make_map=driver.MapSlot, sk_tiles=self.sk_deal[0],
                                  sk_ctas=self.sk_deal[1], **self.map_args)
        self.launch = driver.ReusableLaunch(prep.kernel, grid, (st.threads, 1, 1), template,
                                            dynamic_smem=st.dynamic_smem, cluster=st.cluster)
        self._init_stage_copy(prep.kernel)

    def _launch(self, pa: int, pb: int, pc: int, stream: int, scratch: dict | None) -> None:
        maps = self._map_addresses(pa, pb, pc)
        if self.ws_floats:
            ws = stream_k_workspace(self.dev, stream, self.ws_floats, self.device)
            self.launch(stream, maps, (ws.data_ptr(),))
        else:
            self.launch(stream, maps)

    def _kernel_args(self, pa: int, pb: int, pc: int) -> list:
        return self.step.kernel_args(pa, pb, pc, self.M, self.N, self.K, make_map=tensor_map, **self.map_args)


class SmallMConfig(_Fast):
    """The small-M split-K family (families/smallm.py): A K-major (else staged), B K-major or
    a row-major (K, N) read in place or from an N-major copy (the GL_B_MN build), C written
    with row stride N rounded up to 8 (the kernel computes the padding columns too, as
    zeros: a fresh result owns them; else through a buffer), the deal of work fixed per
    configuration, the fp32 partials of split tiles in the configuration's per-stream
    scratch (`Scratch`), then the deterministic reduction (programmatic launch)."""

    def __init__(self, kind: str, a, b, out, fam: SmallM, lead: tuple, N: int, K: int):
        super().__init__(kind, a, b, out, fam, lead, N, K)
        M, ldc = self.M, self.ldc
        if not (self.c.direct and self.c.ld == ldc):
            self.c = layout.Output(M, N, ldc, False, self.c.why or f"the small-M kernel writes C with row stride {ldc}")
        self.planes = self.deal.planes
        b_mn = mn_flags(self.a, self.b)[1]  # a row-major (K, N) b (the family's A is K-major)
        self.map_args = dict(bf16=self.bf16, lda=self.lda, ldb=self.ldb, ldc=ldc, b_mn=b_mn)
        self.defines = fam.layout_defines(b_mn=b_mn)
        template = fam.kernel_args(0, 0, 0, 0, M, N, K, self.deal.kernel_units, make_map=driver.MapSlot,
                                   **self.map_args)
        with building(self.dev):
            prep = prepare_kernel(fam, self.dev, self.bf16, self.defines)
            reduce = runner.reduce_kernel(prep.kernel, fam.reduce_entry) if self.planes else None
        self.launch = driver.ReusableLaunch(prep.kernel, self.deal.grid, (fam.threads, 1, 1), template,
                                            dynamic_smem=fam.dynamic_smem, cluster=self.deal.cluster,
                                            pdl=fam.chain_pdl)
        self._init_stage_copy(prep.kernel)
        self.reduce = None
        if reduce is not None:
            self.reduce = driver.ReusableLaunch(reduce, fam.reduce_grid(M, ldc), (REDUCE_THREADS, 1, 1),
                                                fam.reduce_args(0, 0, M, ldc, K, self.deal.kernel_units), pdl=fam.pdl)

    @property
    def ldc(self) -> int:
        """The columns the kernel computes and writes: N rounded up to 8 (the padding as zeros)."""
        return layout.round_up(self.N, 8)

    @functools.cached_property
    def deal(self) -> Deal:
        """The work's deal over the CTAs, fixed per configuration (first read while the base
        class sizes the scratch)."""
        return self.step.deal(self.M, self.ldc, self.K, cuda_device.num_sms(self.dev))

    def _shape_problems(self, M: int, N: int, K: int) -> list[str]:
        # as _Fast's, and K's alignment rule depends on how B is read (smallm.ALIGNED_K)
        return self.step.shape_problems(M, layout.round_up(N, 8), layout.round_up(K, 8), b_mn=self.b.read_mn)

    def _scratch_shapes(self, buffers: dict) -> dict:
        # the fp32 partials of split tiles, written by the main kernel and read by the reduction
        if self.deal.planes:
            buffers["ws"] = ((self.deal.planes, self.M, self.ldc), torch.float32)
        return buffers

    def _launch(self, pa: int, pb: int, pc: int, stream: int, scratch: dict | None) -> None:
        maps = self._map_addresses(pa, pb, pc)
        if self.reduce is None:
            self.launch(stream, maps, (0, pc))
            return
        ws = scratch["ws"].data_ptr()
        self.launch(stream, maps, (ws, pc))
        self.reduce(stream, (), (ws, pc))

    def _kernel_args(self, pa: int, pb: int, pc: int) -> list:
        return self.step.kernel_args(pa, pb, 0, pc, self.M, self.N, self.K, self.deal.kernel_units, make_map=tensor_map,
                                     **self.map_args)


def make_config(kind: str, a, b, out, st, lead: tuple, N: int, K: int) -> Config:
    """The configuration of a validated call that runs `st` (None: an empty product)."""
    M = int(torch.Size(lead).numel())
    if st is None or M == 0 or N == 0 or K == 0 or not st.uses_tma:
        return Config(kind, a, b, out, st, lead, N, K)
    if isinstance(st, Step):
        return LadderConfig(kind, a, b, out, st, lead, N, K)
    return SmallMConfig(kind, a, b, out, st, lead, N, K)
