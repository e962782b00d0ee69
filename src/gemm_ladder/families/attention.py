"""The attention family: Part IV of the ladder, O = softmax(scale * Q K^T) V per (batch, head),
forward, fp16/bf16, head dims 64/128/256, GQA, causal (top-left, as torch's SDPA) or not.

Its steps are fused kernels under kernels/attention/, each one forced move past the last
(docs/attention.md): A2 fuses the two MMAs around an online softmax (one warpgroup, a lockstep
K/V ring); A3 specializes warps (a producer, two consumer warpgroups, K and V in their own
rings); A4 orders the two consumers' MMAs with a ping-pong barrier so one's softmax runs under
the other's MMAs; A5 issues the next block's Q K^T before this block's softmax. A1, the
baseline (S through the library's GEMM, the softmax in torch), has no kernel of its own: it
lives in the library (library/attention_a1.py).

A step owns its configuration and its launch: the defines (from the step and the call's head
dim, causality and dtype), the tensor maps ((D, S, H, B) 4-D maps over the tensors' own
strides) and the grid. library/attention_runner.py chooses a step and launches it.
"""
from __future__ import annotations

import ctypes
import dataclasses
from dataclasses import dataclass

from ..cuda import driver, jit
from ..cuda.device import H200
from .common import ConfigError, build
from .protocol import Facts, KernelFamily, KMajorOnly

FAMILY = "attention"
HEAD_DIMS = (64, 128, 256)
WG_ROWS = 64  # query rows per consumer warpgroup (wgmma's M)
MAX_TILES = 2**31 - 1  # the kernels count tiles (and the grid's x) in 32-bit ints
MAP_COLS = 64  # head-dim elements per TMA box: one 128-byte swizzle row
_CLAIMS = ("HGMMA", "UTMALDG.4D", "SYNCS", "MUFU.EX2")


@dataclass(frozen=True)
class AttnStep(KMajorOnly, KernelFamily):
    name: str  # "A2" .. "A5"
    label: str
    source: str  # under kernels/
    entry: str
    consumers: int  # consumer warpgroups, 64 query rows each
    producer: bool  # a producer warpgroup of its own (warp specialization)
    blocks: tuple[tuple[int, int], ...]  # (head dim, keys per block): the head dims it takes
    depth: int = 2  # K/V blocks in flight
    persistent: bool = False  # a CTA per SM walking the tiles (the warp-specialized kernels take either grid)
    dynamic: bool = False  # persistent, each CTA's next tile from a counter (longest first across a section of heads)
    head_dim: int = 128  # the build's head dim (for_head_dim)

    kmajor_only_why = "attention reads Q, K and V with the head dim contiguous only"

    @property
    def key(self) -> str:
        return self.name

    @property
    def bm(self) -> int:
        return WG_ROWS * self.consumers

    @property
    def bn(self) -> int:
        return dict(self.blocks)[self.head_dim]

    @property
    def threads(self) -> int:
        return 128 * (self.consumers + int(self.producer))

    @property
    def claims(self) -> tuple[str, ...]:
        return _CLAIMS + (("USETMAXREG",) if self.producer else ())

    def for_head_dim(self, d: int) -> "AttnStep":
        if d not in dict(self.blocks):
            raise ConfigError(f"{self.key}: head dim {d} is not supported (supported: "
                              f"{', '.join(str(h) for h, _ in self.blocks)})")
        return dataclasses.replace(self, head_dim=d)

    # -- shared memory -------------------------------------------------------------------------
    @property
    def dynamic_smem(self) -> int:
        """The query tile, DEPTH blocks of K and of V (2 bytes per element), 2 KB for the
        barriers (each storage level padded to the tiles' 1024-byte alignment), and 1 KB to
        align the start."""
        tiles = 2 * self.head_dim * (self.bm + 2 * self.depth * self.bn)
        return 1024 + tiles + 2048

    @property
    def report_key(self) -> str:
        """The key with the build's head dim (the compile report lists every build)."""
        return f"{self.key}/d{self.head_dim}"

    def smem_problem(self, static_smem: int = 0) -> str:
        total = self.dynamic_smem + static_smem
        if total <= H200.smem_per_block:
            return ""
        return f"needs {total:,} bytes of shared memory, over the {H200.smem_per_block:,}-byte limit"

    # -- the protocol --------------------------------------------------------------------------
    def facts(self) -> Facts:
        return Facts(bm=self.bm, bn=self.bn, bk=self.head_dim, cluster_m=1, consumers=self.consumers,
                     persistent=self.persistent, ctas_per_sm=1)

    def kernel_defines(self) -> dict[str, int]:
        d = {"GL_ATTN_D": self.head_dim, "GL_ATTN_BN": self.bn, "GL_ATTN_DEPTH": self.depth,
             "GL_DYNAMIC_SMEM": self.dynamic_smem}
        if self.producer:
            d["GL_ATTN_CONSUMERS"] = self.consumers
            d["GL_ATTN_DYNAMIC"] = int(self.dynamic)
        return d

    def compile(self, *, bf16: bool = False, extra_defines: dict | None = None, use_cache: bool = True,
                strict: bool = True, causal: bool = False) -> jit.CompiledKernel:
        return build(self.source, self.entry, {**self.kernel_defines(), "GL_ATTN_CAUSAL": int(causal)}, bf16=bf16,
                     extra_defines=extra_defines, use_cache=use_cache, strict=strict)

    def shape_problems(self, M: int, N: int, K: int, *, b_mn: bool = False) -> list[str]:
        """(M, N, K) = (query length, key length, head dim)."""
        p = []
        if M < 1 or N < 1:
            p.append(f"query and key lengths must be >= 1 (got {M}, {N})")
        if K not in dict(self.blocks):
            p.append(f"head dim {K} is not supported (supported: {', '.join(str(h) for h, _ in self.blocks)})")
        if b_mn:
            p.append("K and V are read with the head dim contiguous")
        return p

    # -- the launch ----------------------------------------------------------------------------
    def tiles(self, Sq: int, Hq: int, B: int) -> int:
        """bm query rows of one (head, batch) each (kernels/attention/attn_common.cuh's order)."""
        return -(-Sq // self.bm) * Hq * B

    def grid(self, Sq: int, Hq: int, B: int, num_sms: int = H200.sms) -> tuple[int, int, int]:
        """A CTA per tile, or (persistent) one per SM, no more than the tiles."""
        tiles = self.tiles(Sq, Hq, B)
        return (min(tiles, num_sms) if self.persistent else tiles, 1, 1)

    def map_specs(self, q_shape, q_strides, kv_shape, k_strides, v_strides) -> tuple[tuple, tuple, tuple]:
        """(shape, element strides, box), outermost first, of the 4-D maps over Q (B, Hq, Sq, D),
        K and V (B, Hkv, Sk, D): a consumer's 64 query rows, a block's bn key rows, and one
        128-byte chunk of the head dim per box."""
        return ((tuple(q_shape), tuple(q_strides), (1, 1, WG_ROWS, MAP_COLS)),
                (tuple(kv_shape), tuple(k_strides), (1, 1, self.bn, MAP_COLS)),
                (tuple(kv_shape), tuple(v_strides), (1, 1, self.bn, MAP_COLS)))

    def kernel_args(self, maps, out_ptr: int, lse_ptr: int, Sq: int, Sk: int, Hq: int, group: int, tiles: int,
                    scale: float, counter_ptr: int = 0, section: int = 1) -> list:
        """The three maps, the output and log-sum-exp pointers (lse 0: not written), the lengths,
        the query heads per K/V head, the tile count, and the scale times log2(e) (the kernel's
        exp2); the warp-specialized steps also take the walk: a zeroed int32 tile counter (0: the
        fixed walk) and the (batch, head) pairs per section of attn_tile's order."""
        args = [*maps, ctypes.c_uint64(out_ptr), ctypes.c_uint64(lse_ptr), Sq, Sk, Hq, group, tiles,
                ctypes.c_float(scale * 1.4426950408889634)]
        return args + [ctypes.c_uint64(counter_ptr), section] if self.producer else args

    def section(self, Sk: int, group: int, pairs: int, l2_bytes: int = H200.l2_bytes) -> int:
        """The dynamic walk's (batch, head) pairs per section: at most as many as keep their K
        and V in half the L2 (a GQA group's query heads share one K/V head), and a divisor of
        the pairs, so every section holds as many (a short last section starts its longest tiles
        late: 16 heads in sections of 3, 3, 3, 3, 3, 1 ran 4-12 % slower than in sections of 2,
        docs/perf-notes.md item 93); at least one. 1 (each head's query blocks in turn) for the
        fixed walk."""
        if not self.dynamic:
            return 1
        kv_bytes = 2 * Sk * self.head_dim * 2 / group
        most = max(1, min(pairs, int(l2_bytes // 2 // kv_bytes)))
        return next(d for d in range(most, 0, -1) if pairs % d == 0)


def make_maps(specs, ptrs, element: str, make_map=None) -> tuple:
    make_map = make_map or driver.StridedTensorMap
    return tuple(make_map(p, shape, strides, box, element=element) for p, (shape, strides, box) in zip(ptrs, specs))


_BLOCKS_64 = ((64, 64), (128, 64), (256, 64))  # one warpgroup: small key blocks, two CTAs per SM below D = 256
_BLOCKS_WS = ((64, 128), (128, 128), (256, 64))  # two consumers: O (64 x D) and S (64 x bn) share 240 registers

STEPS: dict[str, AttnStep] = {s.key: s for s in (
    AttnStep("A2", "A2: fused, online softmax (one warpgroup, lockstep K/V ring)", "attention/attn_a2_fused.cu",
             "attn_a2_fused", consumers=1, producer=False, blocks=_BLOCKS_64),
    AttnStep("A3", "A3: warp specialization (producer warp, two consumers, K and V rings)",
             "attention/attn_a3_warp_specialized.cu", "attn_a3_warp_specialized", consumers=2, producer=True,
             blocks=_BLOCKS_WS),
    AttnStep("A4", "A4: ping-pong (the consumers take turns issuing MMAs)", "attention/attn_a4_pingpong.cu",
             "attn_a4_pingpong", consumers=2, producer=True, blocks=_BLOCKS_WS),
    AttnStep("A5", "A5: intra-warpgroup pipelining (softmax of block j+1 under P V of block j)",
             "attention/attn_a5_intra_overlap.cu", "attn_a5_intra_overlap", consumers=2, producer=True,
             blocks=_BLOCKS_WS),
)}
# The library's builds beside the ladder's: A5 with three consumers (192 query rows per CTA)
# at head dim 64, where one block's MMAs are short and a third warpgroup's softmax fills them.
# Persistent (":p"): a CTA per SM walks the tiles, the next tile's loads under the last one's end.
LIBRARY: dict[str, AttnStep] = {s.key: s for s in (
    dataclasses.replace(STEPS["A5"], name="A5:c3", label="A5 with three consumer warpgroups", consumers=3,
                        blocks=((64, 128),)),
    dataclasses.replace(STEPS["A5"], name="A5:p", label="A5, persistent", persistent=True),
    dataclasses.replace(STEPS["A5"], name="A5:c3p", label="A5 with three consumer warpgroups, persistent",
                        consumers=3, blocks=((64, 128),), persistent=True),
    dataclasses.replace(STEPS["A5"], name="A5:d", label="A5, persistent, tiles from a counter", persistent=True,
                        dynamic=True),
    dataclasses.replace(STEPS["A5"], name="A5:c3d", label="A5 with three consumer warpgroups, persistent, tiles "
                        "from a counter", consumers=3, blocks=((64, 128),), persistent=True, dynamic=True),
)}


def get(key: str, head_dim: int | None = None) -> AttnStep:
    builds = {**STEPS, **LIBRARY}
    if key not in builds:
        raise KeyError(f"no attention step {key!r}; known: A1, {', '.join(builds)}")
    st = builds[key]
    return st.for_head_dim(head_dim) if head_dim is not None else st


def all_builds() -> list[AttnStep]:
    """Every step at every head dim it takes (the compile report, the CPU checks)."""
    return [st.for_head_dim(d) for st in (*STEPS.values(), *LIBRARY.values()) for d, _ in st.blocks]


def choose(Sq: int, Sk: int, head_dim: int, causal: bool) -> AttnStep:
    """The library's build for a call, from the H200's measurements (docs/attention.md): A5, with
    three consumers at head dim 64. Non-causal: persistent, on the fixed walk. Causal: tiles
    differ in length, and a fixed walk drifts apart across heads and loses the L2 reuse of K and
    V (638 -> 414 TFLOP/s at head dim 128, S = 16k); the walk on a counter, each next tile taken
    once the current one's loads are issued, in sections that divide the heads evenly, is ahead
    of the grid of every tile at every head dim up to 8k keys and level or ahead at 16k (three
    consumers at head dim 64 from 2k keys, two below; docs/perf-notes.md items 91 and 93)."""
    if not causal:
        return get("A5:c3p" if head_dim == 64 else "A5:p", head_dim)
    return get("A5:c3d" if head_dim == 64 and Sk > 1024 else "A5:d", head_dim)
