"""The library's hot path: `matmul` / `matmul_nt` validated once per configuration, then only
launched.

A configuration is everything a launch depends on except the data pointers: call kind,
step, dtype, devices, shapes, strides, pointer alignment and the `out` layout. The first call
of a configuration checks the inputs (the same checks and messages as before), classifies
each operand's layout (layout.py: read in place or staged by a copy), compiles and loads
the kernel and builds the launch (grid, cluster, shared memory, argument array). Later
calls look the configuration up, allocate the result with torch (current stream, caching
allocator: CUDA-graph safe), find each tensor map by (descriptor, pointer) in a bounded LRU
and launch on `torch.cuda.current_stream()` — the stream is set per call, never cached.

Under torch.compile, or when an input requires grad, the call goes through the
`gemm_ladder::matmul` custom op (torch_ops.py) instead, which traces and differentiates.
"""
from __future__ import annotations

import contextlib
import ctypes
import threading
from collections import OrderedDict

import torch

from . import api, driver, launch, layout
from .steps import ShapeError, Step, get_step

MAX_CONFIGS = 256  # prepared launches kept (per process, all devices)
MAX_TENSOR_MAPS = 1024  # encoded CUtensorMaps kept: a model reuses its weights and buffers
MAPS_PER_CONFIG = 32  # (A, B, C) pointer triples remembered per configuration

# Per-call CUDA queries: the raw forms skip building Python stream/device objects.
_raw_stream = getattr(torch._C, "_cuda_getCurrentRawStream", None) or (
    lambda dev: torch.cuda.current_stream(dev).cuda_stream)
_current_device = getattr(torch._C, "_cuda_getDevice", None) or (lambda: torch.cuda.current_device())
_grad_enabled = torch.is_grad_enabled
_compiling = torch.compiler.is_compiling


class LRU:
    """A bounded mapping that forgets the least recently used entry. Lookups need no lock
    (a concurrent eviction only costs a rebuild); inserts take one. `misses` counts
    lookups that found nothing (i.e. builds)."""

    def __init__(self, maxsize: int):
        self.maxsize = maxsize
        self._d: OrderedDict = OrderedDict()
        self._lock = threading.Lock()
        self.misses = 0

    def get(self, key):
        v = self._d.get(key)
        if v is None:
            self.misses += 1
            return None
        try:
            self._d.move_to_end(key)
        except KeyError:  # evicted by another thread meanwhile: v is still valid
            pass
        return v

    def put(self, key, value):
        with self._lock:
            self._d[key] = value
            self._d.move_to_end(key)
            while len(self._d) > self.maxsize:
                self._d.popitem(last=False)
        return value

    def __len__(self):
        return len(self._d)

    def clear(self):
        with self._lock:
            self._d.clear()
            self.misses = 0


_CONFIGS = LRU(MAX_CONFIGS)
_TMAPS = LRU(MAX_TENSOR_MAPS)


def tensor_map(desc: tuple, ptr: int):
    """(TensorMap, host address of its 128 bytes) for desc = (device, rows, cols, row
    stride, box rows, box cols, bf16) at `ptr`; encoded once per (desc, ptr)."""
    key = (desc, ptr)
    hit = _TMAPS.get(key)
    if hit is None:
        _dev, rows, cols, ld, box_rows, box_cols, bf16 = desc
        m = driver.TensorMap(ptr, rows, cols, ld, box_rows, box_cols, bf16)
        hit = _TMAPS.put(key, (m, m.address()))
    return hit


class _Launch:
    """cuLaunchKernelEx with a config and an argument array built once; per call only the
    stream and the three tensor-map addresses are written (under a lock: one array per
    configuration). The driver copies the arguments at launch, so rewriting them for the
    next call is safe, also while a graph is being captured."""

    def __init__(self, kernel, grid, block, dynamic_smem: int, cluster, scalars: tuple[int, ...], device: int):
        cu = driver._cu()
        self.device = device
        self.function = kernel.function
        self._scalars = [ctypes.c_int32(v) for v in scalars]
        self._args = (ctypes.c_void_p * (3 + len(scalars)))(0, 0, 0, *[ctypes.addressof(s) for s in self._scalars])
        self._args_ptr = ctypes.addressof(self._args)
        cfg = cu.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = grid
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = block
        cfg.sharedMemBytes = dynamic_smem
        attrs = []
        if cluster is not None and tuple(cluster) != (1, 1, 1):
            attr = cu.CUlaunchAttribute()
            attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
            attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
            attrs.append(attr)
        cfg.attrs = attrs
        cfg.numAttrs = len(attrs)
        self.config = cfg
        self._launch = cu.cuLaunchKernelEx
        self._stream_type = cu.CUstream
        self._streams: dict[int, object] = {}
        self._ok = cu.CUresult.CUDA_SUCCESS
        self._retry = (cu.CUresult.CUDA_ERROR_INVALID_CONTEXT,)
        self._lock = threading.Lock()
        self.what = f"cuLaunchKernelEx({kernel.compiled.name})"

    def __call__(self, stream: int, maps: tuple) -> None:
        """Launch on `stream` with maps = (A, B, C tensor-map addresses, ...)."""
        s = self._streams.get(stream)
        if s is None:
            if len(self._streams) > 64:
                self._streams.clear()
            s = self._streams[stream] = self._stream_type(stream)
        args = self._args
        with self._lock:
            self.config.hStream = s
            args[0], args[1], args[2] = maps[0], maps[1], maps[2]
            res = self._launch(self.config, self.function, self._args_ptr, 0)
            if res[0] != self._ok and res[0] in self._retry:
                # a thread whose driver context was never set (torch set the device only
                # through the runtime): make the primary context current and retry once
                driver.ensure_context(self.device)
                res = self._launch(self.config, self.function, self._args_ptr, 0)
        if res[0] != self._ok:
            driver.check(res, self.what)


# ---- validation (first call of a configuration only) --------------------------------------

def _check_devices(what: str, a, b, out) -> None:
    if a.device.type != "cuda" or b.device.type != "cuda":
        hint = "" if torch.cuda.is_available() else " (and no CUDA GPU is available here)"
        raise ValueError(f"{what}: a is on {a.device} and b on {b.device}; both must be CUDA tensors{hint}")
    if a.device != b.device:
        raise ValueError(f"{what}: a and b are on different devices ({a.device}, {b.device})")
    if out is not None and out.device != a.device:
        raise ValueError(f"{what}: out is on {out.device}, a and b on {a.device}")
    launch.check_device(a.device)


def validate(kind: str, a, b, out=None) -> tuple[tuple, int, int]:
    """All checks of a call, in the order types, dtypes, ranks, shapes, out, devices, so
    the message names the first problem. Returns (leading dims of the result, N, K)."""
    lead, N, K = check_call(kind, a, b, out)
    _check_devices("matmul" if kind == "mm" else "matmul_nt", a, b, out)
    return lead, N, K


def check_call(kind: str, a, b, out=None) -> tuple[tuple, int, int]:
    """The checks that need no device (also the fake op's, on meta or fake tensors)."""
    what = "matmul" if kind == "mm" else "matmul_nt"
    launch.check_types(a, b, what=what)
    if kind == "mm":
        if a.dim() < 2 or b.dim() != 2:
            raise ValueError(f"matmul: expects a with >= 2 dims and 2-D b, got {tuple(a.shape)} and {tuple(b.shape)}")
        K, N = b.shape
        if a.shape[-1] != K:
            raise ValueError(f"matmul: a is {'x'.join(map(str, a.shape))} and b is {K}x{N}: inner dimensions differ")
    else:
        if a.dim() != 2 or b.dim() != 2:
            raise ValueError(f"matmul_nt: a and b must be 2-D, got {tuple(a.shape)} and {tuple(b.shape)}")
        N, K = b.shape
        if a.shape[1] != K:
            raise ValueError(f"matmul_nt: a is {a.shape[0]}x{a.shape[1]} and b is {N}x{K}: a @ b.T needs equal K")
    lead = tuple(a.shape[:-1])
    if out is not None:
        if not isinstance(out, torch.Tensor) or out.dtype != a.dtype or tuple(out.shape) != (*lead, N):
            got = f"a {tuple(out.shape)} {out.dtype} tensor" if isinstance(out, torch.Tensor) else type(out).__name__
            raise ValueError(f"{what}: out must be a {(*lead, N)} {a.dtype} tensor on {a.device}, got {got}")
    return lead, N, K


def resolve_step(step, M: int, N: int, K: int, dtype) -> Step:
    """The step a call runs: the one asked for, else the library's choice for the shape."""
    if step is None:
        return api.best_step()
    return step if isinstance(step, Step) else get_step(step)


# ---- planning: layouts and launches ------------------------------------------------------

def plan_layout(kind: str, a, b, out, st: Step, lead: tuple, N: int, K: int):
    """(A, B, C) layouts of a validated call: layout.Operand, Operand, layout.Output."""
    M = 1
    for d in lead:
        M *= d
    mn_ok = bool(getattr(st, "supports_mn_major", False))
    folded = layout.fold_rows(a.shape, a.stride())
    if folded is None:
        a_op = layout.Operand(M, K, "K", layout.round_up(K, 8), False, "leading dimensions do not fold into rows")
    else:
        a_op = layout.operand(M, K, folded[1], a.stride(-1), ptr_aligned=a.data_ptr() % layout.ALIGN == 0,
                              mn_major_ok=mn_ok)
    n_stride, k_stride = (b.stride(1), b.stride(0)) if kind == "mm" else (b.stride(0), b.stride(1))
    b_op = layout.operand(N, K, n_stride if N > 1 else None, k_stride,
                          ptr_aligned=b.data_ptr() % layout.ALIGN == 0, mn_major_ok=mn_ok)
    if out is None:
        c = layout.Output(M, N, layout.round_up(N, 8), True)
    else:
        folded = layout.fold_rows(out.shape, out.stride())
        c = (layout.Output(M, N, layout.round_up(N, 8), False, "leading dimensions do not fold into rows")
             if folded is None else
             layout.output(M, N, folded[1], out.stride(-1), ptr_aligned=out.data_ptr() % layout.ALIGN == 0))
    return a_op, b_op, c


def operand_map(dev: int, op: layout.Operand, box_mn: int, st: Step, bf16: bool) -> tuple:
    """Tensor-map descriptor of an operand. K-major: the (rows x k) matrix, box (tile rows x
    BK). MN-major (only for steps with supports_mn_major): the (k x rows) matrix as stored,
    box (BK x 64), one 128-byte swizzle atom wide — the kernel loads tile/64 of them per
    stage and is built with GL_A_MN_MAJOR / GL_B_MN_MAJOR."""
    if op.direct and op.major == "MN":
        return (dev, op.k, op.rows, op.ld, st.bk, 64, bf16)
    return (dev, op.rows, op.k, op.ld if op.direct else op.staged_ld, box_mn, st.bk, bf16)


@contextlib.contextmanager
def _capture_relaxed():
    """Compiling and loading a module while a CUDA graph is captured: allowed for this thread
    (module load is not a stream operation, and nothing here synchronizes)."""
    if not torch.cuda.is_current_stream_capturing():
        yield
        return
    cu = driver._cu()
    old = driver.check(cu.cuThreadExchangeStreamCaptureMode(
        cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED), "cuThreadExchangeStreamCaptureMode")
    try:
        yield
    finally:
        driver.check(cu.cuThreadExchangeStreamCaptureMode(old), "cuThreadExchangeStreamCaptureMode")


def _device_index(device) -> int:
    return device.index if device.index is not None else torch.cuda.current_device()


def prepare_kernel(st: Step, dev: int, bf16: bool, defines: dict | None = None):
    with _capture_relaxed(), torch.cuda.device(dev):
        return launch.prepare(st, dev, bf16=bf16, extra_defines=defines or None)


class Config:
    """One prepared configuration: how to stage operands, allocate C and launch."""

    def __init__(self, kind: str, a, b, out, st: Step, lead: tuple, N: int, K: int):
        self.kind, self.step, self.lead, self.N, self.K = kind, st, lead, N, K
        self.M = M = int(torch.Size(lead).numel())
        self.dtype, self.device = a.dtype, a.device
        self.dev = dev = _device_index(a.device)
        self.shape, self.strides = layout.result_strides(lead, N)
        self.a, self.b, self.c = plan_layout(kind, a, b, out, st, lead, N, K)
        self.launch = None
        if M == 0 or N == 0 or K == 0 or not st.uses_tma:
            return  # degenerate or a teaching step: see __call__
        problems = st.shape_problems(M, layout.round_up(N, 8), layout.round_up(K, 8)) + layout.problems(M, N, K)
        if problems:
            raise ShapeError(f"step {st.key} cannot run {M}x{N}x{K}: " + "; ".join(problems))
        bf16 = a.dtype == torch.bfloat16
        defines = {}
        if self.a.direct and self.a.major == "MN":
            defines["GL_A_MN_MAJOR"] = 1
        if self.b.direct and self.b.major == "MN":
            defines["GL_B_MN_MAJOR"] = 1
        prep = prepare_kernel(st, dev, bf16, defines)
        self.a_desc = operand_map(dev, self.a, st.bm, st, bf16)
        self.b_desc = operand_map(dev, self.b, st.bn, st, bf16)
        self.c_desc = (dev, M, N, self.c.ld, st.bm, 64, bf16)
        self._maps = LRU(MAPS_PER_CONFIG)
        self.launch = _Launch(prep.kernel, st.grid(M, N, launch.num_sms(dev)), (st.threads, 1, 1),
                              st.dynamic_smem, getattr(st, "cluster", None), (M, N, K), dev)

    # -- staging copies (only for operands the kernel cannot read in place) --
    # Copies go to fresh storage (aligned, rows padded to 16 bytes), also when the source
    # is contiguous but misaligned; with K a multiple of 8 that is one clone.
    def _stage_a(self, a):
        K, kp = self.K, self.a.staged_ld
        if kp == K:
            return a.clone(memory_format=torch.contiguous_format)
        buf = torch.empty((*self.lead, kp), dtype=self.dtype, device=self.device)
        buf[..., :K].copy_(a)
        return buf

    def _stage_b(self, b):
        K, kp = self.K, self.b.staged_ld
        bt = b.t() if self.kind == "mm" else b
        if kp == K:
            return bt.clone(memory_format=torch.contiguous_format)
        buf = torch.empty((self.N, kp), dtype=self.dtype, device=self.device)
        buf[:, :K].copy_(bt)
        return buf

    def __call__(self, a, b, out, pa: int, pb: int):
        if self.launch is None:
            return self._slow(a, b, out)
        if _current_device() != self.dev:
            with torch.cuda.device(self.dev):
                return self._run(a, b, out, pa, pb)
        return self._run(a, b, out, pa, pb)

    def _run(self, a, b, out, pa: int, pb: int):
        if not self.a.direct:
            a = self._stage_a(a)
            pa = a.data_ptr()
        if not self.b.direct:
            b = self._stage_b(b)
            pb = b.data_ptr()
        if out is None:
            c = torch.empty_strided(self.shape, self.strides, dtype=self.dtype, device=self.device)
        elif self.c.direct:
            c = out
        else:
            c = torch.empty((self.M, self.c.ld), dtype=self.dtype, device=self.device)
        pc = c.data_ptr()
        maps = self._maps._d.get((pa, pb, pc)) or self._encode(pa, pb, pc)
        self.launch(_raw_stream(self.dev), maps)
        if out is not None and c is not out:
            out.copy_((c if self.c.ld == self.N else c[:, :self.N]).view(out.shape))
            return out
        return c

    def _encode(self, pa: int, pb: int, pc: int) -> tuple:
        """(A, B, C map addresses, the maps): a small memo per configuration over the
        tensor-map LRU, so a call with known pointers costs one lookup (hits skip the
        recency update: an evicted triple is rebuilt from the LRU, not re-encoded)."""
        ma, mb, mc = tensor_map(self.a_desc, pa), tensor_map(self.b_desc, pb), tensor_map(self.c_desc, pc)
        return self._maps.put((pa, pb, pc), (ma[1], mb[1], mc[1], (ma[0], mb[0], mc[0])))

    def _slow(self, a, b, out):
        """Empty products, and the teaching steps (strict, contiguous operands) through copies."""
        M, N, K = self.M, self.N, self.K
        res = out if out is not None else torch.empty_strided(self.shape, self.strides, dtype=self.dtype,
                                                              device=self.device)
        if M == 0 or N == 0:
            return res
        if K == 0:
            return res.zero_()
        c = api.matmul_nt_copying(a.reshape(M, K), b.t() if self.kind == "mm" else b, self.step)
        return res.copy_(c.view(res.shape))


def _key(kind, a, b, out, step, pa, pb):
    return (kind, step if step is None or step.__class__ is str else id(step),
            a.dtype, b.dtype, a.device, b.device, a.shape, a.stride(), b.shape, b.stride(), pa & 15, pb & 15,
            None if out is None else (out.dtype, out.device, out.shape, out.stride(), out.data_ptr() & 15))


def config_for(kind: str, a, b, out=None, step=None) -> Config:
    """The prepared configuration of a call (validating and building it on first use)."""
    key = _key(kind, a, b, out, step, a.data_ptr(), b.data_ptr())
    return _CONFIGS._d.get(key) or _build(key, kind, a, b, out, step)


def _build(key, kind, a, b, out, step) -> Config:
    _CONFIGS.misses += 1
    lead, N, K = validate(kind, a, b, out)
    M = int(torch.Size(lead).numel())
    cfg = Config(kind, a, b, out, resolve_step(step, M, N, K, a.dtype), lead, N, K)
    cfg.step_ref = step  # keeps an id()-keyed Step alive as long as its entry
    return _CONFIGS.put(key, cfg)


def run(kind: str, a, b, out=None, step=None):
    """The raw path (no custom-op routing): kind "mm" is a @ b, "nt" is a @ b.T."""
    try:
        pa, pb = a.data_ptr(), b.data_ptr()
        key = _key(kind, a, b, out, step, pa, pb)
    except Exception:  # not tensors, or tensors without storage: the checks name the problem
        validate(kind, a, b, out)
        raise
    d = _CONFIGS._d  # the LRU's lookup, inlined: this is the per-call path
    cfg = d.get(key)
    if cfg is None:
        cfg = _build(key, kind, a, b, out, step)
    else:
        try:
            d.move_to_end(key)
        except KeyError:  # evicted meanwhile by another thread; cfg is still valid
            pass
    return cfg(a, b, out, pa, pb)


def _via_op(kind: str, a, b, out, step):
    key = None if step is None else (step if isinstance(step, str) else step.key)
    res = torch.ops.gemm_ladder.matmul(a, b.t() if kind == "nt" else b, key)
    if out is None:
        return res
    if _grad_enabled() and (a.requires_grad or b.requires_grad):
        raise RuntimeError("matmul: out= does not support automatic differentiation (an input requires grad)")
    return out.copy_(res)


def matmul(a, b, out=None, *, step: Step | str | None = None):
    """a @ b for a (..., M, K) and b (K, N), fp16/bf16 CUDA tensors; like torch.matmul.

    Leading dimensions of `a` fold into M. Operands are read in place when the kernel can
    (TMA: one contiguous dimension, 16-byte aligned pointer and stride); `out` is written
    in place when its row stride allows. The result is row-major with its row stride
    rounded up to 8 elements (contiguous when N is a multiple of 8)."""
    if _compiling() or (_grad_enabled() and (getattr(a, "requires_grad", False) or getattr(b, "requires_grad", False))):
        return _via_op("mm", a, b, out, step)
    return run("mm", a, b, out, step)


def matmul_nt(a, b, out=None, *, step: Step | str | None = None):
    """C = a @ b.T for a (M, K) and b (N, K): both operands K-major, the kernels' native
    layout. `out`, if given, is an (M, N) tensor of the same dtype (any strides)."""
    if _compiling() or (_grad_enabled() and (getattr(a, "requires_grad", False) or getattr(b, "requires_grad", False))):
        return _via_op("nt", a, b, out, step)
    return run("nt", a, b, out, step)


def warmup(device=None, dtypes=(torch.float16, torch.bfloat16), step: Step | str | None = None) -> None:
    """Compile and load the kernel(s) `matmul` uses now, so that a later first call —
    e.g. inside CUDA graph capture — does no JIT work."""
    dev = _device_index(torch.device("cuda", device) if isinstance(device, int) else torch.device(device or "cuda"))
    launch.check_device(torch.device("cuda", dev))
    st = resolve_step(step, 0, 0, 0, None)
    for dt in dtypes:
        prepare_kernel(st, dev, dt == torch.bfloat16)


def cache_info() -> dict:
    """Sizes of the caches, and how many configurations / tensor maps were built."""
    return {"configs": len(_CONFIGS), "configs_max": _CONFIGS.maxsize, "configs_built": _CONFIGS.misses,
            "tensor_maps": len(_TMAPS), "tensor_maps_max": _TMAPS.maxsize, "tensor_maps_encoded": _TMAPS.misses}


def cache_clear() -> None:
    _CONFIGS.clear()
    _TMAPS.clear()


from . import torch_ops  # noqa: E402,F401  (registers gemm_ladder::matmul, which matmul routes to)
