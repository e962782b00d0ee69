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

from gemm_ladder.cuda import device as cuda_device
from gemm_ladder.cuda import driver
from gemm_ladder.families import keys, smallm
from gemm_ladder.families.ladder_step import Step
from gemm_ladder.library import fastconfig, fastpath, runner, staging


def tile_coords(t: int, tiles_m: int, tiles_n: int, group_m: int) -> tuple[int, int]:
    """The kernels' TileScheduler::coords (gl_scheduler.cuh): tile t of the grouped order ->
    (tile row, tile column)."""
    per_group = group_m * tiles_n
    first_m = t // per_group * group_m
    rows = min(tiles_m - first_m, group_m)
    return first_m + t % per_group % rows, t % per_group // rows


def stream_k_segments(tiles: int, sk_tiles: int, k_tiles: int, grid: int, cta: int,
                      sk_ctas: int | None = None) -> list[tuple[int, int, int]]:
    """The kernels' for_each_segment with STREAM_K (gl_warpspec.cuh), for one CTA of `grid`:
    its (tile, k0, k1) in the order it computes them — whole tiles cta, cta + grid, ... below
    tiles - sk_tiles, then its run of the split tiles' units (the first sk_ctas CTAs have one;
    default: all)."""
    sk_ctas = grid if sk_ctas is None else sk_ctas
    dp_end = tiles - sk_tiles
    out = [(t, 0, k_tiles) for t in range(cta, dp_end, grid)]
    units = sk_tiles * k_tiles
    if not units:
        return out
    u, u1 = (units * min(q, sk_ctas) // sk_ctas for q in (cta, cta + 1))
    while u < u1:
        s = u // k_tiles
        out.append((dp_end + s, u - s * k_tiles, min(k_tiles, u1 - s * k_tiles)))
        u = (s + 1) * k_tiles
    return out


def slice_of(j: int, pieces: int, chunks: int) -> tuple[int, int]:
    """Step 9's slice_of: the 64-column chunks [c0, c1) piece j of a split tile's `pieces` writes."""
    return j * chunks // pieces, (j + 1) * chunks // pieces


def rnd(*shape, dtype=torch.float16, seed=0):
    """Fresh random CPU data for the fake GPU's tests (a seed per shape)."""
    g = torch.Generator().manual_seed(seed + sum(shape))
    return torch.randn(*shape, generator=g).to(dtype)


def assert_product(c, a, b):
    """c == a @ b (fp32 reference, fp16/bf16 rounding)."""
    ref = a.float() @ b.float()
    assert c.shape == ref.shape
    torch.testing.assert_close(c.float(), ref, atol=2e-2 * ref.abs().max().item(), rtol=1e-2)


def misaligned(rows, cols, seed):
    """A (rows, cols) tensor one element past an aligned start: its rows at 2-byte offsets."""
    return rnd(rows * cols + 1, seed=seed)[1:].view(rows, cols)


def is_small_m(key: str) -> bool:
    """A key of the small-M split-K family (not a ladder Step): 'smallm', 'smallm:n128'."""
    return not isinstance(keys.get_step(key), Step)


def last_splitk(gpu):
    """The latest launch of the small-M main kernel (a reduction may follow it, or not)."""
    return next(r for r in reversed(gpu.launches) if r.name == "gemm_smallm_splitk")


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
        self.swizzle_128b = swizzle_128b
        self.dtype = torch.bfloat16 if bf16 else torch.float16
        self._storage = ctypes.create_string_buffer(128)  # stands for the CUtensorMap bytes
        FakeTensorMap.registry[self.address()] = self
        FakeTensorMap.encoded += 1

    def address(self) -> int:
        return ctypes.addressof(self._storage)

    def view(self):
        """The matrix this map describes, as a tensor over the same memory."""
        return _view(self.ptr, self.dtype, (self.rows, self.cols), self.ld)

    def span(self) -> tuple[int, int]:
        """[first, last + 1) bytes of the memory the map covers."""
        return self.ptr, self.ptr + ((self.rows - 1) * self.ld + self.cols) * 2


def _assert_writes_apart(mc: FakeTensorMap, *reads: FakeTensorMap) -> None:
    """The kernels write C while other CTAs still read A and B: C must share no byte with them
    (a call with out=a goes through a buffer)."""
    c0, c1 = mc.span()
    for m in reads:
        r0, r1 = m.span()
        assert c1 <= r0 or r1 <= c0, f"C [{c0:#x}, {c1:#x}) overlaps an operand read in place [{r0:#x}, {r1:#x})"


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
        monkeypatch.setattr(fastpath, "CONFIGS", fastconfig.LRU(fastpath.MAX_CONFIGS))
        monkeypatch.setattr(fastconfig, "TENSOR_MAPS", fastconfig.LRU(fastconfig.MAX_TENSOR_MAPS))
        monkeypatch.setattr(runner, "_REDUCE", {})
        monkeypatch.setattr(driver, "_cu", lambda: cu)
        monkeypatch.setattr(driver, "TensorMap", FakeTensorMap)
        monkeypatch.setattr(driver, "max_active_clusters", lambda kernel, block, smem, cluster: 66)
        monkeypatch.setattr(fastpath, "_check_devices", lambda *a: None)
        monkeypatch.setattr(fastpath, "validate", counting_validate)
        monkeypatch.setattr(fastconfig, "prepare_kernel", self._prepare)
        monkeypatch.setattr(fastconfig, "building", lambda dev: contextlib.nullcontext())
        monkeypatch.setattr(fastconfig, "device_index", lambda device: 0)
        monkeypatch.setattr(fastconfig, "_current_device", lambda: 0)
        monkeypatch.setattr(fastconfig, "_raw_stream", lambda dev: self.stream)
        monkeypatch.setattr(fastconfig, "_capturing", lambda: False)
        monkeypatch.setattr(cuda_device, "num_sms", lambda dev: 132)
        monkeypatch.setattr(runner, "run_checked", self._run_checked)
        monkeypatch.setattr(runner, "check_device", lambda device: None)

    def _prepare(self, st, dev, bf16, defines=None):
        self.prepared.append((st.key, dev, bf16, dict(defines or {})))
        return SimpleNamespace(kernel=self._kernel(st.entry, st.key, dict(defines or {}), st))

    def _kernel(self, name, key, defines, family=None):
        fn = SimpleNamespace(name=name, defines=defines, key=key, family=family)
        return SimpleNamespace(function=fn, device_index=0, compiled=SimpleNamespace(name=name, key=key),
                               sibling=lambda entry: self._kernel(entry, key, defines, family))

    def _run_checked(self, st, a, b):  # the strict path, for teaching steps
        return (a.float() @ b.float().T).to(a.dtype)

    def _launch(self, config, function, args_ptr):
        if not self.emulate:
            self.launches_counted = getattr(self, "launches_counted", 0) + 1
            return
        grid = (config.gridDimX, config.gridDimY, config.gridDimZ)
        rec = SimpleNamespace(name=function.name, stream=int(config.hStream), defines=function.defines, grid=grid,
                              block=(config.blockDimX, config.blockDimY, config.blockDimZ),
                              attrs=config.numAttrs, cluster=_cluster_of(config), key=function.key,
                              family=getattr(function, "family", None))
        self.launches.append(rec)
        if function.name == staging.STAGE_COPY_ENTRY:
            return self._stage_copy(rec, args_ptr)
        if function.name == smallm.SmallM.reduce_entry:
            return self._reduce(rec, args_ptr)
        if function.name == smallm.SmallM.entry:
            return self._splitk(rec, args_ptr)
        st = keys.get_step(function.key)
        tail = 1 if st.c_tail_box else 0  # a narrow last chunk's C map follows C's
        slots = (ctypes.c_void_p * ((9 if st.stream_k else 6) + tail)).from_address(args_ptr)
        rec.maps = [FakeTensorMap.registry[slots[i]] for i in range(3 + tail)]
        rec.M, rec.N, rec.K = (ctypes.c_int32.from_address(slots[i]).value for i in range(3 + tail, 6 + tail))
        ma, mb, mc = rec.maps[:3]
        _assert_writes_apart(mc, ma, mb)
        if tail:  # the same C, boxed as the kernel's last chunk, unswizzled
            mt = rec.maps[3]
            assert (mt.ptr, mt.rows, mt.cols, mt.ld) == (mc.ptr, mc.rows, mc.cols, mc.ld) and mt.box == st.c_tail_box
            assert not mt.swizzle_128b and mc.swizzle_128b
        A = ma.view().t() if function.defines.get("GL_A_MN") else ma.view()
        B = mb.view().t() if function.defines.get("GL_B_MN") else mb.view()
        assert A.shape == (rec.M, rec.K) and B.shape == (rec.N, rec.K) and (mc.rows, mc.cols) == (rec.M, rec.N)
        if st.stream_k:
            rec.ws = ctypes.c_uint64.from_address(slots[6]).value
            rec.sk_tiles = ctypes.c_int32.from_address(slots[7]).value
            rec.sk_ctas = ctypes.c_int32.from_address(slots[8]).value
            if rec.sk_tiles:
                return self._stream_k(rec, st, A, B, mc)
        mc.view().copy_((A.float() @ B.float().T).to(mc.dtype))

    def _stream_k(self, rec, st, A, B, mc):
        """Step 9 with stream-K: every CTA's segments (whole tiles, then its piece of a split
        tile: P pieces per tile on consecutive CTAs, one each); piece j writes its slice of
        the tile's 64-column chunks, its own part plus the other pieces' in piece order.
        Checked: every unit computed once, every chunk of a split tile written once."""
        M, N, K, G = rec.M, rec.N, rec.K, rec.grid[0]
        assert rec.ws, "a stream-K launch with split tiles needs its workspace"
        tm, tn, kt, bk = -(-M // st.bm), -(-N // st.bn), -(-K // st.bk), st.bk
        tiles, chunks = tm * tn, st.bn // 64
        p = rec.sk_ctas // rec.sk_tiles
        assert p * rec.sk_tiles == rec.sk_ctas and 2 <= p <= min(chunks, kt) and rec.sk_ctas <= G
        flag_ints = -(-G * st.consumers * 4 // 256) * 64
        flags = _view(rec.ws, torch.float32, (1, flag_ints), flag_ints).view(torch.int32)[0]
        assert int(flags.abs().sum()) == 0, "stream-K flags must start lowered"
        C, pieces, covered, written = mc.view(), {}, [], []

        def where(t):
            r, c = tile_coords(t, tm, tn, st.group_m)
            return r * st.bm, c * st.bn

        for cta in range(G):
            segs = stream_k_segments(tiles, rec.sk_tiles, kt, G, cta, rec.sk_ctas)
            for t, k0, k1 in segs:
                covered += [(t, k) for k in range(k0, k1)]
                r0, c0 = where(t)
                rows, cols = slice(r0, min(r0 + st.bm, M)), slice(c0, min(c0 + st.bn, N))
                part = A[rows, k0 * bk:k1 * bk].float() @ B[cols, k0 * bk:k1 * bk].float().T
                if k1 - k0 == kt:
                    C[rows, cols] = part.to(mc.dtype)
                else:  # a piece: the CTA's last segment, piece cta % p of its tile
                    assert (t, k0, k1) == segs[-1] and cta // p == t - (tiles - rec.sk_tiles)
                    pieces[cta] = (t, part)
        for cta, (t, part) in pieces.items():
            j, first = cta % p, cta - cta % p
            c_lo, c_hi = slice_of(j, p, chunks)
            acc = part.clone()
            for i in range(p):  # piece order
                if i != j:
                    assert pieces[first + i][0] == t
                    acc = acc + pieces[first + i][1]
            r0, c0 = where(t)
            lo, hi = c_lo * 64, min(c_hi * 64, acc.shape[1])
            if lo < hi:
                C[r0:r0 + acc.shape[0], c0 + lo:c0 + hi] = acc[:, lo:hi].to(mc.dtype)
            written += [(t, c) for c in range(c_lo, c_hi)]
        assert sorted(covered) == [(t, k) for t in range(tiles) for k in range(kt)], "every unit exactly once"
        split = range(tiles - rec.sk_tiles, tiles)
        assert sorted(written) == [(t, c) for t in split for c in range(chunks)], "every chunk written once"

    def _stage_copy(self, rec, args_ptr):
        """gl_stage_copy(src0, dst0, rows0, cols0, rs0, ld0, src1, ...): blockIdx.y picks the
        operand; element (r, c) read at src[r * rs + c], written at dst[r * ld + c]."""
        slots = (ctypes.c_void_p * 12).from_address(args_ptr)
        rec.copies = []
        for j in range(rec.grid[1]):
            src, dst = (ctypes.c_uint64.from_address(slots[6 * j + i]).value for i in (0, 1))
            rows, cols, rs, ld = (ctypes.c_int64.from_address(slots[6 * j + i]).value for i in range(2, 6))
            assert dst % 16 == 0 and (ld * 2) % 16 == 0 and ld >= cols and rec.block == (256, 1, 1)
            n = (rows - 1) * rs + cols
            raw = (ctypes.c_uint16 * n).from_address(src)
            source = torch.frombuffer(raw, dtype=torch.int16).as_strided((rows, cols), (rs, 1))
            _view(dst, torch.float16, (rows, cols), ld).view(torch.int16).copy_(source)
            rec.copies.append((src, dst, rows, cols, rs, ld))
        # blocks stride over every operand's (row, chunk of THREADS x UNROLL columns) pairs
        width = staging.STAGE_COPY_THREADS * staging.STAGE_COPY_UNROLL
        pairs = max(rows * -(-cols // width) for _, _, rows, cols, _, _ in rec.copies)
        assert rec.grid[0] == min(pairs, staging.STAGE_COPY_BLOCKS), (rec.grid, pairs)

    def _splitk(self, rec, args_ptr):
        """gemm_smallm_splitk(map A, map B, ws, c, M, N, K, units): the (tile, k-tile) units,
        tile-major (tiles column-major over C), in runs of `units` per CTA of a 1-D grid (the kernel's Segments): a whole
        tile goes to C, a piece to plane (CTA - first CTA of the tile) of ws."""
        slots = (ctypes.c_void_p * 10).from_address(args_ptr)
        ma, mb, mc = (FakeTensorMap.registry[slots[i]] for i in range(3))
        rec.maps = [ma, mb, mc]
        _assert_writes_apart(mc, ma, mb)
        ws, c = (ctypes.c_uint64.from_address(slots[i]).value for i in (3, 4))
        rec.M, rec.N, rec.K, units, a_rows = (ctypes.c_int32.from_address(slots[i]).value for i in range(5, 10))
        # the prepared entry (an experiment's twin too: smallm.with_fields); a variant (e.g. ~b_early)
        # deals as its entry
        fam = keys.get_step(rec.key.split("~")[0]) if rec.family is None or "~" in rec.key else rec.family
        bk = fam.bk
        # A's box: the tile's rows, or M rounded up to 8 when M is smaller (the rows past it unread),
        # one 64-wide block of K; shared A: each CTA of a cluster loads a slice of the tile's rows
        assert ma.box == (a_rows // fam.share_a, smallm.K_BLOCK), (ma.box, a_rows)
        assert a_rows == min(fam.bm, -(-rec.M // 8) * 8), a_rows
        # C's map (the staged epilogue's TMA stores) and its pointer are the same packed matrix
        assert (mc.ptr, mc.rows, mc.cols, mc.ld, mc.box) == (c, rec.M, rec.N, rec.N, (64, 64)), vars(mc)
        rec.ws, rec.c, rec.units = ws, c, units
        b_mn = bool(rec.defines.get("GL_B_MN"))  # B given (K, N): its map's boxes are 64-wide blocks of k-rows
        A, B = ma.view(), (mb.view().t() if b_mn else mb.view())
        # C's rows may be N rounded up to 8 (the kernel's N): B's rows past its map read as zeros
        assert A.shape == (rec.M, rec.K) and B.shape[1] == rec.K and 0 <= rec.N - B.shape[0] < 8
        assert B.shape[0] == rec.N or rec.N % 8 == 0
        if B.shape[0] < rec.N:
            B = torch.cat([B, B.new_zeros((rec.N - B.shape[0], rec.K))])
        assert not b_mn or mb.box == (smallm.K_BLOCK, 64), mb.box
        # a multicast pair's CTAs (a shared-B cluster's) each load a slice of a K-major B tile (the map's box)
        bm, bn = fam.bm, (fam.bn if b_mn else mb.box[0] * fam.cluster_m)
        M, N = rec.M, rec.N
        m_tiles, kt = -(-M // bm), -(-rec.K // bk)
        total = m_tiles * -(-N // bn) * kt
        rec.dtype, rec.bm, rec.bn, rec.bk = ma.dtype, bm, bn, bk
        if fam.multicast > 1:  # the kernel's PairWalk: clusters of mc along M, whole tiles
            mc = fam.multicast
            assert rec.cluster == (mc, 1, 1) and rec.grid[0] % mc == 0 and units == kt, (rec.cluster, rec.grid)
            m_groups, clusters = -(-m_tiles // mc), rec.grid[0] // mc
            groups = m_groups * -(-N // bn)
            assert clusters <= groups
            for cta in range(rec.grid[0]):
                for g in range(cta // mc, groups, clusters):
                    r0, c0 = (g % m_groups * mc + cta % mc) * bm, g // m_groups * bn
                    if r0 >= M:  # the pair's second tile below C: zeros loaded, nothing stored
                        continue
                    rows, cols = slice(r0, min(r0 + bm, M)), slice(c0, min(c0 + bn, N))
                    _view(c, ma.dtype, (M, N), N)[rows, cols] = (A[rows].float() @ B[cols].float().T).to(ma.dtype)
            return
        rec.shared = fam.shared_loads > 1
        if rec.shared:  # clusters of share_a x share_b: one piece of adjacent tiles each; units: pieces per tile
            na, mb, cl, per_tile = fam.share_a, fam.share_b, fam.shared_loads, units
            assert rec.cluster == (cl, 1, 1) and rec.grid == (total // kt * per_tile, 1, 1) and a_rows == bm
            # the kernel's guard (it traps otherwise): whole clusters of tiles, pieces of >= 1 k-tile
            assert m_tiles % mb == 0 and total // kt // m_tiles % na == 0 and 1 <= per_tile <= kt
            deal = smallm.Deal.shared(total // kt, kt, per_tile, na, mb)
            ctas = [deal.cta_of_block(b, m_tiles) for b in range(rec.grid[0])]
            assert sorted(ctas) == list(range(rec.grid[0])) and rec.grid[0] % cl == 0
            for c0 in range(0, len(ctas), cl):  # rank r: column r % na, row r // na of the cluster's tiles
                tiles = [c // per_tile for c in ctas[c0:c0 + cl]]
                assert len({c % per_tile for c in ctas[c0:c0 + cl]}) == 1  # one piece: the same k-tiles
                t0 = tiles[0]
                assert tiles == [t0 + (r % na) * m_tiles + r // na for r in range(cl)], tiles
                assert t0 % m_tiles % mb == 0 and t0 // m_tiles % na == 0
            for cta in ctas:
                t, p = divmod(cta, per_tile)
                k0, k1 = deal.piece_k_tiles(p)
                r0, c0 = t % m_tiles * bm, t // m_tiles * bn
                rows, cols = slice(r0, min(r0 + bm, M)), slice(c0, min(c0 + bn, N))
                part = A[rows, k0 * bk:k1 * bk].float() @ B[cols, k0 * bk:k1 * bk].float().T
                if per_tile == 1:
                    _view(c, ma.dtype, (M, N), N)[rows, cols] = part.to(ma.dtype)
                else:
                    _view(ws + 4 * p * M * N, torch.float32, (M, N), N)[rows, cols] = part
            return
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

    def _reduce(self, rec, args_ptr):
        """gemm_smallm_reduce(ws, c, M, N, K, units): each split tile's planes summed in order."""
        slots = (ctypes.c_void_p * 6).from_address(args_ptr)
        ws, c = (ctypes.c_uint64.from_address(slots[i]).value for i in (0, 1))
        M, N, K, units = (ctypes.c_int32.from_address(slots[i]).value for i in range(2, 6))
        rec.ws, rec.c, rec.M, rec.N, rec.K, rec.units = ws, c, M, N, K, units
        assert rec.grid[1] == M and rec.grid[0] * rec.block[0] * 2 >= N, (rec.grid, M, N)  # 2 elements a thread
        main = next(r for r in reversed(self.launches) if r.name == smallm.SmallM.entry)
        bm, bn, kt = main.bm, main.bn, -(-K // main.bk)
        m_tiles = -(-M // bm)
        for t in range(m_tiles * -(-N // bn)):
            first = t * kt // units
            pieces = units if getattr(main, "shared", False) else (t * kt + kt - 1) // units - first + 1
            if pieces == 1:
                continue
            r0, c0 = t % m_tiles * bm, t // m_tiles * bn
            rows, cols = slice(r0, min(r0 + bm, M)), slice(c0, min(c0 + bn, N))
            total = sum(_view(ws + 4 * z * M * N, torch.float32, (M, N), N)[rows, cols] for z in range(pieces))
            _view(c, main.dtype, (M, N), N)[rows, cols] = total.to(main.dtype)
