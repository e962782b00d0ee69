"""The attention family's strict runner: one fused attention step (families/attention.py) on
torch tensors — validate what the kernel needs, compile (cached), load, launch. It never
copies: `gemm_ladder.attention` (attention_api.py) is the user's door, with SDPA's semantics
and its checks, and makes the copies a layout needs."""
from __future__ import annotations

from ..cuda import device as cuda_device
from ..cuda import driver
from ..families.attention import HEAD_DIMS, MAX_TILES, WG_ROWS, AttnStep, choose, get, make_maps
from ..families.common import ConfigError, ShapeError
from .runner import check_device

_DTYPES = {"float16": "f16", "bfloat16": "bf16"}
_LOADED: dict[tuple, driver.LoadedKernel] = {}
_LAUNCHES: dict[tuple, "_Launch"] = {}


def _name(dtype) -> str:
    return str(dtype).replace("torch.", "")


def tma_readable(t) -> bool:
    """Whether TMA reads the tensor in place: the head dim contiguous, the other strides whole
    16-byte multiples and not 0 (a broadcast, expanded dimension is copied), the base 16-byte aligned."""
    return t.stride(-1) == 1 and all(s % 8 == 0 and s > 0 for s in t.stride()[:-1]) and t.data_ptr() % 16 == 0


def check(q, k, v, step: str) -> tuple[int, int, int, int, int, int]:
    """(B, Hq, Hkv, Sq, Sk, D) of a call the kernel can take, or one line saying why not."""
    import torch
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or _name(t.dtype) not in _DTYPES:
            raise TypeError(f"attention {step}: {name} must be a float16 or bfloat16 tensor")
        if t.dim() != 4:
            raise ValueError(f"attention {step}: {name} must be 4-D (B, H, S, D), got {tuple(t.shape)}")
    if not (q.dtype == k.dtype == v.dtype):
        raise TypeError(f"attention {step}: q, k and v must share one dtype")
    B, Hq, Sq, D = q.shape
    if tuple(k.shape) != tuple(v.shape) or k.shape[0] != B or k.shape[3] != D:
        raise ValueError(f"attention {step}: k {tuple(k.shape)} and v {tuple(v.shape)} must both be "
                         f"(B={B}, Hkv, Sk, D={D})")
    Hkv, Sk = k.shape[1], k.shape[2]
    if Hkv < 1 or Hq % Hkv:
        raise ValueError(f"attention {step}: {Hq} query heads are not a multiple of {Hkv} key/value heads")
    if D not in HEAD_DIMS:
        raise ShapeError(f"attention {step}: head dim {D} is not supported (supported: "
                         f"{', '.join(map(str, HEAD_DIMS))})")
    if Sq < 1 or Sk < 1 or B < 1 or Hq < 1:
        raise ShapeError(f"attention {step}: batch, heads and lengths must be >= 1 (got B={B}, H={Hq}, "
                         f"Sq={Sq}, Sk={Sk})")
    if -(-Sq // WG_ROWS) * Hq * B > MAX_TILES:
        raise ShapeError(f"attention {step}: B={B} x H={Hq} x Sq={Sq} is more tiles than the kernels count")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not tma_readable(t):
            raise ShapeError(f"attention {step}: {name} must have its head dim contiguous, 16-byte multiple "
                             f"strides and a 16-byte aligned base (strides {tuple(t.stride())})")
        if t.device.type != "cuda" or t.device != q.device:
            raise ValueError(f"attention {step}: q, k and v must be CUDA tensors on one device")
    return B, Hq, Hkv, Sq, Sk, D


def load(st: AttnStep, causal: bool, bf16: bool, dev: int) -> driver.LoadedKernel:
    """The step's build for this head dim, causality and dtype, compiled (disk cache) and loaded
    once per process."""
    key = (st.key, st.head_dim, causal, bf16, dev)
    if key not in _LOADED:
        if problem := st.smem_problem():
            raise ConfigError(f"{st.key} cannot run: {problem}")
        _LOADED[key] = driver.load(st.compile(bf16=bf16, causal=causal), dev, st.dynamic_smem)
    return _LOADED[key]


class _Launch:
    """One (step, head dim, causality, dtype, shape, device)'s launch, built once; a call writes
    its tensor maps (encoded once per pointers and strides, kept in a small cache), its output
    pointers and its scale."""

    MAPS = 8

    def __init__(self, st: AttnStep, causal: bool, element: str, B: int, Hq: int, Hkv: int, Sq: int, Sk: int,
                 dev: int):
        self.st, self.element = st, element
        kernel = load(st, causal, element == "bf16", dev)
        self.kernel = kernel
        self.grid = st.grid(Sq, Hq, B, cuda_device.num_sms(dev))
        self.args = (Sq, Sk, Hq, Hq // Hkv, st.tiles(Sq, Hq, B))
        self.section = st.section(Sk, Hq // Hkv, Hq * B, cuda_device.l2_bytes(dev))
        self.maps: dict[tuple, tuple] = {}

    def __call__(self, stream: int, q, k, v, out_ptr: int, lse_ptr: int, scale: float, counter_ptr: int = 0) -> None:
        key = (q.data_ptr(), k.data_ptr(), v.data_ptr(), q.stride(), k.stride(), v.stride())
        maps = self.maps.get(key)
        if maps is None:
            if len(self.maps) >= self.MAPS:
                self.maps.pop(next(iter(self.maps)))
            specs = self.st.map_specs(q.shape, q.stride(), k.shape, k.stride(), v.stride())
            maps = self.maps[key] = make_maps(specs, key[:3], self.element)
        args = self.st.kernel_args(maps, out_ptr, lse_ptr, *self.args, scale, counter_ptr, self.section)
        driver.PreparedLaunch(self.kernel, self.grid, (self.st.threads, 1, 1), args, stream=stream,
                              dynamic_smem=self.st.dynamic_smem)()


def run_attention(q, k, v, *, causal: bool, scale: float, return_lse: bool, step: str | None = None,
                  checked: bool = False, out=None):
    """O (B, Hq, Sq, D) = softmax(scale * Q K^T (+ causal mask)) V on the current stream, and
    the log-sum-exp (B, Hq, Sq) float32 when return_lse; (o, lse or None).

    q (B, Hq, Sq, D), k and v (B, Hkv, Sk, D): fp16 or bf16 CUDA tensors TMA reads in place
    (tma_readable), Hkv dividing Hq. step: 'A2'..'A5' or None (the family's choice). out: a
    contiguous (B, Hq, Sq, D) tensor of q's dtype to write (default: a new one). checked: the
    door validated all of the above already."""
    import torch
    D = q.shape[-1]
    if checked:
        B, Hq, Sq, _ = q.shape
        Hkv, Sk = k.shape[1], k.shape[2]
    else:
        B, Hq, Hkv, Sq, Sk, D = check(q, k, v, step or "attention")
        check_device(q.device)
    st = get(step, D) if step is not None else choose(Sq, Sk, D, causal)
    if problems := st.shape_problems(Sq, Sk, D):
        raise ShapeError(f"{st.key} cannot take Sq={Sq}, Sk={Sk}, D={D}: " + "; ".join(problems))
    if out is None:
        out = torch.empty((B, Hq, Sq, D), dtype=q.dtype, device=q.device)
    elif out.dtype != q.dtype or tuple(out.shape) != (B, Hq, Sq, D) or not out.is_contiguous() or out.device != q.device:
        raise ValueError(f"{st.key}: out must be a contiguous {(B, Hq, Sq, D)} tensor of {_name(q.dtype)} beside q")
    lse = torch.empty((B, Hq, Sq), dtype=torch.float32, device=q.device) if return_lse else None
    dev = q.device.index if q.device.index is not None else torch.cuda.current_device()
    element = _DTYPES[_name(q.dtype)]
    key = (st.key, D, causal, element, B, Hq, Hkv, Sq, Sk, dev)
    go = _LAUNCHES.get(key)
    if go is None:
        with torch.cuda.device(dev):
            driver.ensure_context(dev)
            go = _LAUNCHES[key] = _Launch(st, causal, element, B, Hq, Hkv, Sq, Sk, dev)
    # The dynamic walk's tile counter: a zeroed int32 per call, from torch's allocator on the
    # call's stream (so a CUDA graph captures its zeroing and keeps its own).
    counter = torch.zeros(1, dtype=torch.int32, device=q.device) if st.dynamic else None
    go(torch.cuda.current_stream(q.device).cuda_stream, q, k, v, out.data_ptr(),
       lse.data_ptr() if lse is not None else 0, float(scale), counter.data_ptr() if counter is not None else 0)
    return out, lse


def choose_key(Sq: int, Sk: int, D: int, causal: bool) -> str:
    """The key of the step run_attention runs for a call (benchmarks name it in their rows)."""
    return choose(Sq, Sk, D, causal).key
