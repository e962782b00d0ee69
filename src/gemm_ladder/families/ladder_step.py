"""The Step type: the single place a ladder step's facts live, and what follows from them.

Each step is a kernel file under kernels/ plus a `Step` (registered in ladder.py): the forced
move it makes, its tile, ring, roles and cluster shape. Everything else is derived from those
fields: the compile-time defines the kernel is configured by (`kernel_defines`, the kernel has
no defaults of its own), its shared memory and barriers, the TMA boxes and kernel arguments
(`kernel_args`), the launch grid, and the simulator's parameters. Variants (e.g. a deeper
ring) are the same step with other field values (`dataclasses.replace`).
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

from ..cuda import driver, jit
from ..cuda.device import H200
from . import streamk
from .common import CLUSTER_CLAIMS, EPI_CHUNK_COLS, MN_BLOCK, ConfigError, build
from .protocol import Facts, KernelFamily

# The opt-in limit of dynamic + static shared memory per block on H100/H200 (227 KB).
MAX_SMEM_PER_BLOCK = H200.smem_per_block

# mbarriers per operand-ring stage, by the kernel's organisation: a lockstep team waits on
# one "full" barrier per stage; warp-specialized roles hand each stage over and back.
BARRIERS_PER_STAGE = {"naive": 0, "lockstep": 1, "warp-specialized": 2}


@dataclass(frozen=True)
class Step(KernelFamily):
    number: int
    name: str
    forced_move: str  # what it removes
    mechanism: str  # how, on Hopper
    threads: int
    source: str = ""  # file under kernels/; "" for a step only the simulator models so far
    entry: str = ""  # kernel entry point
    style: str = "lockstep"  # "naive" (no tile) | "lockstep" (one team) | "warp-specialized"
    bm: int = 128  # CTA tile: rows of C (all consumer warpgroups together)
    bn: int = 128  # columns of C
    bk: int = 64  # k-tile
    depth: int = 0  # shared-memory operand stages behind mbarriers (0: thread copies)
    has_ring: bool = False  # the stages form a ring the kernel cycles (its depth can vary)
    persistent: bool = False  # grid = SMs x ctas_per_sm, grouped tile order
    group_m: int = 0  # persistent steps: tile-rows per group of the tile order
    cluster: tuple[int, int, int] = (1, 1, 1)  # thread-block cluster shape of the launch
    consumers: int = 1  # consumer warpgroups (each owns bm // consumers rows of the tile)
    epi_stages: int = 0  # 64-column C staging chunks in the epilogue ring; 0 = one BMxBN tile
    pingpong: bool = False  # consumers take whole tiles in turns (each its staging + turn barrier)
    mn_major: bool = False  # also reads M-major A / N-major B (wgmma transpose bits): GL_A_MN, GL_B_MN
    uses_tma: bool = False
    tile_multiple: bool = False  # M, N, K must be multiples of the tile
    sass_claims: tuple[str, ...] = ()  # instruction classes the SASS must hold (see .claims)
    sass_absent: tuple[str, ...] = ()  # instruction classes it must not hold
    variant: str = ""  # "" for the step's default configuration, e.g. "d4"
    ctas_per_sm: int = 1  # persistent grid = SMs x this (experiments: >1 oversubscribes)
    mma_lag: int = 1  # warp-specialized: wgmma groups a consumer keeps in flight (stages it holds)
    # stream-K (GL_STREAM_K): None for kernels without the switch; True: a ragged last wave's
    # tiles are split along K over several CTAs each and summed in the kernel (families/streamk.py)
    stream_k: bool | None = None
    # the epilogue borrows the operand stage its tile's last k-tile drained, as staging for its
    # first chunks (GL_EPI_BORROW; None for kernels without the switch, step 9 has it)
    borrow_stage: bool | None = None
    # the first stages of each CTA's first tile loaded right after the barrier init, before the
    # set-up (GL_EARLY_LOADS; None for kernels without the switch, steps 8 and 9 have it). Only
    # without a cluster: +0.2-1.1 % there, slower with one (docs/perf-notes.md, item 74); not for
    # stream-K, whose first segment may start inside a tile
    early_loads: bool | None = None

    def __post_init__(self) -> None:
        if self.style not in BARRIERS_PER_STAGE:
            raise ValueError(f"step {self.key}: unknown style {self.style!r}")
        if self.uses_tma and self.depth < 1:
            raise ValueError(f"step {self.key}: a TMA step needs depth >= 1")
        if self.persistent and self.group_m < 1:
            raise ValueError(f"step {self.key}: a persistent step needs group_m >= 1")
        if self.stream_k and (self.cluster != (1, 1, 1) or not self.persistent):
            raise ValueError(f"step {self.key}: stream-K needs a persistent grid without a cluster")
        if self.style == "warp-specialized" and not 1 <= self.mma_lag < self.depth:
            raise ValueError(f"step {self.key}: wgmma groups in flight (l{self.mma_lag}) must be at least 1 and "
                             f"below the ring depth ({self.depth})")
        if self.borrow_stage and (self.stream_k or self.mma_lag != 1):
            raise ValueError(f"step {self.key}: the borrowed stage (b1) needs whole tiles and one wgmma group in "
                             f"flight; add b0 to leave it out")
        if (not self.pingpong and self.bm % self.consumers) or self.bn % self.cluster_m:
            raise ValueError(f"step {self.key}: the tile must split over consumers and cluster")

    # -- names ------------------------------------------------------------------------------
    @property
    def key(self) -> str:
        return f"{self.number}" + (f":{self.variant}" if self.variant else "")

    @property
    def label(self) -> str:
        return f"{self.number} {self.name}" + (f" ({self.variant})" if self.variant else "")

    @property
    def model_only(self) -> bool:
        """Modelled by the simulator, but no kernel implements it yet."""
        return not self.source

    # -- organisation -----------------------------------------------------------------------
    @property
    def has_tile(self) -> bool:
        return self.style != "naive"

    @property
    def cluster_m(self) -> int:
        """CTAs that share each B tile: each loads bn // cluster_m rows and multicasts them.
        Only warp-specialized kernels multicast; a lockstep kernel launched as a cluster
        still loads its whole B tile."""
        return self.cluster[0] if self.style == "warp-specialized" else 1

    @property
    def claims(self) -> tuple[str, ...]:
        """Instruction classes the SASS must hold: the step's own, plus what a multicasting
        cluster adds (multicast TMA loads, remote arrives, cluster barriers)."""
        return self.sass_claims + (CLUSTER_CLAIMS if self.cluster_m > 1 else ())

    @property
    def barriers_per_stage(self) -> int:
        return BARRIERS_PER_STAGE[self.style]

    @property
    def epilogue_slots(self) -> int:
        """C staging buffers: epi_stages chunks, or one whole tile when epi_stages is 0; when
        the consumers take tiles in turns, that many for each of them."""
        return max(1, self.epi_stages) * (self.consumers if self.pingpong else 1)

    @property
    def barriers(self) -> int:
        """mbarriers in shared memory: per operand stage, plus full/free per epilogue slot
        where a writeback role takes the staged tile from the consumers, plus a turn barrier
        per consumer in ping-pong."""
        epilogue = 2 * self.epilogue_slots if self.style == "warp-specialized" else 0
        turns = self.consumers if self.pingpong else 0
        lent = max(1, self.borrowed_chunks) if self.borrow_stage is not None else 0
        return self.depth * self.barriers_per_stage + epilogue + turns + lent

    @property
    def borrowed_chunks(self) -> int:
        """Epilogue chunks staged in the borrowed operand stage (borrow_stage): one in its A
        part, as many as its B part holds, at most the tile's chunks."""
        if not self.borrow_stage:
            return 0
        chunks = -(-self.bn // EPI_CHUNK_COLS)
        bn_smem = chunks * EPI_CHUNK_COLS
        return min(chunks, 1 + bn_smem * self.bk // (self.bm * EPI_CHUNK_COLS))

    # -- shared memory ----------------------------------------------------------------------
    @property
    def stage_bytes(self) -> int:
        """One operand stage: the A and B k-tiles (16-bit elements); a tile width that is not
        a multiple of 64 (9:n176) keeps room for whole 64-wide blocks of an N-major B."""
        return (self.bm + -(-self.bn // MN_BLOCK) * MN_BLOCK if self.bn % MN_BLOCK else self.bm + self.bn) * self.bk * 2

    @property
    def staging_bytes(self) -> int:
        if self.epi_stages == 0:
            return self.epilogue_slots * self.bm * self.bn * 2
        return self.epilogue_slots * self.bm * EPI_CHUNK_COLS * 2

    @property
    def dynamic_smem(self) -> int:
        """Bytes of dynamic shared memory: operand stages + C staging + barriers + 1 KB
        so the kernel can align its tiles to 1024 bytes. The kernel static_asserts that its
        SharedStorage fits (GL_DYNAMIC_SMEM)."""
        if not self.uses_tma:
            return 0
        return 1024 + self.depth * self.stage_bytes + self.staging_bytes + 8 * self.barriers

    def smem_problem(self, static_smem: int = 0) -> str:
        """Why this configuration's shared memory cannot be launched; "" if it can."""
        total = self.dynamic_smem + static_smem
        if total <= MAX_SMEM_PER_BLOCK:
            return ""
        return (f"needs {total:,} bytes of shared memory, over the {MAX_SMEM_PER_BLOCK:,}-byte "
                f"limit per block (depth {self.depth} x {self.stage_bytes:,} bytes per stage)")

    # -- the kernel's configuration and arguments -------------------------------------------
    def kernel_defines(self) -> dict[str, int]:
        """The compile-time configuration of the kernel, built only from these fields: the
        kernels have no defaults (a missing define is an #error)."""
        d: dict[str, int] = {}
        if self.has_tile:
            d.update(GL_BM=self.bm, GL_BN=self.bn, GL_BK=self.bk)
        if self.depth:
            d["GL_DEPTH"] = self.depth
        if self.persistent:
            d["GL_GROUP_M"] = self.group_m
        if self.style == "warp-specialized":
            d.update(GL_CLUSTER_M=self.cluster_m, GL_CONSUMERS=self.consumers, GL_EPI_STAGES=self.epi_stages,
                     GL_MMA_LAG=self.mma_lag)
        if self.uses_tma:
            d["GL_DYNAMIC_SMEM"] = self.dynamic_smem
        if self.stream_k is not None:
            d["GL_STREAM_K"] = int(self.stream_k)
        if self.borrow_stage is not None:
            d.update(GL_EPI_BORROW=int(self.borrow_stage), GL_EPI_LENT=self.borrowed_chunks)
        if self.early_loads is not None:
            d["GL_EARLY_LOADS"] = int(self.early_loads and self.cluster_m == 1 and not self.stream_k)
        return d

    @property
    def a_box(self) -> tuple[int, int]:
        """TMA box of A (rows, columns): the CTA's rows of one k-tile."""
        return (self.bm, self.bk)

    @property
    def b_box(self) -> tuple[int, int]:
        """TMA box of B: this CTA's share of the B k-tile (the cluster peers load the rest
        and multicast it)."""
        return (self.bn // self.cluster_m, self.bk)

    @property
    def c_box(self) -> tuple[int, int]:
        """TMA box of C: one 64-column chunk of the staged tile."""
        return (self.bm, EPI_CHUNK_COLS)

    @property
    def c_tail_box(self) -> tuple[int, int] | None:
        """TMA box of a tile's narrower last chunk, stored unswizzled (9:n176: 48 columns);
        None when the width is a multiple of 64."""
        return (self.bm, self.bn % EPI_CHUNK_COLS) if self.bn % EPI_CHUNK_COLS else None

    def kernel_args(self, a_ptr: int, b_ptr: int, c_ptr: int, M: int, N: int, K: int, *,
                    bf16: bool, a_mn: bool = False, b_mn: bool = False, lda: int | None = None,
                    ldb: int | None = None, ldc: int | None = None, make_map=None, ws_ptr: int = 0,
                    sk_tiles: int = 0, sk_ctas: int = 1) -> list:
        """The kernel's arguments for C (M, N) = A (M, K) @ B (N, K)^T: tensor maps + sizes for
        TMA steps, raw pointers + sizes for the others. Row-major storage with row strides
        lda/ldb/ldc (elements; default: packed). a_mn: A is stored as a row-major (K, M)
        matrix (M-major); b_mn: B as a row-major (K, N) matrix (N-major) — steps with
        `mn_major` only, compiled with layout_defines(). make_map(ptr, rows, cols, row stride,
        box rows, box cols, bf16) builds each tensor map (default driver.TensorMap; the
        library's fast path passes its cache of encoded maps). Stream-K steps also take their
        workspace (ws_ptr: flags + slots, `workspace_floats`), the tiles split and the CTAs
        sharing them (`stream_k_deal`; sk_tiles 0: none, and ws_ptr may be 0)."""
        if (a_mn or b_mn) and not self.mn_major:
            raise ConfigError(f"step {self.key} reads K-major operands only")
        if not self.uses_tma:
            return [ctypes.c_uint64(c_ptr), ctypes.c_uint64(a_ptr), ctypes.c_uint64(b_ptr), M, N, K]
        if make_map is None:
            make_map = driver.TensorMap
        lda = lda or (M if a_mn else K)
        ldb = ldb or (N if b_mn else K)
        # An MN-major operand travels as 64-wide blocks of bk k-rows (128-byte rows).
        a_map = (make_map(a_ptr, K, M, lda, self.bk, MN_BLOCK, bf16) if a_mn
                 else make_map(a_ptr, M, K, lda, *self.a_box, bf16))
        b_map = (make_map(b_ptr, K, N, ldb, self.bk, MN_BLOCK, bf16) if b_mn
                 else make_map(b_ptr, N, K, ldb, *self.b_box, bf16))
        args = [a_map, b_map, make_map(c_ptr, M, N, ldc or N, *self.c_box, bf16)]
        if self.c_tail_box:  # the narrow last chunk's map, beside C's (the kernel's tmap_c_tail)
            args.append(make_map(c_ptr, M, N, ldc or N, *self.c_tail_box, bf16, swizzle_128b=False))
        args += [M, N, K]
        if self.stream_k:
            args += [ctypes.c_uint64(ws_ptr), sk_tiles, sk_ctas]
        return args

    # -- stream-K (families/streamk.py) -------------------------------------------------------
    def stream_k_deal(self, M: int, N: int, K: int, ctas: int) -> tuple[int, int]:
        """(sk_tiles, sk_ctas) on a grid of `ctas`; (0, 1): every tile whole (streamk.deal)."""
        return streamk.deal(self, M, N, K, ctas)

    def stream_k_last_wave(self, k_tiles: int, pieces: int) -> float:
        return streamk.last_wave(self, k_tiles, pieces)

    def stream_k_problem(self, M: int, N: int, K: int, ctas: int, sk_tiles: int, sk_ctas: int) -> str:
        return streamk.problem(self, M, N, K, ctas, sk_tiles, sk_ctas)

    def workspace_floats(self, ctas: int) -> int:
        return streamk.workspace_floats(self, ctas)

    # -- the protocol's questions (families/protocol.py) --------------------------------------
    def facts(self) -> Facts:
        return Facts(bm=self.bm, bn=self.bn, bk=self.bk, cluster_m=self.cluster_m, consumers=self.consumers,
                     persistent=self.persistent, ctas_per_sm=self.ctas_per_sm, stream_k=bool(self.stream_k))

    def reads_mn(self) -> tuple[bool, bool]:
        return self.mn_major, self.mn_major

    def layout_defines(self, a_mn: bool = False, b_mn: bool = False) -> dict[str, int]:
        """Per-call layout switches (like GL_BF16), for kernels with `mn_major`."""
        return {k: 1 for k, on in (("GL_A_MN", a_mn), ("GL_B_MN", b_mn)) if on}

    def compile(self, *, bf16: bool = False, extra_defines: dict | None = None,
                use_cache: bool = True, strict: bool = True) -> jit.CompiledKernel:
        """Build the kernel; extra_defines are ablation/debug switches (GL_TRACE, ...)."""
        if self.model_only:
            raise ConfigError(f"step {self.key} is model only: no kernel implements it yet")
        return build(self.source, self.entry, self.kernel_defines(), bf16=bf16, extra_defines=extra_defines,
                     use_cache=use_cache, strict=strict)

    # -- shapes -----------------------------------------------------------------------------
    def shape_problems(self, M: int, N: int, K: int, *, b_mn: bool = False) -> list[str]:
        """Why this step cannot take (M, N, K); empty if it can (either major order of B alike)."""
        p = []
        if min(M, N, K) < 1:
            p.append(f"M, N, K must be >= 1 (got {M}, {N}, {K})")
        if self.tile_multiple:
            if M % self.bm:
                p.append(f"M={M} must be a multiple of {self.bm}")
            if N % self.bn:
                p.append(f"N={N} must be a multiple of {self.bn}")
            if K % self.bk:
                p.append(f"K={K} must be a multiple of {self.bk}")
        if self.uses_tma:
            if K % 8:
                p.append(f"K={K} must be a multiple of 8 (TMA needs 16-byte row strides for A and B)")
            if N % 8:
                p.append(f"N={N} must be a multiple of 8 (TMA needs a 16-byte row stride for C)")
        if max(M, N) >= 2**31 or K >= 2**31:
            p.append("dimensions must be < 2^31")
        return p

    def tiles(self, M: int, N: int) -> int:
        return -(-M // self.bm) * -(-N // self.bn)

    def tiles_per_cta(self, M: int, N: int, num_sms: int) -> int:
        """Output tiles the busiest CTA computes."""
        if not self.persistent:
            return 1
        return -(-self.tiles(M, N) // (num_sms * self.ctas_per_sm))

    def grid(self, M: int, N: int, num_sms: int, max_clusters: int | None = None) -> tuple[int, int, int]:
        """Launch grid. Persistent: one CTA per SM at most (or `max_clusters` clusters, the
        number that fit at once), and no more than the tiles; a cluster covers cluster[0]
        vertically adjacent tiles (the last pair may reach below C)."""
        tiles_m, tiles_n = -(-M // self.bm), -(-N // self.bn)
        if self.persistent:
            cm = self.cluster[0]
            clusters = min(num_sms * self.ctas_per_sm // cm, -(-tiles_m // cm) * tiles_n)
            if max_clusters:
                clusters = min(clusters, max_clusters * self.ctas_per_sm)
            return (max(1, clusters) * cm, 1, 1)
        return (tiles_n, tiles_m, 1)

    def smem_ai(self) -> float:
        """FLOP per byte loaded into shared memory per k-tile (operand reuse of the tile);
        a step without a tile reads its operands from global memory: 2 FLOP per 4 bytes."""
        if not self.has_tile:
            return 0.5
        return 2 * self.bm * self.bn * self.bk / (self.stage_bytes)
