"""The small-M family (decode-like shapes, M <= 128, and problems too small to fill the SMs
with the ladder's 128 x 128 tiles): K split stream-K style over a one-dimensional grid, a
deterministic second pass. Its configuration and entries live here, its deal model in
smallm_deal.py and its launch pieces in smallm_args.py (both mixed into `SmallM`), as a step's
live in ladder_step.py and ladder.py.

Not a rung of the ladder: a kernel family beside it (kernels/smallm_splitk.cu). Its entries
are reached by key through `keys.get_step("smallm")` / `"smallm:n128"` / ... (FAMILIES
below) and are never listed by `ladder.all_steps()`, so nothing that walks the
ladder meets them by accident. An entry has the parts of a `Step` the shared machinery reads
(key, label, source, entry, threads, kernel_defines(), dynamic_smem, barriers, compile(),
shape_problems(), accepts(), claims), so the runner's `prepare`, `plan`/`run_step`
(library/runner.py), the compile report and the benchmark take it as they take a step; what
differs is the deal of work (here) and the workspace and two launches (smallm_args.py).

The deal (`deal`; the whole model with its measured constants in docs/smallm.md): the tiles x
k_tiles units of work, tile-major, go in equal runs of `units` to ceil(total / units) CTAs,
one per SM at a time; a tile whose units fall to more than one CTA is split, its pieces
written in fp32 to planes of a workspace that the second kernel sums in order. Among runs
of at least MIN_KT_PER_SPLIT k-tiles (or the whole K), split s ways or dealt over g CTAs (up
to MAX_WAVES waves), the deal minimizes `deal_cost`: a run's k-tiles plus CTA and segment
overheads, a wave priced as if SPLITK_DEAL_HBM_SATURATION (cost_model.py) of the SMs were
busy (that many draw the full bandwidth), the second launch and the fp32 round trip priced in
streaming time. Ties go to fewer planes, then longer runs. The constants count 64-wide k-tiles; an
entry with 128-wide ones scales them (`kt_scale`). `fixed_deal(M, N, K, splits)` is the plain split, for
experiments and tests.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from ..cuda import jit
from ..cuda.device import H200
from .common import CLUSTER_CLAIMS, MN_BLOCK, ConfigError, build
from .protocol import Facts, KernelFamily
# the family's names, read from here (smallm.Deal, smallm.REDUCE_THREADS, smallm.WORKSPACE_COST, ...)
from .smallm_args import C_BOX, K_BLOCK, REDUCE_BATCH, REDUCE_MAX_REGS, REDUCE_THREADS, SmallMArgs  # noqa: F401
from .smallm_deal import (CLUSTER_SLOTS, CTA_OVERHEAD_KT, DSMEM_EXCHANGE_KT, FIXUP_SLOT_READS,  # noqa: F401
                          LADDER_WAVE_TILES, MAX_FIXUP_CTAS, MAX_WAVES, MIN_KT_PER_SPLIT, REDUCE_OVERHEAD_BYTES,
                          SEGMENT_OVERHEAD_KT, WORKSPACE_COST, SmallMDeal)
from .splitk_deal import CLUSTER_PIECES, Deal, cdiv, fixup_flag_floats  # noqa: F401

# The entries whose in-kernel fixup (an experiment: no registered entry deals with it) the GPU
# tests run and CI compiles. Not the 256-wide single consumer (smallm, smallm:dsmem): with the
# fixup it spills 8 bytes under NVRTC 13.0.
FIXUP_ENTRIES = ("smallm:c2", "smallm:c2n128", "smallm:n128")
# Above max_m (M > 128) the family takes a problem only while the ladder's 128 x 128 tiles
# fill less than one wave of the H200's SMs, and only from rows that are whole 32-byte sectors
# (K a multiple of 16): 1000^3 and 1016^3 measured 0.70x cuBLAS on its 64 x 128 tile against
# 1008^3 0.86x and 1024^3 0.92x, 256 x 4104 x 4104 0.59x against 256 x 4000 x 4000 0.97x
# (docs/perf-notes.md, item 28). Not for an N-major B (a row-major (K, N) b read in place): the
# production kernels that read it so are gemm:128x192's tiles, which the family beats there on
# such rows (1000^3 0.72 -> 0.77, 256 x 4088 x 4088 0.66 -> 0.78; one probed shape lost, 2000 x
# 1000 x 1000 0.86 -> 0.82; docs/perf-notes.md, item 42)
# MULTICAST_NICHE: the multicast pairs (smallm:n128m2) take only problems above 128 rows and
# under one ladder wave whose B rows, as read, are not whole 32-byte sectors (K = 8 mod 16 for a
# K-major B, N = 8 mod 16 for an N-major one): each CTA fetching half of B takes back what the
# straddled sectors cost (1000^3 13.0 -> 11.5 us fp16, 0.79 -> 0.90x cuBLAS; bf16 0.85 -> 0.96),
# while on aligned rows the pair's coupling costs more than the halved fetch saves (1024^3 9.5
# -> 9.9 us, 768^3 9.1-9.3 -> 9.6; docs/perf-notes.md item 51)
ALIGNED_K = 16


@dataclass(frozen=True)
class SmallM(SmallMArgs, SmallMDeal, KernelFamily):  # launch pieces: smallm_args.py; the deal: smallm_deal.py
    key: str
    bn: int = 256  # CTA tile columns (m64nBNk16)
    depth: int = 5  # operand ring stages
    name: str = "small M, split K"
    forced_move: str = "at small M, 128-row tiles waste the MMA and too few CTAs stream the weights"
    mechanism: str = ("64 x BN tile per consumer warpgroup (rows >= M zero-filled by TMA), the (tile, k-tile) "
                      "units dealt in equal runs to a one-wave grid (stream-K), split tiles' fp32 pieces to a "
                      "workspace, a second kernel sums them in order; TMA producer warp + wgmma consumer "
                      "warpgroups, setmaxnreg 40/232")
    source: str = "smallm/smallm_splitk.cu"
    entry: str = "gemm_smallm_splitk"
    consumers: int = 1  # consumer warpgroups, 64 rows of the tile each (two: B loaded once for 128 rows)
    # k-columns per stage: 64, or 128 (two 64-wide blocks under one full barrier and one release:
    # half the round trips per byte, stages twice as large; n32, n64 and n64s, item 123)
    bk: int = 64
    max_m: int = 128  # decode-like shapes; above, only problems under one ladder wave (large_m_problems)
    min_m: int = 1  # two consumers: M > 64 (below, one consumer's 64 rows hold all of M)
    # ... and programmatic launch: PREEXIT (griddepcontrol.launch_dependents), ACQBULK (.wait)
    sass_claims: tuple[str, ...] = ("HGMMA", "UTMALDG", "UTMACCTL.PF", "SYNCS", "USETMAXREG", "PREEXIT", "ACQBULK")
    sass_absent: tuple[str, ...] = ("FFMA",)
    uses_tma: bool = True
    persistent: bool = False  # one tile and one K range per CTA; the split sizes the grid
    variant: str = ""
    pdl: bool = True  # the reduction launches programmatically (waits on the SMs for the partials)
    # the main kernel launches programmatically too: in a chain of GEMMs its launch and set-up
    # overlap the previous kernel's tail (its producer waits for that grid before any load)
    chain_pdl: bool = True
    # k-tiles of B the producer brings into L2 before that wait (GL_PREFETCH_KT). 0: measured
    # slower with it (8 k-tiles: a decode chain 1-2 % slower, docs/perf-notes.md item 81)
    prefetch_kt: int = 0
    # B's first DEPTH stages issued into the ring before that wait, A's after it (GL_B_EARLY):
    # only for a B no earlier grid of the stream writes (weights); an experiment form of the
    # decode chain
    b_early: bool = False
    cluster_reduce: bool = False  # deals may sum a tile's pieces in a cluster (DSMEM) instead of a workspace
    # the deal model's constants for this entry (None: the module's). Two consumers re-read a
    # 128-row A from L2 for every tile, so more of their SMs are needed before HBM saturates.
    hbm_saturation: float | None = None
    workspace_cost: float | None = None
    # stream-K fixup (GL_FIXUP): one resident wave; split tiles summed in the kernel from
    # per-CTA slots (no planes, no second pass); see the kernel's header
    fixup: bool = False
    # B also N-major (a row-major (K, N) matrix, read through wgmma's transpose bit, GL_B_MN);
    # A is always K-major
    b_mn_major: bool = True
    # > 0: the entry takes only M <= max_m (no large-M path), whole tiles that fit one wave,
    # and K up to this many k-tiles (the narrow tile's niche: where the wider tiles' split
    # deals pay their second pass on a short K; item 47)
    one_wave_max_kt: int = 0
    # > 0: the entry takes K only up to this many k-tiles (a ring sized for a short K: item 66)
    max_kt: int = 0
    # 2: clusters of two CTAs along M share each B tile, each loading half of it and
    # multicasting it into both (GL_MULTICAST; whole tiles only, the kernel's PairWalk)
    multicast: int = 1
    # two MMA warpgroups on the one 64-row block, alternating k-tiles, each into its own
    # accumulator (GL_K_ALTERNATE; whole tiles, one per CTA: the kernel's alternate_tile)
    k_alternate: bool = False
    # > 0: the entry takes K only from this many k-tiles (alternating k-tiles: on a short K the
    # ring's fill, not the consumer, sets the pace; 256^3-384^3 measured 2-4 % behind n64s)
    min_kt: int = 0
    # 2 or 4: clusters of that many CTAs along N run the same piece of adjacent tiles of one row
    # block, each loading 1/share_a of A's rows and multicasting them into all (GL_SHARE_A; every
    # tile in the same number of pieces, floor or ceil of K / pieces k-tiles); share_b the same
    # along M for B (GL_SHARE_B): a cluster of share_a x share_b CTAs
    share_a: int = 1
    share_b: int = 1
    # wgmma groups a consumer keeps in flight before it retires one and releases its stage
    # (GL_MMA_LAG; 1: the group before the one just issued). Not with alternating k-tiles. Two or
    # four measured no faster than one (docs/perf-notes.md item 119)
    mma_lag: int = 1

    def __post_init__(self) -> None:
        if self.k_alternate and (self.consumers != 1 or self.bn != 64 or self.multicast > 1 or self.fixup
                                 or self.cluster_reduce or self.depth < 3):
            raise ValueError(f"{self.key}: alternating k-tiles run whole 64 x 64 tiles (one consumer's rows, no "
                             "multicast, fixup or cluster reduction, a ring of 3 stages or more)")
        if self.multicast not in (1, 2) or self.multicast > 1 and (
                self.fixup or self.cluster_reduce or not self.staged_c
                or self.b_mn_major and self.bn // self.multicast % MN_BLOCK):
            raise ValueError(f"{self.key}: multicast pairs run whole tiles with the staged epilogue (no fixup, "
                             "no cluster reduction), and an N-major B's half must be whole 64-column blocks")
        if self.share_a not in (1, 2, 4) or self.share_b not in (1, 2, 4) or self.shared_loads > 8 or (
                self.shared_loads > 1 and (self.multicast > 1 or self.fixup or self.cluster_reduce
                                           or self.b_early or self.b_mn_major and self.bn // self.share_b % MN_BLOCK
                                           or self.share_b > 1 and self.prefetch_kt)):
            raise ValueError(f"{self.key}: A and B are shared by clusters of 1, 2 or 4 CTAs along N and M (8 at "
                             "most), without multicast pairs, fixup, cluster reduction or B issued early, an "
                             "N-major B's slices whole 64-column blocks, a shared B not prefetched")
        if self.consumers not in (1, 2) or self.bk not in (64, 128) or self.bn not in (32, 64, 128, 256):
            raise ValueError(f"{self.key}: the kernel takes one or two consumers of 64 x 32, 64 x 64, 64 x 128 or "
                             "64 x 256, k-tile 64 or 128")
        if self.b_mn_major and self.bn < MN_BLOCK:
            raise ValueError(f"{self.key}: an N-major B is loaded in {MN_BLOCK}-column blocks; BN {self.bn} "
                             "needs b_mn_major=False")
        if self.depth < 2:
            raise ValueError(f"{self.key}: the ring needs depth >= 2")
        if not 1 <= self.mma_lag < self.depth or self.mma_lag > 1 and self.k_alternate:
            raise ValueError(f"{self.key}: 1 <= mma_lag < depth ({self.depth}), and 1 with alternating k-tiles")

    @property
    def bm(self) -> int:
        return 64 * self.consumers

    @property
    def cluster_m(self) -> int:
        """CTAs along M sharing each B tile (the selection's operand bytes read it)."""
        return self.multicast * self.share_b

    @property
    def shared_loads(self) -> int:
        """CTAs of a shared-load cluster (share_a x share_b; 1: none)."""
        return self.share_a * self.share_b

    @property
    def threads(self) -> int:
        return 128 * (1 + self.mma_warpgroups)  # producer warpgroup + consumers

    @property
    def mma_warpgroups(self) -> int:
        """Consumer warpgroups issuing wgmma: one per 64-row block, two on it with k_alternate."""
        return self.consumers * (2 if self.k_alternate else 1)

    @property
    def whole_tiles(self) -> bool:
        """The entry runs whole tiles only (multicast pairs, alternating k-tiles): no split deal."""
        return self.multicast > 1 or self.k_alternate

    # -- what the shared machinery reads ----------------------------------------------------
    @property
    def label(self) -> str:
        return f"{self.key} ({self.name}, {self.bm}x{self.bn}, depth {self.depth})"

    @property
    def staged_c(self) -> bool:
        """Whole tiles leave through shared memory and TMA stores: the held stage's A and B
        hold the consumers' 64 x 64 chunks (the kernel's STAGED_C, from the same fields)."""
        chunks = self.bn // C_BOX
        return chunks > 0 and self.consumers * chunks <= self.consumers + chunks

    @property
    def claims(self) -> tuple[str, ...]:
        return (self.sass_claims + (f"HGMMA.64x{self.bn}x16",) + (("UTMASTG", "STSM") if self.staged_c else ())
                + (CLUSTER_CLAIMS if self.multicast > 1 or self.shared_loads > 1 else ()) + (("UTMAPF",) if self.prefetch_kt else ()))

    @property
    def barriers(self) -> int:
        return 2 * self.depth  # tma2mma + mma2tma per stage

    @property
    def stage_bytes(self) -> int:
        return (self.bm + self.bn) * self.bk * 2

    @property
    def dynamic_smem(self) -> int:
        """Operand stages + barriers + 1 KB to align the tiles to 1024 bytes (the kernel
        static_asserts that its SharedStorage fits)."""
        return 1024 + self.depth * self.stage_bytes + 8 * self.barriers

    def smem_problem(self, static_smem: int = 0) -> str:
        total = self.dynamic_smem + static_smem
        if total <= H200.smem_per_block:
            return ""
        return f"needs {total:,} bytes of shared memory, over the {H200.smem_per_block:,}-byte limit per block"

    def smem_ai(self) -> float:
        return 2 * self.bm * self.bn * self.bk / self.stage_bytes

    def kernel_defines(self) -> dict[str, int]:
        return dict(GL_BM=self.bm, GL_BN=self.bn, GL_BK=self.bk, GL_DEPTH=self.depth, GL_CONSUMERS=self.consumers,
                    GL_DYNAMIC_SMEM=self.dynamic_smem, GL_FIXUP=int(self.fixup), GL_MULTICAST=self.multicast,
                    GL_PREFETCH_KT=self.prefetch_kt, GL_K_ALTERNATE=int(self.k_alternate),
                    GL_B_EARLY=int(self.b_early), GL_SHARE_A=self.share_a, GL_SHARE_B=self.share_b,
                    GL_REDUCE_BATCH=REDUCE_BATCH, GL_MMA_LAG=self.mma_lag)

    def compile(self, *, bf16: bool = False, extra_defines: dict | None = None,
                use_cache: bool = True, strict: bool = True) -> jit.CompiledKernel:
        """Both entries of the file (split-K kernel and reduction) in one module."""
        return build(self.source, self.entry, self.kernel_defines(), bf16=bf16, extra_defines=extra_defines,
                     use_cache=use_cache, strict=strict)

    def layout_defines(self, a_mn: bool = False, b_mn: bool = False) -> dict[str, int]:
        """The build for the operands' layouts: GL_B_MN for an N-major B (A is K-major only)."""
        if a_mn:
            raise ConfigError(f"{self.key} reads A K-major only")
        return {"GL_B_MN": 1} if b_mn else {}

    def shape_problems(self, M: int, N: int, K: int, *, b_mn: bool = False) -> list[str]:
        """Why the family does not take (M, N, K); b_mn: B is read N-major (large_m_problems)."""
        p = []
        if min(M, N, K) < 1:
            p.append(f"M, N, K must be >= 1 (got {M}, {N}, {K})")
        if M > self.max_m:
            p += ([f"M={M} is over {self.max_m}: {self.key} is for decode-like rows only"] if self.one_wave_max_kt
                  else self.large_m_problems(M, N, K, b_mn))
        elif self.one_wave_max_kt:
            p += self.one_wave_problems(M, N, K)
        if M < self.min_m:
            p.append(f"M={M} is under {self.min_m}: " + (
                f"{self.key}'s second consumer would compute only padding" if self.consumers > 1 else
                f"{self.key}'s second MMA warpgroup would wait on the weights' stream" if self.k_alternate else
                f"{self.key} takes M >= {self.min_m}"))
        if self.min_kt and self.k_tiles(K) < self.min_kt:
            p.append(f"K={K} is under {self.min_kt * self.bk}: {self.key} is for a long K (on a short one the "
                     f"ring's fill sets the pace, not the consumer)")
        if self.max_kt and self.k_tiles(K) > self.max_kt:
            p.append(f"K={K} is over {self.max_kt * self.bk}: {self.key}'s {self.depth}-stage ring is for a short "
                     f"K; a long one streams faster through a deeper ring")
        if self.shared_loads > 1 and (M < self.bm or self.tiles(M, N)[0] % self.share_b
                                      or self.tiles(M, N)[1] % self.share_a):
            p.append(f"{self.key} shares its loads over clusters of {self.share_a} x {self.share_b} tiles (N x M): it "
                     f"takes M >= {self.bm}, N in a multiple of {self.share_a} tiles of {self.bn} and M in a multiple "
                     f"of {self.share_b} tiles of {self.bm} (got M={M}, N={N})")
        if K % 8:
            p.append(f"K={K} must be a multiple of 8 (TMA needs 16-byte row strides for A and B)")
        if N % 8:
            p.append(f"N={N} must be a multiple of 8 (16-byte rows of C and of the workspace)")
        if max(M, N, K) >= 2**31:
            p.append("dimensions must be < 2^31")
        return p

    def large_m_problems(self, M: int, N: int, K: int, b_mn: bool = False) -> list[str]:
        """Above max_m the family takes only problems too small for the ladder's 128 x 128
        tiles to fill one wave, read from 32-byte aligned rows unless B is N-major (the
        constants' comment)."""
        tiles = cdiv(M, 128) * cdiv(N, 128)
        if tiles >= LADDER_WAVE_TILES:
            return [f"M={M} is over {self.max_m} and the ladder's 128x128 tiles fill the SMs ({tiles} tiles): "
                    "the small-M family is for decode-like shapes and problems under one wave"]
        if self.multicast > 1:  # the pairs' niche: B rows (as read) that are not whole 32-byte sectors
            rows, name = (N, "N") if b_mn else (K, "K")
            if rows % ALIGNED_K == 0:
                return [f"M={M} is over {self.max_m} and B's rows ({name}={rows}) are whole 32-byte sectors: "
                        f"{self.key}'s pairs pay only where B's rows are not (MULTICAST_NICHE)"]
            return []
        if K % ALIGNED_K and not b_mn:
            return [f"M={M} is over {self.max_m} and K={K} is not a multiple of {ALIGNED_K}: rows that are "
                    "not 32-byte multiples cost this family more than the ladder's kernels"]
        return []

    def one_wave_problems(self, M: int, N: int, K: int) -> list[str]:
        """The `one_wave_max_kt` rule: whole tiles in one wave, a short K."""
        m_tiles, n_tiles = self.tiles(M, N)
        if m_tiles * n_tiles > LADDER_WAVE_TILES:
            return [f"{self.key}'s {m_tiles * n_tiles} tiles of {self.bm}x{self.bn} are more than one wave "
                    f"({LADDER_WAVE_TILES})"]
        if self.k_tiles(K) > self.one_wave_max_kt:
            return [f"K={K} is over {self.one_wave_max_kt * self.bk}: on a long K the wider tiles' split deals "
                    f"measured faster than {self.key}'s whole tiles"]
        return []

    # -- the protocol's questions (families/protocol.py) --------------------------------------
    def facts(self) -> Facts:
        """The tile; the split of K comes from the deal (`deal`), per shape."""
        return Facts(bm=self.bm, bn=self.bn, bk=self.bk, cluster_m=self.cluster_m, consumers=self.mma_warpgroups,
                     persistent=self.persistent, ctas_per_sm=1, cluster_n=self.share_a)

    def reads_mn(self) -> tuple[bool, bool]:
        return False, self.b_mn_major  # A (the activations) always K-major

# A second MMA warpgroup on a tile pays only from this many k-tiles: on a shorter K the ring's
# fill and the epilogue set the pace, not the issue rate (smallm:n64alt's min_kt: 256^3-384^3 2-4 %
# behind n64s, item 104; the selection's tie between the same tile with more or fewer MMA
# warpgroups, select.choose: 1280^3, item 115)
MORE_ISSUERS_MIN_KT = 32

# The deal constants the two-consumer entries measured best with (item 21).
TWO_CONSUMER_DEAL = dict(hbm_saturation=0.75, workspace_cost=1.5)

# The family's entries, by key (keys.get_step looks here).
FAMILIES: dict[str, SmallM] = {
    "smallm": SmallM("smallm"),
    "smallm:n128": SmallM("smallm:n128", bn=128, depth=8, variant="n128"),
    # the pieces summed on chip by clusters of 2, 4 or 8 CTAs: measured no faster than the
    # workspace and its programmatically launched second pass (docs/perf-notes.md, item 18)
    "smallm:dsmem": SmallM("smallm:dsmem", cluster_reduce=True, variant="dsmem"),
    # two consumers: a 128-row tile, B loaded once for both row blocks (M = 65 .. 128; at 256,
    # two row blocks, measured 0.63-0.92x cuBLAS: the ladder's tiles take those)
    # 64 x 64: above 128 rows for problems its tiles fill in one wave (256^3 16 tiles, 512^3 64,
    # each CTA fetching 16 KB per k-tile instead of n128's 24: measured 1.02 / 0.93x cuBLAS
    # against n128's 0.96 / 0.88, docs/perf-notes.md item 37), and at M <= 128 where its whole
    # tiles fill the SMs. Depth 12 (192 KB in flight, as n128's 8 stages of 24 KB): at depth 8
    # its whole tiles ran 21.4 us at 128 x 4096 x 4096, at 12 20.1 (cuBLAS 19.2; item 44).
    # Where the deal splits K evenly, its pieces are summed in clusters of 2, 4 or 8 CTAs
    # (DSMEM): at 16 x 4096 x {11008, 14336} pairs ran 5-7 % faster than two planes summed by
    # the second pass (docs/perf-notes.md, item 69). 128-wide k-tiles in the same 192 KB (6 stages
    # of 32 KB): every row measured 0.9-5.5 % faster than 12 stages of 64 (640^3 7.80 -> 7.43 us,
    # 256 x 1024 x 4096 15.50 -> 15.10; items 122-123)
    "smallm:n64": SmallM("smallm:n64", bn=64, bk=128, depth=6, variant="n64", cluster_reduce=True),
    # the same tile with two consumer warpgroups alternating k-tiles (cuBLAS runs 384 threads on its
    # 64 x 64 tiles): a lone consumer issues a k-tile every ~150 ns even with no loads, two ~112 ns,
    # so the loads set the pace; 14 stages, the most that fit (more bytes in flight: loads alone
    # 146 -> 138 ns per k-tile from 12). Whole tiles only: the selection's MMA-warpgroups rule takes it
    # where n64's deal is whole tiles, from K = 2048 (256 x 2048 x 4096 17.1 -> 15.6 us, cuBLAS 14.9; level
    # at the other long-K shapes; behind n64s on the small squares; docs/perf-notes.md item 104), and
    # M > 16: decode rows wait on the weights, not the consumer (level in single calls, 1.5-2 % slower
    # as a decode chain's QKV, item 105)
    "smallm:n64alt": SmallM("smallm:n64alt", bn=64, depth=14, variant="n64alt", k_alternate=True,
                            min_kt=MORE_ISSUERS_MIN_KT, min_m=17),
    # the same tile with a short ring for K up to 512 (the small squares): 6 stages of 64 measured
    # 1-5 % ahead of 12 at 256^3 and 512^3, where 12 stages hold no more of K than 6 do
    # (docs/perf-notes.md, item 66); on a long K depth 12 keeps more bytes in flight (item 44).
    # 4 stages of 128-wide k-tiles hold all of 512^3's K: 3.4-3.8 % faster than 6 of 64 at 384^3,
    # 3.1-5.0 % at 512^3 (items 122-123)
    "smallm:n64s": SmallM("smallm:n64s", bn=64, bk=128, depth=4, max_kt=4, variant="n64s"),
    # 64 x 32 at M <= 16 (docs/perf-notes.md item 47): whole tiles on up to 132 CTAs where the
    # wider tiles split K and pay a second pass; then 16 stages of 12 KB. Measured ahead only at
    # K <= 4096 (1 and 16 x 4096 x 4096: 18.3-18.8 us against 19.3-19.6, cuBLAS 19.1-19.3);
    # behind at 4096 x 14336 (43.5-44.0 against 42.8-43.4). K-major B only (an N-major B comes
    # in 64-column blocks). 8 stages of 128-wide k-tiles (the same 192 KB): 3.2-3.8 % faster than
    # 16 of 64 at 1 and 16 x 4096 x 4096 (items 122-123)
    "smallm:n32": SmallM("smallm:n32", bn=32, bk=128, depth=8, max_m=16, variant="n32", b_mn_major=False,
                         one_wave_max_kt=32),
    # 64 x 128 tiles in clusters of two along M sharing (multicasting) each B tile, whole tiles,
    # above 128 rows on B rows that are not whole 32-byte sectors (MULTICAST_NICHE)
    "smallm:n128m2": SmallM("smallm:n128m2", bn=128, depth=8, min_m=129, variant="n128m2", multicast=2),
    "smallm:c2": SmallM("smallm:c2", consumers=2, depth=4, min_m=65, variant="c2", **TWO_CONSUMER_DEAL),
    "smallm:c2n128": SmallM("smallm:c2n128", bn=128, consumers=2, depth=6, min_m=65, variant="c2n128",
                            **TWO_CONSUMER_DEAL),
    # 128 x 64 (cuBLAS runs 64 x 64 tiles at 128 x 4096 x 4096): twice the tiles of c2n128,
    # so narrow outputs fill the SMs with fewer pieces per tile
    "smallm:c2n64": SmallM("smallm:c2n64", bn=64, consumers=2, depth=8, min_m=65, variant="c2n64",
                           **TWO_CONSUMER_DEAL),
    # the two-consumer tiles with their pieces summed in clusters (DSMEM) where the deal splits K
    # evenly, instead of 4-13 workspace planes and a second pass (the long-K narrow rows at
    # M = 128-256, docs/perf-notes.md items 81 and 89). 128 x 64 is a selection candidate: where
    # its cluster deal is chosen (64 CTAs, every cluster resident) it measured 2-10 % ahead of the
    # picks it replaces; 128 x 128 (c2n128d) is an experiment, measured behind n128 and c2n64d
    "smallm:c2n64d": SmallM("smallm:c2n64d", bn=64, consumers=2, depth=8, min_m=65, variant="c2n64d",
                            cluster_reduce=True, **TWO_CONSUMER_DEAL),
    "smallm:c2n128d": SmallM("smallm:c2n128d", bn=128, consumers=2, depth=6, min_m=65, variant="c2n128d",
                             cluster_reduce=True, **TWO_CONSUMER_DEAL),
    # A shared by clusters along N (GL_SHARE_A): each CTA fetches A's rows / share_a + BN per
    # k-tile (c2n64 in fours: 48 rows of 192). Experiments, not selection candidates: cuBLAS runs
    # the long-K rows at M = 128 on 64 x 64 tiles in 4 x 2 clusters sharing both operands, where
    # at 128 x 512 x 16384 our pick trails it by 16-20 % and our fastest probed deal by 7 %
    # (docs/perf-notes.md item 106); to be measured
    "smallm:c2n64a2": SmallM("smallm:c2n64a2", bn=64, consumers=2, depth=8, min_m=65, variant="c2n64a2",
                             share_a=2, **TWO_CONSUMER_DEAL),
    "smallm:c2n64a4": SmallM("smallm:c2n64a4", bn=64, consumers=2, depth=8, min_m=65, variant="c2n64a4",
                             share_a=4, **TWO_CONSUMER_DEAL),
    "smallm:n64a4": SmallM("smallm:n64a4", bn=64, depth=12, variant="n64a4", share_a=4),
    # both operands shared, cuBLAS's shape at 128 x 512 x 16384 and at 640^3 (64 x 64 tiles, 4 x 2
    # clusters): 2 + 4 KB per CTA and k-tile instead of 16; and 2 x 2 (for tile counts like 640^3's 10)
    "smallm:n64a4b2": SmallM("smallm:n64a4b2", bn=64, depth=12, variant="n64a4b2", share_a=4, share_b=2,
                             b_mn_major=False),
    "smallm:n64a2b2": SmallM("smallm:n64a2b2", bn=64, depth=12, variant="n64a2b2", share_a=2, share_b=2,
                             b_mn_major=False),
}


def get_family(key: str = "smallm") -> SmallM:
    try:
        return FAMILIES[key]
    except KeyError:
        raise KeyError(f"unknown small-M configuration {key!r}; known: {', '.join(FAMILIES)}") from None


def with_fields(fam: SmallM, name: str, **fields) -> SmallM:
    """An ad-hoc configuration (e.g. another depth) named `name`, for experiments."""
    return dataclasses.replace(fam, key=f"{fam.key}:{name}", variant=name, **fields)


def k128_twin(fam: SmallM) -> SmallM:
    """`fam` with 128-wide k-tiles (bk 128) in the same ring bytes: half the stages, each covering
    two 64-wide k-tiles under one full barrier and one release, its K limits and L2 prefetch (in
    k-tiles) halved (a lower K limit then holds to within one 64-wide k-tile); `fam` itself if it
    is 128-wide. Its MMAs are the 64-wide form's in the same order (docs/perf-notes.md item 122)."""
    if fam.bk == 128:
        return fam
    return with_fields(fam, "k128", bk=128, depth=fam.depth // 2, max_kt=fam.max_kt // 2, min_kt=fam.min_kt // 2,
                       one_wave_max_kt=fam.one_wave_max_kt // 2, prefetch_kt=-(-fam.prefetch_kt // 2))


def k64_twin(fam: SmallM) -> SmallM:
    """`fam` with 64-wide k-tiles in the same ring bytes (twice the stages, its K limits and L2
    prefetch in k-tiles doubled): the form a 128-wide entry is measured against; `fam` itself if it
    is 64-wide."""
    if fam.bk == 64:
        return fam
    return with_fields(fam, "k64", bk=64, depth=2 * fam.depth, max_kt=2 * fam.max_kt, min_kt=2 * fam.min_kt,
                       one_wave_max_kt=2 * fam.one_wave_max_kt, prefetch_kt=2 * fam.prefetch_kt)


def parse_build(spec: str) -> SmallM:
    """An entry by its key ("smallm:n64", or short: "n64"; "smallm" is the base entry), or, for
    experiments, one with integer or boolean fields changed: "n64+share_b=2+cluster_reduce=0"."""
    base, *changes = spec.split("+")
    base = base.removeprefix("smallm:")
    fam = get_family("smallm" if base in ("smallm", "") else f"smallm:{base}")
    if not changes:
        return fam
    names = {f.name: f.type for f in dataclasses.fields(SmallM)}
    fields = {}
    for change in changes:
        name, _, value = change.partition("=")
        if names.get(name) not in ("int", "bool") or not value.lstrip("-").isdigit():
            raise ValueError(f"{spec!r}: {change!r} is not NAME=INTEGER for an integer or boolean field of SmallM")
        fields[name] = bool(int(value)) if names[name] == "bool" else int(value)
    return with_fields(fam, "+".join(changes), **fields)
