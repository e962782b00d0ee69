"""The CUDA driver side: context, module loading, tensor maps, launches (cuda-bindings).

Every driver call's result is checked; failures raise CudaError with the driver's name and
description of the error. Kernels run on torch's current stream, in torch's (primary)
context, so they order naturally with torch work.
"""
from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import threading
from dataclasses import dataclass

from .jit import CompiledKernel


class CudaError(RuntimeError):
    """A CUDA driver call failed."""


def _cu():
    from cuda.bindings import driver as cu
    return cu


def check(result, what: str = "CUDA driver call"):
    """Unpack a cuda-bindings result tuple, raising CudaError on failure."""
    cu = _cu()
    err, *rest = result if isinstance(result, tuple) else (result,)
    if err != cu.CUresult.CUDA_SUCCESS:
        _, name = cu.cuGetErrorName(err)
        _, desc = cu.cuGetErrorString(err)
        name = name.decode() if isinstance(name, bytes) else str(err)
        desc = desc.decode() if isinstance(desc, bytes) else ""
        raise CudaError(f"{what} failed: {name}: {desc}")
    if not rest:
        return None
    return rest[0] if len(rest) == 1 else tuple(rest)


_tls = threading.local()
_lock = threading.Lock()
_modules: dict[tuple[str, int], "LoadedKernel"] = {}


def ensure_context(device_index: int) -> None:
    """Make the device's primary context (the one torch uses) current on this thread."""
    current = getattr(_tls, "ctx", {})
    if device_index in current:
        check(_cu().cuCtxSetCurrent(current[device_index]), "cuCtxSetCurrent")
        return
    cu = _cu()
    check(cu.cuInit(0), "cuInit")
    dev = check(cu.cuDeviceGet(device_index), "cuDeviceGet")
    ctx = check(cu.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    current[device_index] = ctx
    _tls.ctx = current


@contextlib.contextmanager
def capture_mode_relaxed():
    """This thread's stream-capture mode relaxed inside the block (e.g. to load a module while
    a CUDA graph is captured), the previous mode restored after it."""
    cu = _cu()
    old = check(cu.cuThreadExchangeStreamCaptureMode(
        cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED), "cuThreadExchangeStreamCaptureMode")
    try:
        yield
    finally:
        check(cu.cuThreadExchangeStreamCaptureMode(old), "cuThreadExchangeStreamCaptureMode")


def device_attribute(device_index: int, attr_name: str) -> int:
    cu = _cu()
    dev = check(cu.cuDeviceGet(device_index), "cuDeviceGet")
    attr = getattr(cu.CUdevice_attribute, attr_name)
    return int(check(cu.cuDeviceGetAttribute(attr, dev), f"cuDeviceGetAttribute({attr_name})"))


@dataclass
class LoadedKernel:
    compiled: CompiledKernel
    module: object
    function: object
    device_index: int
    max_dynamic_smem: int = 0

    def global_address(self, name: str) -> tuple[int, int]:
        """Device address and size of a __device__ variable of the module."""
        dptr, size = check(_cu().cuModuleGetGlobal(self.module, name.encode()), f"cuModuleGetGlobal({name})")
        return int(dptr), int(size)

    def sibling(self, name: str) -> "LoadedKernel":
        """Another entry point of the same module (a file may hold several kernels)."""
        fn = check(_cu().cuModuleGetFunction(self.module, name.encode()), f"cuModuleGetFunction({name})")
        return dataclasses.replace(self, compiled=dataclasses.replace(self.compiled, name=name), function=fn,
                                   max_dynamic_smem=0)

    def set_global_u64(self, name: str, value: int) -> None:
        dptr, size = self.global_address(name)
        host = ctypes.c_uint64(value)
        check(_cu().cuMemcpyHtoD(dptr, ctypes.addressof(host), min(size, 8)), f"write {name}")

    def set_global_u32(self, name: str, value: int) -> None:
        dptr, size = self.global_address(name)
        host = ctypes.c_uint32(value)
        check(_cu().cuMemcpyHtoD(dptr, ctypes.addressof(host), min(size, 4)), f"write {name}")


def load(compiled: CompiledKernel, device_index: int, dynamic_smem: int = 0) -> LoadedKernel:
    """Load a cubin into the device's context once; raise its dynamic shared-memory limit."""
    ensure_context(device_index)
    cache_key = (compiled.key, device_index)
    with _lock:
        lk = _modules.get(cache_key)
        if lk is None:
            cu = _cu()
            module = check(cu.cuModuleLoadData(compiled.cubin), f"cuModuleLoadData({compiled.name})")
            fn = check(cu.cuModuleGetFunction(module, compiled.name.encode()), f"cuModuleGetFunction({compiled.name})")
            lk = LoadedKernel(compiled, module, fn, device_index)
            _modules[cache_key] = lk
        if dynamic_smem > lk.max_dynamic_smem:
            cu = _cu()
            check(cu.cuFuncSetAttribute(lk.function,
                                        cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        dynamic_smem), "raise dynamic shared memory limit")
            lk.max_dynamic_smem = dynamic_smem
    return lk


class TensorMap:
    """A 2-D TMA descriptor (cuTensorMapEncodeTiled) over a row-major matrix of 16-bit
    elements (or `element` "u8" / "f32": the fp8 family's operands and fp32 output),
    128B-swizzled: box = (box_rows, box_cols) with box_cols * element bytes <= 128.
    L2 promotion 256 B, or 128 B when rows are not whole 32-byte sectors: a box row of 128 bytes
    then straddles two lines, and promoting each to 256 B fetches four times the bytes used
    (measured: 3000 x 5000 x 4008 on 9:n192 284 -> 244 us, 256 x 4104 x 4104 on smallm:n128
    41 -> 37 us; aligned rows unchanged within 1 %; docs/perf-notes.md, item 30)."""

    def __init__(self, ptr: int, rows: int, cols: int, row_stride_elems: int, box_rows: int,
                 box_cols: int, bf16: bool = False, swizzle_128b: bool = True, element: str | None = None,
                 planes: int | None = None):
        cu = _cu()
        types = cu.CUtensorMapDataType
        if element is None:
            element = "bf16" if bf16 else "f16"
        dtype, size = {"f16": (types.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2),
                       "bf16": (types.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2),
                       "u8": (types.CU_TENSOR_MAP_DATA_TYPE_UINT8, 1),
                       "f32": (types.CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4)}[element]
        row_bytes = row_stride_elems * size
        if ptr % 16 or row_bytes % 16:
            raise ValueError("TMA needs a 16-byte aligned base address and row stride")
        swizzle = (cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B if swizzle_128b
                   else cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_NONE)
        # planes: a 3-D map of `planes` packed rows x cols matrices (box depth 1), each plane
        # clipped at its own last row (the fp8 family's split-K workspace; a 3-D store needs a
        # 3-D map even for one plane)
        rank = 3 if planes is not None else 2
        dims = [cu.cuuint64_t(cols), cu.cuuint64_t(rows)] + ([cu.cuuint64_t(planes)] if rank == 3 else [])
        strides = [cu.cuuint64_t(row_bytes)] + ([cu.cuuint64_t(row_bytes * rows)] if rank == 3 else [])
        self.map = check(cu.cuTensorMapEncodeTiled(
            dtype, rank, ptr,
            dims,                                        # innermost dimension first
            strides,                                     # byte strides of the outer dimensions
            [cu.cuuint32_t(box_cols), cu.cuuint32_t(box_rows)] + ([cu.cuuint32_t(1)] if rank == 3 else []),
            [cu.cuuint32_t(1)] * rank,
            cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            (cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B if row_bytes % 32 == 0
             else cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B),
            cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        ), "cuTensorMapEncodeTiled")

    def address(self) -> int:
        return int(self.map.getPtr())


def launch_config(grid: tuple[int, int, int], block: tuple[int, int, int], dynamic_smem: int, stream: int,
                  cluster: tuple[int, int, int] | None = None, *, cluster_attr_always: bool = False,
                  pdl: bool = False):
    """A CUlaunchConfig; a cluster shape other than (1, 1, 1) becomes the cluster attribute
    (the occupancy query wants it even for (1, 1, 1)). pdl: programmatic dependent launch,
    the kernel may start before the previous one on the stream ends (it must wait for it
    with griddepcontrol.wait before reading what that one wrote)."""
    cu = _cu()
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = grid
    config.blockDimX, config.blockDimY, config.blockDimZ = block
    config.sharedMemBytes = dynamic_smem
    config.hStream = cu.CUstream(stream)
    attrs = []
    if cluster is not None and (cluster_attr_always or tuple(cluster) != (1, 1, 1)):
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        attr.value.clusterDim.x, attr.value.clusterDim.y, attr.value.clusterDim.z = cluster
        attrs.append(attr)
    if pdl:
        attr = cu.CUlaunchAttribute()
        attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
        attr.value.programmaticStreamSerializationAllowed = 1
        attrs.append(attr)
    config.attrs = attrs
    config.numAttrs = len(attrs)
    return config


_MAX_CLUSTERS: dict[tuple, int] = {}


def max_active_clusters(kernel: "LoadedKernel", block: tuple[int, int, int], dynamic_smem: int,
                        cluster: tuple[int, int, int]) -> int:
    """How many clusters of this kernel fit on the device at once (a persistent grid of more
    would run a second wave). Clusters must sit inside one GPC, so this can be fewer than
    SMs / cluster size."""
    key = (kernel.compiled.key, kernel.device_index, block, dynamic_smem, tuple(cluster))
    if key not in _MAX_CLUSTERS:
        config = launch_config(tuple(cluster), block, dynamic_smem, 0, cluster, cluster_attr_always=True)
        _MAX_CLUSTERS[key] = int(check(_cu().cuOccupancyMaxActiveClusters(kernel.function, config),
                                       "cuOccupancyMaxActiveClusters"))
    return _MAX_CLUSTERS[key]


class PreparedLaunch:
    """Everything cuLaunchKernelEx needs, built once; calling it only launches. The
    argument storage (and the tensor maps) live as long as this object."""

    def __init__(self, kernel: LoadedKernel, grid: tuple[int, int, int], block: tuple[int, int, int],
                 args: list, *, stream: int, dynamic_smem: int = 0,
                 cluster: tuple[int, int, int] | None = None, pdl: bool = False):
        cu = _cu()
        self.kernel, self.grid = kernel, grid
        self._holders = []
        addresses = []
        for a in args:
            if isinstance(a, TensorMap):
                addresses.append(a.address())
                self._holders.append(a)
                continue
            if isinstance(a, bool) or not isinstance(a, (int, ctypes._SimpleCData)):
                raise TypeError(f"unsupported kernel argument {a!r}")
            c = a if isinstance(a, ctypes._SimpleCData) else ctypes.c_int32(a)
            self._holders.append(c)
            addresses.append(ctypes.addressof(c))
        self._arg_array = (ctypes.c_void_p * max(1, len(addresses)))(*addresses)
        self._arg_ptr = ctypes.addressof(self._arg_array)

        config = launch_config(grid, block, dynamic_smem, stream, cluster, pdl=pdl)
        self._config = config
        self._launch = cu.cuLaunchKernelEx
        self._what = f"cuLaunchKernelEx({kernel.compiled.name})"

    def __call__(self) -> None:
        check(self._launch(self._config, self.kernel.function, self._arg_ptr, 0), self._what)


class StridedTensorMap(TensorMap):
    """A TMA descriptor over a tensor of any rank up to 5 in its own strides (attention's
    (B, H, S, D) tensors, transposed views included), 128B-swizzled. shape, strides (in
    elements) and box are given outermost first, as torch gives them; the innermost stride
    must be 1. Boxes past the end of a dimension read as zeros."""

    def __init__(self, ptr: int, shape, strides, box, element: str = "f16"):  # noqa: super() not called
        cu = _cu()
        types = cu.CUtensorMapDataType
        dtype, size = {"f16": (types.CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2),
                       "bf16": (types.CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2)}[element]
        if strides[-1] != 1:
            raise ValueError("TMA needs the innermost dimension contiguous")
        if ptr % 16 or any((st * size) % 16 for st in strides[:-1]):
            raise ValueError("TMA needs a 16-byte aligned base address and 16-byte multiple strides")
        rank = len(shape)
        self.map = check(cu.cuTensorMapEncodeTiled(
            dtype, rank, ptr,
            [cu.cuuint64_t(n) for n in reversed(shape)],                   # innermost first
            [cu.cuuint64_t(st * size) for st in reversed(strides[:-1])],   # byte strides of the outer dimensions
            [cu.cuuint32_t(b) for b in reversed(box)],
            [cu.cuuint32_t(1)] * rank,
            cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            cu.CUtensorMapSwizzle.CU_TENSOR_MAP_SWIZZLE_128B,
            cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
            cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        ), "cuTensorMapEncodeTiled")


class MapSlot:
    """A tensor-map argument whose map is given per call (ReusableLaunch). Built with
    TensorMap's arguments (pass the class as Step.kernel_args' make_map), it encodes nothing."""

    def __init__(self, *_args, **_kw):
        pass


class ReusableLaunch(PreparedLaunch):
    """A PreparedLaunch for the library's hot path: the stream, the tensor maps (arguments
    given as MapSlot) and the raw pointers (ctypes.c_uint64 arguments) are set per call,
    under a lock (one argument array per launch). The driver copies the arguments at launch,
    so rewriting them for the next call is safe, also while a CUDA graph is captured."""

    def __init__(self, kernel: LoadedKernel, grid: tuple[int, int, int], block: tuple[int, int, int], args: list,
                 *, dynamic_smem: int = 0, cluster: tuple[int, int, int] | None = None, pdl: bool = False):
        self.map_slots = tuple(i for i, a in enumerate(args) if isinstance(a, MapSlot))
        super().__init__(kernel, grid, block, [0 if isinstance(a, MapSlot) else a for a in args], stream=0,
                         dynamic_smem=dynamic_smem, cluster=cluster, pdl=pdl)
        # Per call the maps and pointers are written with one slice assignment each (a
        # Python loop over them costs more than the rest of the call): map slots that are
        # adjacent in the argument list as one slice of it, pointer values as one c_uint64
        # array that the argument array points into.
        ms = self.map_slots
        self._map_span = slice(ms[0], ms[-1] + 1) if ms and ms == tuple(range(ms[0], ms[-1] + 1)) else None
        ptr_pos = [i for i, a in enumerate(args) if isinstance(a, ctypes.c_uint64)]
        self._ptr_vals = (ctypes.c_uint64 * max(1, len(ptr_pos)))(*[args[i].value for i in ptr_pos])
        self._n_ptrs = len(ptr_pos)
        for j, i in enumerate(ptr_pos):
            self._arg_array[i] = ctypes.addressof(self._ptr_vals) + 8 * j
        cu = _cu()
        self._stream_type = cu.CUstream
        self._stream = 0  # the raw handle _config.hStream holds (set in PreparedLaunch)
        self._ok = cu.CUresult.CUDA_SUCCESS
        self._retry = (cu.CUresult.CUDA_ERROR_INVALID_CONTEXT,)
        self._lock = threading.Lock()

    def __call__(self, stream: int, maps: tuple = (), ptrs: tuple = ()) -> None:
        """Launch on `stream` (a raw handle) with the map addresses and pointer values, each
        all of them in argument order (or none: the previous call's stay)."""
        args = self._arg_array
        with self._lock:
            if stream != self._stream:  # a new CUstream only when the stream changes
                self._config.hStream = self._stream_type(stream)
                self._stream = stream
            if maps:
                if self._map_span is not None:
                    args[self._map_span] = maps
                else:
                    for i, m in zip(self.map_slots, maps):
                        args[i] = m
            if ptrs:
                self._ptr_vals[0:self._n_ptrs] = ptrs
            res = self._launch(self._config, self.kernel.function, self._arg_ptr, 0)
            if res[0] != self._ok and res[0] in self._retry:
                # a thread whose driver context was never set (torch set the device only
                # through the runtime): make the primary context current and retry once
                ensure_context(self.kernel.device_index)
                res = self._launch(self._config, self.kernel.function, self._arg_ptr, 0)
        if res[0] != self._ok:
            check(res, self._what)


class HostMappedBuffer:
    """Pinned host memory the device can write (survives a trapped kernel: the host can
    still read it after the context is lost)."""

    def __init__(self, nbytes: int):
        cu = _cu()
        self.nbytes = nbytes
        self.host_ptr = int(check(cu.cuMemHostAlloc(nbytes, cu.CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc"))
        ctypes.memset(self.host_ptr, 0, nbytes)
        self.device_ptr = int(check(cu.cuMemHostGetDevicePointer(self.host_ptr, 0), "cuMemHostGetDevicePointer"))

    def read(self) -> bytes:
        return ctypes.string_at(self.host_ptr, self.nbytes)

    def clear(self) -> None:
        ctypes.memset(self.host_ptr, 0, self.nbytes)
