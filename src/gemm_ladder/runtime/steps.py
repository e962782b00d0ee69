"""The ladder: one descriptor per step, and the code that validates inputs and launches it.

Each step is a kernel file under kernels/ plus a `Step` here: the forced move it makes,
its compile-time configuration, launch geometry and shape constraints. Variants (e.g. a
deeper ring) are the same step with other compile-time defines.
"""
from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Callable

from . import jit

# SASS instruction classes (prefixes of opcodes in `cuobjdump --dump-sass`) and what they mean.
SASS_MEANING = {
    "HGMMA": "wgmma (warpgroup tensor-core MMA)",
    "HMMA": "mma.sync (warp tensor-core MMA)",
    "FFMA": "fp32 fused multiply-add (CUDA cores)",
    "UTMALDG": "TMA tensor load (cp.async.bulk.tensor global->shared)",
    "UTMASTG": "TMA tensor store (cp.async.bulk.tensor shared->global)",
    "UTMACMDFLUSH": "TMA bulk-group commit",
    "SYNCS": "mbarrier operations (arrive / expect_tx / try_wait)",
    "USETMAXREG": "setmaxnreg (register hand-over between warpgroups)",
    "STSM": "stmatrix (registers -> shared, 8x8 matrices)",
    "LDG.E.128": "16-byte global loads",
    "STS.128": "16-byte shared stores",
    "BAR": "CTA / named barriers",
}


class ShapeError(ValueError):
    """The inputs are valid matrices, but this step cannot take their shape or layout."""


@dataclass(frozen=True)
class Step:
    number: int
    name: str
    source: str  # file under kernels/
    entry: str  # kernel entry point
    forced_move: str  # what it removes
    mechanism: str  # how, on Hopper
    threads: int
    bm: int = 128
    bn: int = 128
    bk: int = 64
    stages: int = 0  # shared-memory operand buffers (0: static, thread-copied)
    barriers: int = 0  # mbarriers in shared memory
    uses_tma: bool = False
    persistent: bool = False
    tile_multiple: bool = False  # M, N, K must be multiples of the tile
    defines: dict = field(default_factory=dict)  # compile-time configuration
    sass_claims: tuple[str, ...] = ()  # instruction classes the SASS must hold
    variant: str = ""  # "" for the step's default configuration, e.g. "d4"
    ctas_per_sm: int = 1  # persistent grid = SMs x this (experiments: >1 oversubscribes)

    @property
    def key(self) -> str:
        return f"{self.number}" + (f":{self.variant}" if self.variant else "")

    @property
    def label(self) -> str:
        return f"{self.number} {self.name}" + (f" ({self.variant})" if self.variant else "")

    @property
    def dynamic_smem(self) -> int:
        """Bytes of dynamic shared memory: operand ring + C staging + barriers + 1 KB
        so the kernel can align its tiles to 1024 bytes."""
        if not self.uses_tma:
            return 0
        ring = max(1, self.stages) * (self.bm + self.bn) * self.bk * 2
        return 1024 + ring + self.bm * self.bn * 2 + 8 * self.barriers

    def with_defines(self, variant: str, **defines) -> "Step":
        new = dict(self.defines)
        new.update(defines)
        stages = int(new.get("GL_DEPTH", self.stages))
        barriers = self.barriers
        if "GL_DEPTH" in defines and self.barriers:
            per_stage = self.barriers_per_stage
            barriers = self.barriers - per_stage * self.stages + per_stage * stages
        return dataclasses.replace(self, defines=new, stages=stages, barriers=barriers, variant=variant)

    @property
    def barriers_per_stage(self) -> int:
        return 2 if self.number >= 7 else 1

    def compile(self, *, bf16: bool = False, extra_defines: dict | None = None,
                use_cache: bool = True, strict: bool = True) -> jit.CompiledKernel:
        d = dict(self.defines)
        if bf16:
            d["GL_BF16"] = 1
        d.update(extra_defines or {})
        return jit.compile_kernel(self.source, self.entry, d, use_cache=use_cache, strict=strict)

    # -- shapes -----------------------------------------------------------------------------
    def shape_problems(self, M: int, N: int, K: int) -> list[str]:
        """Why this step cannot take (M, N, K); empty if it can."""
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

    def accepts(self, M: int, N: int, K: int) -> bool:
        return not self.shape_problems(M, N, K)

    def grid(self, M: int, N: int, num_sms: int) -> tuple[int, int, int]:
        if self.number == 1:
            return (-(-N // 16), -(-M // 16), 1)
        tiles_m, tiles_n = -(-M // self.bm), -(-N // self.bn)
        if self.persistent:
            return (min(num_sms * self.ctas_per_sm, tiles_m * tiles_n), 1, 1)
        return (tiles_n, tiles_m, 1)

    def smem_ai(self) -> float:
        """FLOP per byte loaded into shared memory per k-tile (operand reuse of the tile);
        steps 1 (no tile) report the naive 2 FLOP per 4 bytes."""
        if self.number == 1:
            return 0.5
        return 2 * self.bm * self.bn * self.bk / ((self.bm + self.bn) * self.bk * 2)


_TMA_CLAIMS = ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "STSM")

STEPS: dict[int, Step] = {
    1: Step(1, "naive", "step1_naive.cu", "gemm_step1_naive",
            forced_move="- (the baseline)",
            mechanism="one thread per C element, fp32 FMA on CUDA cores, operands from global memory",
            threads=256, bm=16, bn=16, bk=1, sass_claims=("FFMA",)),
    2: Step(2, "tensor cores", "step2_tensor_cores.cu", "gemm_step2_tensor_cores",
            forced_move="scalar FMA",
            mechanism="128x128 tile, threads copy k-tiles to SMEM (core-matrix layout, 2-byte loads), synchronous wgmma",
            threads=128, tile_multiple=True, sass_claims=("HGMMA",)),
    3: Step(3, "best thread copy", "step3_swizzled_copy.cu", "gemm_step3_swizzled_copy",
            forced_move="bank conflicts, narrow loads",
            mechanism="128B-swizzled SMEM, 16-byte vector loads, still thread copies, still serial",
            threads=128, tile_multiple=True, sass_claims=("HGMMA", "LDG.E.128", "STS.128")),
    4: Step(4, "TMA async", "step4_tma.cu", "gemm_step4_tma",
            forced_move="the thread-copy tax",
            mechanism="one thread issues cp.async.bulk.tensor + arrive.expect_tx, try_wait.parity phase bit, TMA-store epilogue",
            threads=128, stages=1, barriers=1, uses_tma=True, sass_claims=_TMA_CLAIMS),
    5: Step(5, "software pipeline", "step5_pipeline.cu", "gemm_step5_pipeline",
            forced_move="load latency on the critical path",
            mechanism="DEPTH-stage SMEM ring, a full barrier per stage, prefetch DEPTH-1 ahead, async wgmma wait_group(1)",
            threads=128, stages=4, barriers=4, uses_tma=True, defines={"GL_DEPTH": 4},
            sass_claims=_TMA_CLAIMS),
    6: Step(6, "persistent", "step6_persistent.cu", "gemm_step6_persistent",
            forced_move="launch + tail waves, L2 misses",
            mechanism="grid = #SMs, grouped tile scheduler (8 tile-rows), one pipeline across tiles",
            threads=128, stages=4, barriers=4, uses_tma=True, persistent=True,
            defines={"GL_DEPTH": 4, "GL_GROUP_M": 8}, sass_claims=_TMA_CLAIMS),
    7: Step(7, "warp specialization", "step7_warp_specialized.cu", "gemm_step7_warp_specialized",
            forced_move="one team doing load, compute and write in turn",
            mechanism="producer warp (TMA), consumer warpgroup (wgmma), writeback warp (TMA store); "
                      "rings tma2mma/mma2tma + mma2ld/ld2mma; PipelineState phases 1/0; consumer named barrier; "
                      "setmaxnreg 40/232",
            threads=256, stages=2, barriers=2 * 2 + 2, uses_tma=True, persistent=True,
            defines={"GL_DEPTH": 2, "GL_GROUP_M": 8}, sass_claims=_TMA_CLAIMS + ("USETMAXREG",)),
}

# Variants shown in the ladder's ablations.
VARIANTS: dict[str, Step] = {
    "7:d3": STEPS[7].with_defines("d3", GL_DEPTH=3),
    "7:d4": STEPS[7].with_defines("d4", GL_DEPTH=4),
    "5:d2": STEPS[5].with_defines("d2", GL_DEPTH=2),
    "6:d2": STEPS[6].with_defines("d2", GL_DEPTH=2),
}
# What `gemm-ladder bench` runs by default: the ladder plus step 7's depth ablation.
DEFAULT_BENCH = "1-7,7:d3,7:d4"


def all_steps(include_variants: bool = True) -> list[Step]:
    out = list(STEPS.values())
    if include_variants:
        out += list(VARIANTS.values())
    return out


_VARIANT_TOKENS = {"d": "GL_DEPTH", "g": "GL_GROUP_M"}


def get_step(key) -> Step:
    """'7', 7, '7:d4' -> Step. Ad-hoc variants of pipelined steps: 'N:d<depth>g<group>',
    e.g. '6:d6' or '6:g1' (tokens in any order)."""
    k = str(key).strip()
    if k.isdigit() and int(k) in STEPS:
        return STEPS[int(k)]
    if k in VARIANTS:
        return VARIANTS[k]
    m = re.fullmatch(r"(\d+):((?:[dgw]\d+)+)", k)
    if m and int(m.group(1)) in STEPS:
        base = STEPS[int(m.group(1))]
        tokens = re.findall(r"([dgw])(\d+)", m.group(2))
        defines = {_VARIANT_TOKENS[t]: int(v) for t, v in tokens if t != "w"}
        waves = [int(v) for t, v in tokens if t == "w"]
        if all(d in base.defines for d in defines) and (not waves or base.persistent):
            st = base.with_defines(m.group(2), **defines)
            return dataclasses.replace(st, ctas_per_sm=waves[0]) if waves else st
    known = ", ".join([str(n) for n in STEPS] + list(VARIANTS))
    raise KeyError(f"unknown step {key!r}; known: {known} (or N:d<depth>g<group> for steps 5-7)")


def parse_steps(spec: str) -> list[Step]:
    """'1-7,7:d4' -> steps."""
    out: list[Step] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        if "-" in part and ":" not in part:
            lo, hi = (int(x) for x in part.split("-"))
            out += [get_step(n) for n in range(lo, hi + 1)]
        elif part == "all":
            out += all_steps()
        else:
            out.append(get_step(part))
    return out
