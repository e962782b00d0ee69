"""The fp8 family's strict runner: one fp8 kernel (an entry of families/fp8.py, or the ladder's
step 11) on torch tensors — validate what the kernel needs, compile (cached), load, launch.
It never copies or pads; `gemm_ladder.scaled_mm` (fp8_api.py) is the user's door, with
torch._scaled_mm's layouts and its checks, and calls this with the kernel's."""
from __future__ import annotations

import math

from ..cuda import device as cuda_device
from ..cuda import driver
from ..families.common import ConfigError, ShapeError
from ..families.fp8 import SCALE_BLOCK, Fp8Entry, Variant, choose, get
from .fastconfig import _raw_stream
from .runner import check_device

_FP8 = {"float8_e4m3fn": False, "float8_e5m2": True}  # dtype name -> is e5m2
_LOADED: dict[tuple, driver.LoadedKernel] = {}


def _name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def scale_shapes(mode: str, M: int, N: int, K: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The kernel's scale tensors for a mode: numel 1 each, (M,) and (N,), or the block grids."""
    kb = -(-K // SCALE_BLOCK)
    return {"tensor": ((1,), (1,)), "row": ((M,), (N,)),
            "block": ((M, kb), (-(-N // SCALE_BLOCK), kb))}[mode]


def _check(entry: Fp8Entry, a, b, scale_a, scale_b, mode: str, out_dtype, bias) -> tuple[int, int, int, Variant]:
    import torch
    for name, t in (("a", a), ("b", b)):
        if not isinstance(t, torch.Tensor) or _name(t.dtype) not in _FP8:
            raise TypeError(f"{entry.key}: {name} must be a float8_e4m3fn or float8_e5m2 tensor")
        if t.dim() != 2 or not t.is_contiguous() or t.data_ptr() % 16:
            raise ValueError(f"{entry.key}: {name} must be a 2-D contiguous (K-major), 16-byte aligned tensor")
    M, K = a.shape
    N, Kb = b.shape
    if K != Kb:
        raise ValueError(f"{entry.key}: a is {M}x{K}, b is {N}x{Kb}: C = A @ B^T needs equal K")
    out = _name(out_dtype)
    v = Variant(mode=mode, out=out if out in ("bfloat16", "float16", "float32") else "?", bias=bias is not None,
                a_e5m2=_FP8[_name(a.dtype)], b_e5m2=_FP8[_name(b.dtype)])
    if problem := entry.variant_problem(v):
        raise ConfigError(f"{entry.key}: {problem}")
    if problems := entry.shape_problems(M, N, K, out=out):
        raise ShapeError(f"{entry.key} cannot take M={M}, N={N}, K={K}: " + "; ".join(problems))
    want_a, want_b = scale_shapes(mode, M, N, K)
    for name, t, want in (("scale_a", scale_a, want_a), ("scale_b", scale_b, want_b)):
        if (not isinstance(t, torch.Tensor) or t.dtype != torch.float32 or not t.is_contiguous()
                or t.numel() != math.prod(want) or (mode == "block" and tuple(t.shape) != want)):
            raise ValueError(f"{entry.key}: {name} must be a contiguous float32 tensor of shape {want} "
                             f"for {mode} scales")
    if bias is not None and (bias.dtype != out_dtype or tuple(bias.shape) != (N,) or not bias.is_contiguous()):
        raise ValueError(f"{entry.key}: bias must be a contiguous ({N},) tensor of {out}")
    tensors = (a, b, scale_a, scale_b) + ((bias,) if bias is not None else ())
    if any(t.device.type != "cuda" or t.device != a.device for t in tensors):
        raise ValueError(f"{entry.key}: a, b, the scales and bias must be CUDA tensors on one device")
    return M, N, K, v


def load(entry: Fp8Entry, v: Variant, dev: int) -> driver.LoadedKernel:
    """The entry's build for this call variant, compiled (disk cache) and loaded once per process."""
    key = (entry.key, v, dev)
    if key not in _LOADED:
        if problem := entry.smem_problem():
            raise ConfigError(f"{entry.key} cannot run: {problem}")
        _LOADED[key] = driver.load(entry.compile(variant=v), dev, entry.dynamic_smem)
    return _LOADED[key]


class _Launch:
    """One (entry, variant, shape, device)'s launch, built once: the loaded kernel, its grid and
    a reusable argument array (and split-K's reduction); a call writes only the tensor maps
    (encoded once per set of pointers, kept in a small cache) and the raw pointers, then launches."""

    MAPS = 8  # pointer sets whose encoded maps are kept

    def __init__(self, entry: Fp8Entry, v: Variant, M: int, N: int, K: int, dev: int):
        kernel = load(entry, v, dev)
        num_sms = cuda_device.num_sms(dev)
        fit = lambda cluster: driver.max_active_clusters(kernel, (entry.threads, 1, 1), entry.dynamic_smem,  # noqa: E731
                                                         cluster)
        self.splits = entry.splits_for(M, N, K, num_sms, max_clusters=lambda s: fit((s, 1, 1)))
        self.grid = entry.grid(M, N, num_sms, fit(entry.cluster), self.splits)
        self.specs = entry.map_specs(M, N, K, v.out, self.splits)
        self.ws_shape = (self.splits, M, N) if entry.planes else None
        args = entry.kernel_args(0, 0, 0, 1, 1, 1, M, N, K, v.out, make_map=driver.MapSlot, splits=self.splits)
        self.launch = driver.ReusableLaunch(kernel, self.grid, (entry.threads, 1, 1), args,
                                            dynamic_smem=entry.dynamic_smem, cluster=entry.launch_cluster(self.splits))
        self.reduce = None
        if entry.planes:
            self.reduce = driver.ReusableLaunch(kernel.sibling("fp8_splitk_reduce"), entry.reduce_grid(M, N),
                                                (entry.REDUCE_THREADS, 1, 1),
                                                entry.reduce_args(1, 1, 1, 1, 1, M, N, self.splits))
        self.maps: dict[tuple, tuple] = {}

    def __call__(self, stream: int, pa: int, pb: int, pc: int, ptrs: tuple, pws: int = 0) -> None:
        key = (pa, pb, pws or pc)
        got = self.maps.get(key)
        if got is None:
            if len(self.maps) >= self.MAPS:
                self.maps.pop(next(iter(self.maps)))
            maps = tuple(driver.TensorMap(p, *spec[:5], element=spec[5], planes=spec[6])
                         for p, spec in zip(key, self.specs))
            got = self.maps[key] = (tuple(m.address() for m in maps), maps)
        self.launch(stream, got[0], ptrs)
        if self.reduce is not None:  # (sa, sb, bias) -> (ws, c, sa, sb, bias)
            self.reduce(stream, (), (pws, pc) + ptrs[:3])


_LAUNCHES: dict[tuple, _Launch] = {}
_HOT: dict[tuple, "HotCall"] = {}  # a validated call's (shape, mode, dtypes, device) -> its launch


class HotCall:
    """A validated configuration's launch, for a door that has checked everything a call's
    shapes, strides, dtypes and alignment decide: allocate C, launch on the current stream.
    Takes the kernel's operands or the door's own (b (K, N) column-major: b.t()'s pointer is b's)."""
    __slots__ = ("go", "n_ptrs", "shape", "out_dtype", "dev")

    def __init__(self, go: _Launch, n_ptrs: int, M: int, N: int, out_dtype, dev: int):
        self.go, self.n_ptrs, self.shape, self.out_dtype, self.dev = go, n_ptrs, (M, N), out_dtype, dev

    def __call__(self, a, b, scale_a, scale_b, bias):
        out = a.new_empty(self.shape, dtype=self.out_dtype)
        ws = _workspace(self.go, a)
        self.go(_raw_stream(self.dev), a.data_ptr(), b.data_ptr(), out.data_ptr(),
                (scale_a.data_ptr(), scale_b.data_ptr(), bias.data_ptr() if bias is not None else 0,
                 out.data_ptr())[:self.n_ptrs],
                ws.data_ptr() if ws is not None else 0)
        return out


def hot_call(M: int, N: int, K: int, mode: str, fast_accum: bool, a_dtype, b_dtype, out_dtype, has_bias: bool,
             device) -> HotCall | None:
    """The launch run_fp8(checked=True) prepared for this configuration, or None before its
    first call (the door keys it by everything else a call's tensors decide)."""
    return _HOT.get((M, N, K, mode, fast_accum, a_dtype, b_dtype, out_dtype, not has_bias, None, device))


def _workspace(go: _Launch, a):
    """Split-K's workspace: from torch's caching allocator on this stream, held until both
    launches are queued, then released (handed out again only to work ordered after them)."""
    if not go.ws_shape:
        return None
    import torch
    return a.new_empty(go.ws_shape, dtype=torch.float32)


def run_fp8(a, b, scale_a, scale_b, *, mode: str, out_dtype, bias=None, fast_accum: bool = False,
            entry: Fp8Entry | str | None = None, out=None, checked: bool = False):
    """C (M, N) = (A (M, K) @ B (N, K)^T) scaled (+ bias), in out_dtype, on the current stream.

    a, b: contiguous fp8 CUDA tensors (K-major; not both e5m2). mode 'tensor': scale_a and
    scale_b hold one float32 each; 'row': (M,) and (N,); 'block': (M, ceil(K/128)) and
    (ceil(N/128), ceil(K/128)). Scales are dequantization multipliers. bias: None or (N,) of
    out_dtype. fast_accum: the sum stays in the tensor core's accumulator (no promotion).
    entry: an fp8 entry or its key ('11' is the ladder's step) instead of the family's choice.
    out: a contiguous (M, N) tensor of out_dtype to write (default: a new one). checked: the
    caller (fp8_api.scaled_mm) has validated all of the above and the device already."""
    import torch
    M, K = a.shape
    N = b.shape[0]
    if checked and out is None and not isinstance(entry, Fp8Entry):  # the door's hot path: one lookup
        key = (M, N, K, mode, fast_accum, a.dtype, b.dtype, out_dtype, bias is None, entry, a.device)
        hot = _HOT.get(key)
        if hot is not None:
            return hot(a, b, scale_a, scale_b, bias)
    else:
        key = None
    if isinstance(entry, str):
        entry = get(entry)
    if entry is None:
        entry = choose(M, N, K, mode, fast_accum, bias16=bias is not None and _name(out_dtype) != "float32")
    if checked:
        v = Variant(mode=mode, out=_name(out_dtype), bias=bias is not None, a_e5m2=_FP8[_name(a.dtype)],
                    b_e5m2=_FP8[_name(b.dtype)])
    else:
        M, N, K, v = _check(entry, a, b, scale_a, scale_b, mode, out_dtype, bias)
        check_device(a.device)
    dev = a.device.index if a.device.index is not None else torch.cuda.current_device()
    if out is None:
        out = torch.empty((M, N), dtype=out_dtype, device=a.device)
    elif out.dtype != out_dtype or tuple(out.shape) != (M, N) or not out.is_contiguous() or out.device != a.device:
        raise ValueError(f"{entry.key}: out must be a contiguous ({M}, {N}) tensor of {_name(out_dtype)} beside a")
    launch_key = (entry.key, v, M, N, K, dev)
    go = _LAUNCHES.get(launch_key)
    if go is None:
        with torch.cuda.device(dev):
            driver.ensure_context(dev)
            go = _LAUNCHES[launch_key] = _Launch(entry, v, M, N, K, dev)
    n_ptrs = 4 if entry.step != 11 else 2  # (scales, bias, C); step 11 takes the scales only
    if key is not None:
        _HOT[key] = HotCall(go, n_ptrs, M, N, out_dtype, dev)
    ptrs = (scale_a.data_ptr(), scale_b.data_ptr(), bias.data_ptr() if bias is not None else 0, out.data_ptr())
    ws = _workspace(go, a)
    go(_raw_stream(dev), a.data_ptr(), b.data_ptr(), out.data_ptr(), ptrs[:n_ptrs],
       ws.data_ptr() if ws is not None else 0)
    return out


def choose_key(M: int, N: int, K: int, mode: str, fast_accum: bool, bias16: bool = False) -> str:
    """The key of the entry run_fp8 runs for a call (benchmarks name it in their rows)."""
    return choose(M, N, K, mode, fast_accum, bias16=bias16).key
