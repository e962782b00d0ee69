"""A CPU stand-in for the driver side of gemm_ladder.fastpath, for tests without a GPU.

`FakeGpu` patches the few functions the fast path calls into CUDA (device checks, kernel
load, tensor-map encode, cuLaunchKernelEx, current stream/device) so that CPU tensors run
through the real Python path. Each launch is *emulated*: the kernel's tensor maps are read
back as strided views of the memory they point at (rows, columns, row stride, as TMA would
read them, MN-major maps transposed), C = A @ B^T is computed in fp32 and written through
C's map — so a wrong pointer, stride, extent or a missed copy shows up as a wrong result.
With `emulate=False` a launch is only counted (for timing the Python side).
"""
from __future__ import annotations

import ctypes
from types import SimpleNamespace

import torch

from gemm_ladder import driver, fastpath


class FakeTensorMap:
    registry: dict[int, "FakeTensorMap"] = {}
    encoded = 0

    def __init__(self, ptr, rows, cols, row_stride_elems, box_rows, box_cols, bf16=False, swizzle_128b=True):
        if ptr % 16 or (row_stride_elems * 2) % 16:
            raise ValueError("TMA needs a 16-byte aligned base address and row stride")
        assert rows >= 1 and cols >= 1 and row_stride_elems >= cols, (rows, cols, row_stride_elems)
        assert box_cols * 2 <= 128 and box_rows <= 256
        self.ptr, self.rows, self.cols, self.ld = ptr, rows, cols, row_stride_elems
        self.box = (box_rows, box_cols)
        self.dtype = torch.bfloat16 if bf16 else torch.float16
        self._storage = ctypes.create_string_buffer(128)  # stands for the CUtensorMap bytes
        FakeTensorMap.registry[self.address()] = self
        FakeTensorMap.encoded += 1

    def address(self) -> int:
        return ctypes.addressof(self._storage)

    def view(self):
        """The matrix this map describes, as a tensor over the same memory."""
        n = (self.rows - 1) * self.ld + self.cols
        raw = (ctypes.c_uint16 * n).from_address(self.ptr)
        return torch.frombuffer(raw, dtype=torch.int16).view(self.dtype).as_strided((self.rows, self.cols), (self.ld, 1))


class FakeGpu:
    def __init__(self, monkeypatch, emulate: bool = True):
        self.emulate = emulate
        self.launches: list[SimpleNamespace] = []
        self.prepared: list[tuple] = []
        self.stream = 7
        self.validations = 0
        real_cu = driver._cu()
        ok = real_cu.CUresult.CUDA_SUCCESS
        gpu = self

        class Cu:
            def __getattr__(self, name):
                return getattr(real_cu, name)

            @staticmethod
            def cuLaunchKernelEx(config, function, args_ptr, extra):
                gpu._launch(config, function, args_ptr)
                return (ok,)

        cu = Cu()
        real_validate = fastpath.validate

        def counting_validate(*args, **kw):
            gpu.validations += 1
            return real_validate(*args, **kw)

        FakeTensorMap.registry.clear()
        # fresh caches for the test, the process's own restored afterwards
        monkeypatch.setattr(fastpath, "_CONFIGS", fastpath.LRU(fastpath.MAX_CONFIGS))
        monkeypatch.setattr(fastpath, "_TMAPS", fastpath.LRU(fastpath.MAX_TENSOR_MAPS))
        monkeypatch.setattr(driver, "_cu", lambda: cu)
        monkeypatch.setattr(driver, "TensorMap", FakeTensorMap)
        monkeypatch.setattr(fastpath, "_check_devices", lambda *a: None)
        monkeypatch.setattr(fastpath, "validate", counting_validate)
        monkeypatch.setattr(fastpath, "prepare_kernel", self._prepare)
        monkeypatch.setattr(fastpath, "_device_index", lambda device: 0)
        monkeypatch.setattr(fastpath, "_current_device", lambda: 0)
        monkeypatch.setattr(fastpath, "_raw_stream", lambda dev: self.stream)
        monkeypatch.setattr(fastpath.launch, "num_sms", lambda dev: 132)
        monkeypatch.setattr(fastpath.launch, "run_step", self._run_step)
        monkeypatch.setattr(fastpath.launch, "check_device", lambda device: None)

    def _prepare(self, st, dev, bf16, defines=None):
        self.prepared.append((st.key, dev, bf16, dict(defines or {})))
        fn = SimpleNamespace(defines=dict(defines or {}))
        return SimpleNamespace(kernel=SimpleNamespace(function=fn, compiled=SimpleNamespace(name=st.entry)))

    def _run_step(self, st, a, b, out=None, **kw):  # the strict path, for teaching steps
        c = (a.float() @ b.float().T).to(a.dtype)
        return c if out is None else out.copy_(c)

    def _launch(self, config, function, args_ptr):
        if not self.emulate:
            self.launches_counted = getattr(self, "launches_counted", 0) + 1
            return
        slots = (ctypes.c_void_p * 6).from_address(args_ptr)
        maps = [FakeTensorMap.registry[slots[i]] for i in range(3)]
        M, N, K = (ctypes.c_int32.from_address(slots[i]).value for i in range(3, 6))
        rec = SimpleNamespace(maps=maps, M=M, N=N, K=K, stream=int(config.hStream), defines=function.defines,
                              grid=(config.gridDimX, config.gridDimY, config.gridDimZ))
        self.launches.append(rec)
        ma, mb, mc = maps
        A = ma.view().t() if function.defines.get("GL_A_MN_MAJOR") else ma.view()
        B = mb.view().t() if function.defines.get("GL_B_MN_MAJOR") else mb.view()
        assert A.shape == (M, K) and B.shape == (N, K) and (mc.rows, mc.cols) == (M, N), (A.shape, B.shape, M, N, K)
        mc.view().copy_((A.float() @ B.float().T).to(mc.dtype))
