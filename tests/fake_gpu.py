"""A CPU stand-in for the driver side of gemm_ladder's fast path, for tests without a GPU.

`FakeGpu` patches the few functions the fast path calls into CUDA (device checks, kernel
load, tensor-map encode, cuLaunchKernelEx, current stream/device, cluster occupancy) so that
CPU tensors run through the real Python path. Each launch is *emulated*: the kernel's tensor
maps are read back as strided views of the memory they point at (rows, columns, row stride,
as TMA would read them, MN-major maps — GL_A_MN / GL_B_MN builds — transposed), C = A @ B^T
is computed in fp32 and written through C's map; the small-M family's split-K kernel writes
each K split's fp32 partial to its workspace (or C itself with one split) and its reduction
sums them into C — so a wrong pointer, stride, extent, split or a missed copy shows up as a
wrong result. With `emulate=False` a launch is only counted (for timing the Python side).
"""
from __future__ import annotations

import contextlib
import ctypes
from types import SimpleNamespace

import torch

from gemm_ladder.runtime import driver, fastconfig, fastpath, launch, smallm, steps


def tile_coords(t: int, tiles_m: int, tiles_n: int, group_m: int) -> tuple[int, int]:
    """The kernels' TileScheduler::coords (gl_scheduler.cuh): tile t of the grouped order ->
    (tile row, tile column)."""
    per_group = group_m * tiles_n
    first_m = t // per_group * group_m
    rows = min(tiles_m - first_m, group_m)
    return first_m + t % per_group % rows, t % per_group // rows


def stream_k_start(q: int, units: int, k_tiles: int, sk_ctas: int, lead: int) -> int:
    """StreamKRun::start: the first unit of CTA q's run."""
    q = min(q, sk_ctas)
    if not lead:
        return units * q // sk_ctas
    p = sk_ctas * k_tiles // units
    s, j = divmod(q, p)
    return s * k_tiles + (0 if j == 0 else lead + (j - 1) * (k_tiles - lead) // (p - 1))


def stream_k_segments(tiles: int, sk_tiles: int, k_tiles: int, grid: int, cta: int,
                      sk_ctas: int | None = None, lead: int = 0) -> list[tuple[int, int, int]]:
    """The kernels' for_each_segment with STREAM_K (gl_warpspec.cuh), for one CTA of `grid`:
    its (tile, k0, k1) in the order it computes them — whole tiles cta, cta + grid, ... below
    tiles - sk_tiles, then its run of the split tiles' units (the first sk_ctas CTAs have one;
    default: all; lead: the owner's share, StreamKRun)."""
    sk_ctas = grid if sk_ctas is None else sk_ctas
    dp_end = tiles - sk_tiles
    out = [(t, 0, k_tiles) for t in range(cta, dp_end, grid)]
    units = sk_tiles * k_tiles
    if not units:
        return out
    u, u1 = (stream_k_start(q, units, k_tiles, sk_ctas, lead) for q in (cta, cta + 1))
    while u < u1:
        s = u // k_tiles
        out.append((dp_end + s, u - s * k_tiles, min(k_tiles, u1 - s * k_tiles)))
        u = (s + 1) * k_tiles
    return out


def stream_k_last_cta(tile: int, tiles: int, sk_tiles: int, k_tiles: int, ctas: int, lead: int = 0) -> int:
    """StreamKRun::last_cta: the CTA holding a split tile's last unit."""
    if lead:
        p = ctas // sk_tiles
        return (tile - (tiles - sk_tiles) + 1) * p - 1
    last = (tile - (tiles - sk_tiles)) * k_tiles + k_tiles - 1
    return ((last + 1) * ctas - 1) // (sk_tiles * k_tiles)


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
        return _view(self.ptr, self.dtype, (self.rows, self.cols), self.ld)


def _cluster_of(config) -> tuple:
    """The cluster-dimension launch attribute's shape, (1, 1, 1) without one."""
    for attr in list(config.attrs)[:config.numAttrs]:
        if attr.id == driver._cu().CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
            d = attr.value.clusterDim
            return (int(d.x), int(d.y), int(d.z))
    return (1, 1, 1)


def _view(ptr: int, dtype, shape: tuple, ld: int):
    rows, cols = shape
    n = (rows - 1) * ld + cols
    if dtype == torch.float32:
        raw = (ctypes.c_float * n).from_address(ptr)
        return torch.frombuffer(raw, dtype=torch.float32).as_strided(shape, (ld, 1))
    raw = (ctypes.c_uint16 * n).from_address(ptr)
    return torch.frombuffer(raw, dtype=torch.int16).view(dtype).as_strided(shape, (ld, 1))


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
        monkeypatch.setattr(fastpath, "_CONFIGS", fastconfig.LRU(fastpath.MAX_CONFIGS))
        monkeypatch.setattr(fastconfig, "_TMAPS", fastconfig.LRU(fastconfig.MAX_TENSOR_MAPS))
        monkeypatch.setattr(smallm, "_REDUCE", {})
        monkeypatch.setattr(driver, "_cu", lambda: cu)
        monkeypatch.setattr(driver, "TensorMap", FakeTensorMap)
        monkeypatch.setattr(driver, "max_active_clusters", lambda kernel, block, smem, cluster: 66)
        monkeypatch.setattr(fastpath, "_check_devices", lambda *a: None)
        monkeypatch.setattr(fastpath, "validate", counting_validate)
        monkeypatch.setattr(fastconfig, "prepare_kernel", self._prepare)
        monkeypatch.setattr(fastconfig, "_building", lambda dev: contextlib.nullcontext())
        monkeypatch.setattr(fastconfig, "_device_index", lambda device: 0)
        monkeypatch.setattr(fastconfig, "_current_device", lambda: 0)
        monkeypatch.setattr(fastconfig, "_raw_stream", lambda dev: self.stream)
        monkeypatch.setattr(fastconfig, "_capturing", lambda: False)
        monkeypatch.setattr(launch, "num_sms", lambda dev: 132)
        monkeypatch.setattr(launch, "run_step", self._run_step)
        monkeypatch.setattr(launch, "check_device", lambda device: None)

    def _prepare(self, st, dev, bf16, defines=None):
        self.prepared.append((st.key, dev, bf16, dict(defines or {})))
        return SimpleNamespace(kernel=self._kernel(st.entry, st.key, dict(defines or {})))

    def _kernel(self, name, key, defines):
        fn = SimpleNamespace(name=name, defines=defines, key=key)
        return SimpleNamespace(function=fn, device_index=0, compiled=SimpleNamespace(name=name, key=key),
                               sibling=lambda entry: self._kernel(entry, key, defines))

    def _run_step(self, st, a, b, out=None, **kw):  # the strict path, for teaching steps
        c = (a.float() @ b.float().T).to(a.dtype)
        return c if out is None else out.copy_(c)

    def _launch(self, config, function, args_ptr):
        if not self.emulate:
            self.launches_counted = getattr(self, "launches_counted", 0) + 1
            return
        grid = (config.gridDimX, config.gridDimY, config.gridDimZ)
        rec = SimpleNamespace(name=function.name, stream=int(config.hStream), defines=function.defines, grid=grid,
                              attrs=config.numAttrs, cluster=_cluster_of(config))
        self.launches.append(rec)
        if function.name == smallm.SmallM.reduce_entry:
            return self._reduce(rec, args_ptr)
        if function.name == smallm.SmallM.entry:
            return self._splitk(rec, args_ptr)
        st = steps.get_step(function.key)
        slots = (ctypes.c_void_p * (10 if st.stream_k else 6)).from_address(args_ptr)
        rec.maps = [FakeTensorMap.registry[slots[i]] for i in range(3)]
        rec.M, rec.N, rec.K = (ctypes.c_int32.from_address(slots[i]).value for i in range(3, 6))
        ma, mb, mc = rec.maps
        A = ma.view().t() if function.defines.get("GL_A_MN") else ma.view()
        B = mb.view().t() if function.defines.get("GL_B_MN") else mb.view()
        assert A.shape == (rec.M, rec.K) and B.shape == (rec.N, rec.K) and (mc.rows, mc.cols) == (rec.M, rec.N)
        if st.stream_k:
            rec.ws = ctypes.c_uint64.from_address(slots[6]).value
            rec.sk_tiles = ctypes.c_int32.from_address(slots[7]).value
            rec.sk_ctas = ctypes.c_int32.from_address(slots[8]).value
            rec.sk_lead = ctypes.c_int32.from_address(slots[9]).value
            if rec.sk_tiles:
                return self._stream_k(rec, st, A, B, mc)
        mc.view().copy_((A.float() @ B.float().T).to(mc.dtype))

    def _stream_k(self, rec, st, A, B, mc):
        """Step 9 with stream-K: every CTA's segments (whole tiles, then its run of units);
        a later piece goes to its CTA's slot (checked: one per CTA), the owner adds the later
        CTAs' slots in CTA order and writes C; every unit is computed exactly once."""
        M, N, K, G = rec.M, rec.N, rec.K, rec.grid[0]
        assert rec.ws, "a stream-K launch with split tiles needs its workspace"
        assert 1 <= rec.sk_ctas <= G and rec.sk_tiles * -(-K // st.bk) >= rec.sk_ctas, "a unit for every sharing CTA"
        tm, tn, kt, bk = -(-M // st.bm), -(-N // st.bn), -(-K // st.bk), st.bk
        tiles = tm * tn
        flag_ints = -(-G * st.consumers * 4 // 256) * 64
        flags = _view(rec.ws, torch.float32, (1, flag_ints), flag_ints).view(torch.int32)[0]
        assert int(flags.abs().sum()) == 0, "stream-K flags must start lowered"
        C, slot, owners, covered = mc.view(), {}, [], []

        def part(t, k0, k1):
            r, c = tile_coords(t, tm, tn, st.group_m)
            rows = slice(r * st.bm, min((r + 1) * st.bm, M))
            cols = slice(c * st.bn, min((c + 1) * st.bn, N))
            return (rows, cols), A[rows, k0 * bk:k1 * bk].float() @ B[cols, k0 * bk:k1 * bk].float().T

        for cta in range(G):
            for t, k0, k1 in stream_k_segments(tiles, rec.sk_tiles, kt, G, cta, rec.sk_ctas, rec.sk_lead):
                covered += [(t, k) for k in range(k0, k1)]
                where, p = part(t, k0, k1)
                if k0 > 0:  # a later piece: this CTA's slot
                    assert cta not in slot, "a CTA stores at most one later piece"
                    slot[cta] = p
                elif k1 == kt:  # whole
                    C[where] = p.to(mc.dtype)
                else:  # an owner: sums once every CTA ran (on the GPU it waits on the flags)
                    owners.append((cta, t, where, p))
        rec.owners = []
        for cta, t, where, acc in owners:
            later = range(cta + 1, stream_k_last_cta(t, tiles, rec.sk_tiles, kt, rec.sk_ctas, rec.sk_lead) + 1)
            rec.owners.append((cta, t, list(later)))
            for q in later:
                acc = acc + slot.pop(q)
            C[where] = acc.to(mc.dtype)
        assert not slot, "every later piece is summed by its owner"
        assert sorted(covered) == [(t, k) for t in range(tiles) for k in range(kt)], "every unit exactly once"

    def _splitk(self, rec, args_ptr):
        """gemm_smallm_splitk(map A, map B, ws, c, M, N, K, units): the (tile, k-tile) units,
        tile-major (tiles column-major over C), in runs of `units` per CTA of a 1-D grid (the kernel's Segments): a whole
        tile goes to C, a piece to plane (CTA - first CTA of the tile) of ws."""
        slots = (ctypes.c_void_p * 8).from_address(args_ptr)
        ma, mb = (FakeTensorMap.registry[slots[i]] for i in range(2))
        rec.maps = [ma, mb]
        ws, c = (ctypes.c_uint64.from_address(slots[i]).value for i in (2, 3))
        rec.M, rec.N, rec.K, units = (ctypes.c_int32.from_address(slots[i]).value for i in range(4, 8))
        rec.ws, rec.c, rec.units = ws, c, units
        A, B = ma.view(), mb.view()
        assert A.shape == (rec.M, rec.K) and B.shape == (rec.N, rec.K)
        bm, bn, bk = ma.box[0], mb.box[0], smallm.SmallM.bk
        M, N = rec.M, rec.N
        m_tiles, kt = -(-M // bm), -(-rec.K // bk)
        total = m_tiles * -(-N // bn) * kt
        assert rec.grid == (-(-total // units), 1, 1), (rec.grid, total, units)
        pieces = {}  # cluster reduction: tile -> its pieces in rank order
        for cta in range(rec.grid[0]):
            u, u1 = cta * units, min((cta + 1) * units, total)
            while u < u1:
                t = u // kt
                k0, k1 = u - t * kt, min(kt, u1 - t * kt)
                r0, c0 = t % m_tiles * bm, t // m_tiles * bn  # column-major tiles
                rows, cols = slice(r0, min(r0 + bm, M)), slice(c0, min(c0 + bn, N))
                part = A[rows, k0 * bk:k1 * bk].float() @ B[cols, k0 * bk:k1 * bk].float().T
                if rec.cluster[0] > 1:
                    assert cta % rec.cluster[0] == len(pieces.setdefault(t, [])) and k1 - k0 == units
                    pieces[t].append(part)
                    if len(pieces[t]) == rec.cluster[0]:  # the last rank: sum in rank order
                        total_t = pieces[t][0]
                        for q in pieces[t][1:]:
                            total_t = total_t + q
                        _view(c, ma.dtype, (M, N), N)[rows, cols] = total_t.to(ma.dtype)
                elif k0 == 0 and k1 == kt:
                    _view(c, ma.dtype, (M, N), N)[rows, cols] = part.to(ma.dtype)
                else:
                    plane = cta - t * kt // units
                    _view(ws + 4 * plane * M * N, torch.float32, (M, N), N)[rows, cols] = part
                u = (t + 1) * kt
        rec.dtype, rec.bm, rec.bn = ma.dtype, bm, bn

    def _reduce(self, rec, args_ptr):
        """gemm_smallm_reduce(ws, c, M, N, K, units): each split tile's planes summed in order."""
        slots = (ctypes.c_void_p * 6).from_address(args_ptr)
        ws, c = (ctypes.c_uint64.from_address(slots[i]).value for i in (0, 1))
        M, N, K, units = (ctypes.c_int32.from_address(slots[i]).value for i in range(2, 6))
        rec.ws, rec.c, rec.M, rec.N, rec.K, rec.units = ws, c, M, N, K, units
        main = next(r for r in reversed(self.launches) if r.name == smallm.SmallM.entry)
        bm, bn, kt = main.bm, main.bn, -(-K // smallm.SmallM.bk)
        m_tiles = -(-M // bm)
        for t in range(m_tiles * -(-N // bn)):
            first = t * kt // units
            pieces = (t * kt + kt - 1) // units - first + 1
            if pieces == 1:
                continue
            r0, c0 = t % m_tiles * bm, t // m_tiles * bn
            rows, cols = slice(r0, min(r0 + bm, M)), slice(c0, min(c0 + bn, N))
            total = sum(_view(ws + 4 * z * M * N, torch.float32, (M, N), N)[rows, cols] for z in range(pieces))
            _view(c, main.dtype, (M, N), N)[rows, cols] = total.to(main.dtype)
