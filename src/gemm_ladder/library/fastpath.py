"""The library's hot path: a `matmul` / `matmul_nt` call validated once per configuration,
then only launched (the public functions are api.py's).

A configuration is everything a launch depends on except the data pointers: call kind,
step, dtype, devices, shapes, strides, pointer alignment and the `out` layout. The first call
of a configuration checks the inputs (types, dtypes, ranks, shapes, out, devices: the first
problem named in one line), chooses the kernel (select.step_for: the selection's pick for the
shape, adjusted for MN-major operands), and builds a fastconfig.Config (layouts, kernel,
launch). Later calls look the configuration up and run it: allocate the result, find the
tensor maps, launch on the current stream.

Under torch.compile, or when an input requires grad (and grad mode is on), api.py sends the
call through the `gemm_ladder::matmul` custom op (torch_ops.py) instead, which traces and
differentiates and whose implementation is this module's raw path (`run`).
"""
from __future__ import annotations

import dataclasses

import torch

from ..cuda import device as cuda_device
from ..families.cost_model import rows_misaligned
from ..families.keys import get_step
from ..families.ladder_step import Step
from ..families.smallm import SmallM
from . import fastconfig, plain_tensors, runner, select
from .fastconfig import LRU

MAX_CONFIGS = 256  # prepared configurations kept (per process, all devices)

CONFIGS = LRU(MAX_CONFIGS)
_grad_enabled = torch.is_grad_enabled
# plain_tensors.forward_ad_active, inlined (the per-call path): _current_level >= 0 while a
# forward-mode AD level is open
_fwad = torch.autograd.forward_ad


# ---- validation (first call of a configuration only) --------------------------------------

def _check_devices(what: str, a, b, out) -> None:
    if a.device.type != "cuda" or b.device.type != "cuda":
        hint = "" if torch.cuda.is_available() else " (and no CUDA GPU is available here)"
        raise ValueError(f"{what}: a is on {a.device} and b on {b.device}; both must be CUDA tensors{hint}")
    if a.device != b.device:
        raise ValueError(f"{what}: a and b are on different devices ({a.device}, {b.device})")
    if out is not None and out.device != a.device:
        raise ValueError(f"{what}: out is on {out.device}, a and b on {a.device}")
    runner.check_device(a.device)


def validate(kind: str, a, b, out=None) -> tuple[tuple, int, int]:
    """All checks of a call, in the order types, dtypes, ranks, shapes, out, devices, so
    the message names the first problem. Returns (leading dims of the result, N, K)."""
    lead, N, K = check_call(kind, a, b, out)
    _check_devices("matmul" if kind == "mm" else "matmul_nt", a, b, out)
    return lead, N, K


def check_call(kind: str, a, b, out=None) -> tuple[tuple, int, int]:
    """The checks that need no device (also the fake op's, on meta or fake tensors)."""
    what = "matmul" if kind == "mm" else "matmul_nt"
    runner.check_types(a, b, what=what)
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


def _dtype_name(dtype) -> str:
    return "bfloat16" if dtype == torch.bfloat16 else "float16"


def step_arg(step, what: str = "matmul"):
    """`step=` as the caller gave it: None, a key (str, or a ladder step's number) or a
    kernel (a Step or a kernel-family entry); anything else is named in one line."""
    if step is None or isinstance(step, (str, Step, SmallM)) or isinstance(step, int) and not isinstance(step, bool):
        return step
    raise TypeError(f"{what}: step must be a kernel key such as 'gemm:128x256' or 9, or a Step, got "
                    f"{type(step).__name__}")


def named_step(step, what: str = "matmul"):
    """The kernel `step=` names (a key or a ladder step's number looked up), or None."""
    step = step_arg(step, what)
    return get_step(step) if isinstance(step, (str, int)) else step


def resolve_step(step, kind: str, a, b, lead: tuple, N: int, K: int):
    """The kernel a validated call runs: the one asked for, else select.step_for's choice for
    the shape and the operands' layouts (None for an empty product)."""
    st = named_step(step, "matmul" if kind == "mm" else "matmul_nt")
    if st is not None:
        return st
    M = int(torch.Size(lead).numel())
    if M == 0 or N == 0 or K == 0:
        return None
    return kernel_for(kind, a, b, M, N, K, cuda_device.num_sms(fastconfig.device_index(a.device)))


def kernel_for(kind: str, a, b, M: int, N: int, K: int, sms: int):
    """select.step_for's choice for these operands: the layouts they could be read in place in
    (either major-ness) and whether B's rows are whole sectors (also `explain`'s, on stand-ins)."""
    a_op, b_op = fastconfig.operand_layouts(kind, a, b, (True, True), M, N, K)  # what could be read in place
    return select.step_for(M, N, K, _dtype_name(a.dtype), sms, *fastconfig.mn_flags(a_op, b_op),
                           b_rows_misaligned(b_op))


_B_EARLY: dict[int, object] = {}  # id(step) -> its b_early variant (kept: a stable Step per entry)


def b_early(st):
    """The step for a call whose b no earlier kernel on the stream writes (`static_b`): a
    small-M entry that launches programmatically issues b's first ring stages before it waits
    for the previous grid (GL_B_EARLY; a decode chain +0.4-3 %, docs/perf-notes.md item 105).
    Other steps, and the clustered loads (multicast pairs, shared A: a peer's ring may not
    exist yet), as they are."""
    if not (isinstance(st, SmallM) and st.chain_pdl and st.multicast == 1 and st.shared_loads == 1) or st.b_early:
        return st
    v = _B_EARLY.get(id(st))
    if v is None:
        v = _B_EARLY[id(st)] = dataclasses.replace(st, key=f"{st.key}~b_early", b_early=True)
    return v


def b_rows_misaligned(b_op) -> bool:
    """B's rows, as the kernel reads them (in place, or from the K-major copy), are not whole
    32-byte sectors (cost_model.rows_misaligned); a single line has no row stride."""
    if not b_op.direct:  # the copy: N lines (K lines if it stays N-major) of staged_ld elements
        return (b_op.k if b_op.stage_mn else b_op.rows) > 1 and rows_misaligned(b_op.staged_ld)
    lines = b_op.k if b_op.major == "MN" else b_op.rows
    return lines > 1 and rows_misaligned(b_op.ld)


# ---- the per-call path -------------------------------------------------------------------

def _key(kind, a, b, out, step, pa, pb, static_b=False):
    return (kind, step if step is None or step.__class__ is str else id(step), static_b,
            a.dtype, b.dtype, a.device, b.device, a.shape, a.stride(), b.shape, b.stride(), pa & 15, pb & 15,
            None if out is None else (out.dtype, out.device, out.shape, out.stride(), out.data_ptr() & 15,
                                      out.is_neg()))


def config_for(kind: str, a, b, out=None, step=None, static_b: bool = False) -> fastconfig.Config:
    """The prepared configuration of a call (validating and building it on first use)."""
    key = _key(kind, a, b, out, step, a.data_ptr(), b.data_ptr(), static_b)
    return CONFIGS.entries.get(key) or _build(key, kind, a, b, out, step, static_b)


def _build(key, kind, a, b, out, step, static_b=False) -> fastconfig.Config:
    CONFIGS.misses += 1
    lead, N, K = validate(kind, a, b, out)
    st = resolve_step(step, kind, a, b, lead, N, K)
    cfg = None
    if static_b and b_early(st) is not st:
        cfg = fastconfig.make_config(kind, a, b, out, b_early(st), lead, N, K)
        if not cfg.b.direct:  # b goes through a staging copy, which b_early's loads could pass: b waits
            cfg = None
    cfg = cfg or fastconfig.make_config(kind, a, b, out, st, lead, N, K)
    cfg.step_ref = step  # keeps an id()-keyed Step alive as long as its entry
    return CONFIGS.put(key, cfg)


def _wants_op(a, b) -> bool:
    """The call needs autograd: it goes through the custom op (torch_ops.py)."""
    return _grad_enabled() and (getattr(a, "requires_grad", False) or getattr(b, "requires_grad", False))


def run(kind: str, a, b, out=None, step=None):
    """The raw path (no custom-op routing): kind "mm" is a @ b, "nt" is a @ b.T."""
    return call(kind, a, b, out, step, None)


def call(kind: str, a, b, out, step, via_op, static_b=False):
    """The per-call path; via_op: where calls that need autograd go (api.py's route to the
    custom op), None for the raw path (the torch.compile check is the caller's, before
    anything touches the tensors). static_b: b_early's promise (the custom op ignores it)."""
    try:
        if a.is_neg() or b.is_neg():  # a negated view (z.conj().imag) holds -values: the kernels read memory
            a, b = a.resolve_neg(), b.resolve_neg()
        pa, pb = a.data_ptr(), b.data_ptr()
        grad = via_op is not None and (a.requires_grad or b.requires_grad)
        key = _key(kind, a, b, out, step, pa, pb, static_b)
    except Exception:  # not tensors, or tensors without storage: the checks name the problem
        what = "matmul" if kind == "mm" else "matmul_nt"
        runner.check_types(a, b, out, what=what)
        if via_op is not None and plain_tensors.in_vmap(a, b):  # the op runs torch.func.vmap per slice
            return via_op(kind, a, b, out, step)
        plain_tensors.check_plain(what, a=a, b=b, out=out)
        if via_op is not None and _wants_op(a, b):
            return via_op(kind, a, b, out, step)
        validate(kind, a, b, out)
        raise
    if not (pa and pb) or _fwad._current_level >= 0:  # storage-less wrappers (or empty), forward-mode duals
        validate(kind, a, b, out)
        plain_tensors.check_plain("matmul" if kind == "mm" else "matmul_nt", a=a, b=b, out=out)
    if grad and _grad_enabled():
        return via_op(kind, a, b, out, step)
    lru = CONFIGS
    d = lru.entries  # the LRU's lookup, inlined: this is the per-call path
    cfg = d.get(key)
    if cfg is None:
        cfg = _build(key, kind, a, b, out, step, static_b)
    elif len(d) > lru.recency_from:  # recency only once eviction is in sight (LRU's docstring)
        try:
            d.move_to_end(key)
        except KeyError:  # evicted meanwhile by another thread; cfg is still valid
            pass
    return cfg(a, b, out, pa, pb)
