"""The strict runner: one kernel (a ladder step or a kernel family's entry) on torch tensors:
validate, compile (cached), load, launch.

`run_step` is strict: it never copies or pads, and it rejects what the step cannot take
with an error naming the constraint. `gemm_ladder.matmul` (api.py, fastpath.py) is the
forgiving entry. A family's entry gives the runner its launch pieces (the small-M family's
arguments, grids and workspace: families/smallm_args.py); the runner builds the launches
(`plan_smallm`).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from ..cuda import device as cuda_device
from ..cuda import driver
from ..cuda.kernel_enums import barrier_names, role_names
from ..families.common import ConfigError, ShapeError
from ..families.keys import as_step
from ..families.ladder_step import Step
from ..families.smallm import REDUCE_THREADS, SmallM, get_family
from ..families.splitk_deal import Deal

SUPPORTED = ("float16", "bfloat16")


class PipelineDeadlock(RuntimeError):
    """A debug build's bounded mbarrier wait timed out (the kernel trapped)."""


def _torch():
    import torch
    return torch


def check_types(a, b, out=None, what: str = "") -> None:
    """a, b (and out) are torch tensors; a and b share a supported dtype."""
    torch = _torch()
    pre = f"{what}: " if what else ""
    for name, t in (("a", a), ("b", b)) + ((("out", out),) if out is not None else ()):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{pre}{name} must be a torch.Tensor, got {type(t).__name__}")
        if t.is_nested or t.layout != torch.strided:  # the kernels read memory through strides
            kind = "nested" if t.is_nested else str(t.layout).replace("torch.", "")
            raise TypeError(f"{pre}{name} must be a dense (strided) tensor, got a {kind} one")
    if a.dtype != b.dtype:
        raise TypeError(f"{pre}a and b must have the same dtype, got {a.dtype} and {b.dtype}")
    if str(a.dtype).replace("torch.", "") not in SUPPORTED:
        raise TypeError(f"{pre}dtype {a.dtype} is not supported: use torch.float16 or torch.bfloat16")


def check_operands(a, b, out=None, *, step: Step | None = None) -> tuple[int, int, int]:
    """Validate C = A @ B^T operands: A (M, K), B (N, K), out (M, N). Returns (M, N, K).

    Order: types, dtypes, ranks, shapes, layout, alignment, then device, so the error names
    the first thing that is wrong."""
    check_types(a, b, out)
    if a.dim() != 2 or b.dim() != 2:
        raise ValueError(f"a and b must be 2-D, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    M, K = a.shape
    N, Kb = b.shape
    if K != Kb:
        raise ValueError(f"inner dimensions differ: a is {M}x{K}, b is {N}x{Kb} (C = A @ B^T needs equal K)")
    if out is not None:
        if out.dtype != a.dtype:
            raise TypeError(f"out has dtype {out.dtype}, expected {a.dtype}")
        if tuple(out.shape) != (M, N):
            raise ValueError(f"out has shape {tuple(out.shape)}, expected {(M, N)}")
    if step is not None:
        problems = step.shape_problems(M, N, K)
        if problems:
            raise ShapeError(f"step {step.key} ({step.name}) cannot take M={M}, N={N}, K={K}: " + "; ".join(problems))
    for name, t in (("a", a), ("b", b)) + ((("out", out),) if out is not None else ()):
        if not t.is_contiguous():
            raise ValueError(f"{name} must be contiguous row-major (strides {t.stride()}); call .contiguous()")
        if t.data_ptr() % 16:
            raise ValueError(f"{name} must be 16-byte aligned (data_ptr % 16 = {t.data_ptr() % 16})")
    for name, t in (("a", a), ("b", b)) + ((("out", out),) if out is not None else ()):
        if t.device.type != "cuda":
            raise ValueError(f"{name} is on {t.device}; gemm_ladder kernels need CUDA tensors")
    if b.device != a.device or (out is not None and out.device != a.device):
        raise ValueError("a, b and out must be on the same CUDA device")
    return M, N, K


def check_device(device) -> None:
    torch = _torch()
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA GPU is available; gemm_ladder kernels need an sm_90 (Hopper) GPU")
    cap = torch.cuda.get_device_capability(device)
    if cap != (9, 0):
        name = torch.cuda.get_device_name(device)
        raise RuntimeError(f"{name} has compute capability {cap[0]}.{cap[1]}; gemm_ladder kernels are built "
                           "for sm_90a (H100/H200)")


_GOOD_DEVICES: set = set()


def check_door_device(device, door: str, tensor: str, kernels: str) -> None:
    """A door's device check, in its own words: `tensor` (its first operand) on a CUDA device of
    compute capability 9.0; the capability is looked up once per device."""
    if device.type != "cuda":
        raise ValueError(f"{door}: {tensor} is on {device}; gemm_ladder's {kernels} need CUDA tensors")
    if device not in _GOOD_DEVICES:
        try:
            check_device(device)
        except RuntimeError as e:
            raise RuntimeError(f"{door}: {e}") from None
        _GOOD_DEVICES.add(device)


# ---- debug records -------------------------------------------------------------------------
_STUCK_FMT = "<IIIIIIIIQ"  # GlStuckRecord in gl_mbarrier.cuh
_STUCK_MAGIC = 0x57A11ED0


def decode_stuck_record(raw: bytes, step: Step) -> str | None:
    magic, role, bar, stage, phase, block, thread, sm, waited = struct.unpack_from(_STUCK_FMT, raw)
    if magic != _STUCK_MAGIC:
        return None
    r = role_names().get(role, f"role#{role}")
    b = barrier_names().get(bar, f"barrier#{bar}")
    return (f"step {step.key}: deadlock: the {r} (CTA {block}, thread {thread}, SM {sm}) waited "
            f"{waited / 1e9:.2f} s on {b}[stage {stage}] for phase parity {phase}, which never completed")


@dataclass
class Launched:
    kernel: driver.LoadedKernel
    stuck: driver.HostMappedBuffer | None = None


_DEBUG_BUFFERS: dict[str, driver.HostMappedBuffer] = {}


_PREPARED: dict[tuple, Launched] = {}


def prepare(step: Step, device_index: int, *, bf16: bool, debug: bool = False,
            extra_defines: dict | None = None) -> Launched:
    """Compile (through the disk cache) and load a step's kernel, once per process: the
    key holds everything the build depends on, so later calls skip hashing the sources."""
    defines = dict(extra_defines or {})
    if debug:
        defines["GL_DEBUG_WAITS"] = 1
    key = (step.source, step.entry, tuple(sorted(step.kernel_defines().items())), bool(bf16),
           tuple(sorted(defines.items())), device_index)
    if key in _PREPARED:
        return _PREPARED[key]
    compiled = step.compile(bf16=bf16, extra_defines=defines)
    lk = driver.load(compiled, device_index, step.dynamic_smem)
    stuck = None
    if debug and step.barriers:  # steps without mbarriers have nothing to bound
        stuck = _DEBUG_BUFFERS.get(compiled.key)
        if stuck is None:
            stuck = driver.HostMappedBuffer(64)
            lk.set_global_u64("gl_stuck_record", stuck.device_ptr)
            _DEBUG_BUFFERS[compiled.key] = stuck
    _PREPARED[key] = Launched(lk, stuck)
    return _PREPARED[key]


def attach_trace(prep: Launched, dev: int, trace_buffer, trace_events: int) -> None:
    """Point a GL_TRACE build's globals at `trace_buffer` (int64 CUDA tensor), `trace_events`
    per slot; after the device's earlier work, which may still trace into the old buffer."""
    _torch().cuda.synchronize(dev)
    prep.kernel.set_global_u64("gl_trace_buf", trace_buffer.data_ptr())
    prep.kernel.set_global_u32("gl_trace_events", trace_events)


def prepare_build(step, dev: int, *, bf16: bool, debug: bool, extra_defines: dict | None = None,
                  trace_buffer=None, trace_events: int = 0) -> Launched:
    """prepare() of the build a plan asks for: its ablation switches, and with a trace buffer
    the GL_TRACE build pointed at that buffer (plan's and plan_smallm's)."""
    defines = dict(extra_defines or {})
    if trace_buffer is not None:
        defines["GL_TRACE"] = 1
    prep = prepare(step, dev, bf16=bf16, debug=debug, extra_defines=defines)
    if trace_buffer is not None:
        attach_trace(prep, dev, trace_buffer, trace_events)
    return prep


def plan(step: Step | str | int, a, b, out=None, *, debug: bool = False, extra_defines: dict | None = None,
         trace_buffer=None, trace_events: int = 0, sk_tiles: int | None = None,
         sk_ctas: int | None = None) -> "Plan":
    """Validate, compile, load and build the launch of C = A @ B^T once; the returned
    Plan launches it (on the stream current now) each time it is called, as clusters of
    the step's cluster shape (the grid must divide by it). A stream-K step gets a zeroed
    workspace of its own (its flags lower themselves: the plan may be called again on this
    stream); sk_tiles, sk_ctas: split that many tiles over that many CTAs (default: 2 pieces
    each) instead of the step's rule (tests, experiments)."""
    step = as_step(step)
    if isinstance(step, SmallM):  # a kernel family beside the ladder: its own deal and launches
        if sk_tiles or sk_ctas:
            raise ConfigError(f"{step.key}: no stream-K deal for this family")
        return plan_smallm(step, a, b, out, debug=debug, trace_buffer=trace_buffer, trace_events=trace_events,
                           extra_defines=extra_defines)
    if problem := step.smem_problem():
        raise ConfigError(f"step {step.key} cannot run: {problem}")
    M, N, K = check_operands(a, b, out, step=step)
    check_device(a.device)
    return _plan_checked(step, a, b, out, M, N, K, debug=debug, extra_defines=extra_defines,
                         trace_buffer=trace_buffer, trace_events=trace_events, sk_tiles=sk_tiles, sk_ctas=sk_ctas)


def run_checked(step: Step, a, b):
    """C = A @ B^T with a ladder step on operands its caller has already validated (2-D,
    contiguous, 16-byte aligned, one dtype, one Hopper device, a shape the step takes): the
    library's copying path for the strict teaching steps, whose call was checked once
    (fastpath.validate). Returns a fresh (M, N) result."""
    if problem := step.smem_problem():
        raise ConfigError(f"step {step.key} cannot run: {problem}")
    M, K = a.shape
    return _plan_checked(step, a, b, None, M, b.shape[0], K)()


def _plan_checked(step: Step, a, b, out, M: int, N: int, K: int, *, debug: bool = False,
                  extra_defines: dict | None = None, trace_buffer=None, trace_events: int = 0,
                  sk_tiles: int | None = None, sk_ctas: int | None = None) -> "Plan":
    """plan's build, on validated operands."""
    torch = _torch()
    if out is None:
        out = torch.empty((M, N), dtype=a.dtype, device=a.device)
    dev = a.device.index if a.device.index is not None else torch.cuda.current_device()
    bf16 = a.dtype == torch.bfloat16
    with torch.cuda.device(dev):
        # A thread that has made no CUDA runtime call has no current context, and torch's
        # device guard does not bind one; the driver-API launch needs it (every call: the
        # kernel may have been prepared on another thread).
        driver.ensure_context(dev)
        prep = prepare_build(step, dev, bf16=bf16, debug=debug, extra_defines=extra_defines,
                             trace_buffer=trace_buffer, trace_events=trace_events)
        stream = torch.cuda.current_stream(dev).cuda_stream
        grid = launch_grid(step, prep.kernel, M, N, dev)
        ws, deal = None, (0, 1)
        if step.stream_k:
            deal = step.stream_k_deal(M, N, K, grid[0])
            if sk_tiles is not None:
                deal = (sk_tiles, 2 * sk_tiles if sk_ctas is None else sk_ctas)
            if problem := step.stream_k_problem(M, N, K, grid[0], *deal):
                raise ConfigError(f"step {step.key}: {problem}")
            if deal[0]:
                ws = torch.zeros(step.workspace_floats(grid[0]), dtype=torch.float32, device=a.device)
        elif sk_tiles or sk_ctas:
            raise ConfigError(f"step {step.key} has no stream-K (sk_tiles, sk_ctas)")
        args = step.kernel_args(a.data_ptr(), b.data_ptr(), out.data_ptr(), M, N, K, bf16=bf16,
                                ws_ptr=ws.data_ptr() if ws is not None else 0, sk_tiles=deal[0], sk_ctas=deal[1])
        launcher = driver.PreparedLaunch(prep.kernel, grid, (step.threads, 1, 1), args, stream=stream,
                                         dynamic_smem=step.dynamic_smem, cluster=step.cluster)
    return Plan(step, prep, launcher, (a, b, out, ws), dev, debug)


def launch_grid(step: Step, kernel: driver.LoadedKernel, M: int, N: int, device_index: int) -> tuple[int, int, int]:
    """The launch grid of a ladder step: a cluster step gets no more clusters than fit at
    once (clusters live inside one GPC: fewer may fit than SMs / cluster size)."""
    max_clusters = None
    if step.persistent and step.cluster != (1, 1, 1):  # only a persistent grid sizes itself by it
        max_clusters = driver.max_active_clusters(kernel, (step.threads, 1, 1), step.dynamic_smem, step.cluster)
    grid = step.grid(M, N, cuda_device.num_sms(device_index), max_clusters)
    if any(g % c for g, c in zip(grid, step.cluster)):
        raise ShapeError(f"grid {grid} is not a multiple of the cluster shape {step.cluster}")
    return grid


@dataclass
class Plan:
    step: Step
    prep: Launched
    launcher: driver.PreparedLaunch
    tensors: tuple  # (a, b, out[, workspace]), kept alive while the plan exists
    device_index: int
    debug: bool

    @property
    def out(self):
        return self.tensors[2]

    def __call__(self):
        self.launcher()
        if self.debug:
            _sync_checked(self.step, self.prep, self.device_index)
        return self.tensors[2]

    def synchronize(self) -> None:
        _sync_checked(self.step, self.prep, self.device_index)


def run_step(step: Step | str | int, a, b, out=None, *, debug: bool = False, extra_defines: dict | None = None,
             trace_buffer=None, trace_events: int = 0, sync: bool = False, sk_tiles: int | None = None,
             sk_ctas: int | None = None):
    """C = A @ B^T with one ladder step ('7', 7, '7:d4' or a Step). Returns `out`
    (allocated if None).

    debug: bounded mbarrier waits; a timeout raises PipelineDeadlock naming the role,
    barrier, stage and phase (the CUDA context is unusable afterwards: run such builds in
    a separate process). trace_buffer: an int64 CUDA tensor for GL_TRACE builds."""
    p = plan(step, a, b, out, debug=debug, extra_defines=extra_defines, trace_buffer=trace_buffer,
             trace_events=trace_events, sk_tiles=sk_tiles, sk_ctas=sk_ctas)
    res = p()
    if sync and not debug:
        p.synchronize()
    return res


def _sync_checked(step: Step, prep: Launched, dev: int) -> None:
    torch = _torch()
    try:
        torch.cuda.synchronize(dev)
    except Exception as e:  # a trapped debug kernel surfaces here as a launch failure
        msg = decode_stuck_record(prep.stuck.read(), step) if prep.stuck is not None else None
        if msg:
            raise PipelineDeadlock(msg + f" (CUDA: {str(e).splitlines()[0]})") from e
        raise


# ---- the small-M family ----------------------------------------------------------------------

def plan_smallm(fam: SmallM, a, b, out=None, *, splits: int | None = None, units: int | None = None,
                wave: int | None = None, debug: bool = False, pdl: bool | None = None,
                trace_buffer=None, trace_events: int = 0, extra_defines: dict | None = None) -> "SmallMPlan":
    """Validate, compile, load, allocate the workspace and build both launches of
    C = A @ B^T once; calling the plan launches them on the stream current now.
    splits: K split that many ways (fixed_deal) instead of the rule's deal; units: runs
    of that many k-tiles (make_deal); wave: a fixup entry's deal on that many CTAs.
    pdl: launch the reduction programmatically (default: the entry's `pdl`). trace_buffer:
    an int64 CUDA tensor for a GL_TRACE build (as plan's); extra_defines: ablation
    switches of this build (as plan's)."""
    torch = _torch()
    if problem := fam.smem_problem():
        raise ConfigError(f"{fam.key} cannot run: {problem}")
    M, N, K = check_operands(a, b, out, step=fam)
    check_device(a.device)
    if out is None:
        out = torch.empty((M, N), dtype=a.dtype, device=a.device)
    dev = a.device.index if a.device.index is not None else torch.cuda.current_device()
    bf16 = a.dtype == torch.bfloat16
    with torch.cuda.device(dev):
        prep = prepare_build(fam, dev, bf16=bf16, debug=debug, extra_defines=extra_defines,
                             trace_buffer=trace_buffer, trace_events=trace_events)
        d = fam.plan_deal(M, N, K, cuda_device.num_sms(dev), splits=splits, units=units, wave=wave)
        if d.fixup and d.ctas > cuda_device.num_sms(dev):
            raise ConfigError(f"{fam.key}: a fixup deal must fit one wave ({d.ctas} CTAs > "
                              f"{cuda_device.num_sms(dev)} SMs)")
        shape = fam.workspace_shape(M, N, d)
        alloc = torch.zeros if d.fixup else torch.empty  # fixup flags start lowered
        ws = alloc(shape, dtype=torch.float32, device=a.device) if shape else None
        ws_ptr = ws.data_ptr() if ws is not None else 0
        stream = torch.cuda.current_stream(dev).cuda_stream
        args = fam.kernel_args(a.data_ptr(), b.data_ptr(), ws_ptr, out.data_ptr(), M, N, K, d.kernel_units, bf16=bf16)
        launches = [driver.PreparedLaunch(prep.kernel, d.grid, (fam.threads, 1, 1), args, stream=stream,
                                          dynamic_smem=fam.dynamic_smem, cluster=d.cluster, pdl=fam.chain_pdl)]
        if ws is not None and not d.fixup:
            reduce = reduce_kernel(prep.kernel, fam.reduce_entry)
            launches.append(driver.PreparedLaunch(
                reduce, fam.reduce_grid(M, N), (REDUCE_THREADS, 1, 1),
                fam.reduce_args(ws_ptr, out.data_ptr(), M, N, K, d.kernel_units), stream=stream,
                pdl=fam.pdl if pdl is None else pdl))
    return SmallMPlan(fam, prep, _InOrder(launches), (a, b, out, ws), dev, debug, deal=d)


_REDUCE: dict[tuple, driver.LoadedKernel] = {}


def reduce_kernel(main: driver.LoadedKernel, name: str) -> driver.LoadedKernel:
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
class SmallMPlan(Plan):
    deal: Deal | None = None  # how the split-K kernel's CTAs share the work

    @property
    def workspace(self):
        return self.tensors[3]


def run_smallm(a, b, out=None, splits: int | None = None, *, family: str | SmallM = "smallm",
               debug: bool = False, sync: bool = False):
    """C = A @ B^T for a (M, K) and b (N, K) contiguous fp16/bf16 CUDA tensors, M <= 128, with
    the small-M split-K kernel and its deterministic reduction. `splits`: the K split (default:
    the family's rule). Returns `out` (allocated if None). The workspace comes from torch's
    caching allocator on the current stream and is released once both launches are queued:
    the allocator hands it out again only to work ordered after them on that stream."""
    fam = family if isinstance(family, SmallM) else get_family(family)
    p = plan_smallm(fam, a, b, out, splits=splits, debug=debug)
    res = p()
    if sync and not debug:
        p.synchronize()
    return res
