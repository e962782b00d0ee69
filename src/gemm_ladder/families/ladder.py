"""The ladder: every step's `Step` (families/ladder_step.py, the type) by number, and its named
variants. Lookups by key (`get_step`, `parse_steps`) are families/keys.py's, which parses the
keys of every family.
"""
from __future__ import annotations

import dataclasses

from .ladder_step import Step

_TMA_CLAIMS = ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "STSM")
_PREFETCH = ("UTMACCTL.PF",)  # the tensor maps fetched at entry (steps 6 and up: gl_tma.cuh)

STEPS: dict[int, Step] = {
    1: Step(1, "naive", source="ladder/step1_naive.cu", entry="gemm_step1_naive",
            forced_move="- (the baseline)",
            mechanism="one thread per C element, fp32 FMA on CUDA cores, operands from global memory",
            threads=256, style="naive", bm=16, bn=16, bk=1, sass_claims=("FFMA",), sass_absent=("HGMMA",)),
    2: Step(2, "tensor cores", source="ladder/step2_tensor_cores.cu", entry="gemm_step2_tensor_cores",
            forced_move="scalar FMA",
            mechanism="128x128 tile, threads copy k-tiles to SMEM (core-matrix layout, 2-byte loads), synchronous wgmma",
            threads=128, tile_multiple=True, sass_claims=("HGMMA",), sass_absent=("FFMA", "LDG.E.128")),
    3: Step(3, "best thread copy", source="ladder/step3_swizzled_copy.cu", entry="gemm_step3_swizzled_copy",
            forced_move="bank conflicts, narrow loads",
            mechanism="128B-swizzled SMEM, 16-byte vector loads, still thread copies, still serial",
            threads=128, tile_multiple=True, sass_claims=("HGMMA", "LDG.E.128", "STS.128"), sass_absent=("FFMA",)),
    4: Step(4, "TMA async", source="ladder/step4_tma.cu", entry="gemm_step4_tma",
            forced_move="the thread-copy tax",
            mechanism="one thread issues cp.async.bulk.tensor + arrive.expect_tx, try_wait.parity phase bit, TMA-store epilogue",
            threads=128, depth=1, uses_tma=True, sass_claims=_TMA_CLAIMS, sass_absent=("FFMA",)),
    5: Step(5, "software pipeline", source="ladder/step5_pipeline.cu", entry="gemm_step5_pipeline",
            forced_move="load latency on the critical path",
            mechanism="DEPTH-stage SMEM ring, a full barrier per stage, prefetch DEPTH-1 ahead, async wgmma wait_group(1)",
            threads=128, depth=4, has_ring=True, uses_tma=True, sass_claims=_TMA_CLAIMS, sass_absent=("FFMA",)),
    6: Step(6, "persistent", source="ladder/step6_persistent.cu", entry="gemm_step6_persistent",
            forced_move="launch + tail waves, L2 misses",
            mechanism="grid = #SMs, grouped tile scheduler (8 tile-rows), one pipeline across tiles",
            threads=128, depth=4, has_ring=True, uses_tma=True, persistent=True, group_m=8,
            sass_claims=_TMA_CLAIMS + _PREFETCH, sass_absent=("FFMA",)),
    7: Step(7, "warp specialization", source="ladder/step7_warp_specialized.cu", entry="gemm_step7_warp_specialized",
            forced_move="one team doing load, compute and write in turn",
            mechanism="producer warp (TMA), consumer warpgroup (wgmma), writeback warp (TMA store); "
                      "rings tma2mma/mma2tma + mma2ld/ld2mma; PipelineState phases 1/0; consumer named barrier; "
                      "setmaxnreg 40/232",
            threads=256, style="warp-specialized", depth=2, has_ring=True, uses_tma=True, persistent=True,
            group_m=8, sass_claims=_TMA_CLAIMS + _PREFETCH + ("USETMAXREG",), sass_absent=("FFMA",)),
}


STEPS.update({
    8: Step(8, "2-CTA cluster", source="ladder/step8_cluster.cu", entry="gemm_step8_cluster",
            forced_move="each CTA fetching its own copy of B",
            mechanism="cluster of 2 along M: each CTA loads its A and half of B and multicasts the half to "
                      "both; tma2mma expects A + the whole B; mma2tma counts both CTAs' consumer warps "
                      "(remote arrive via mapa); cluster barrier after init and before exit; depth 4; "
                      "tile order in groups of 16 tile rows",
            threads=256, style="warp-specialized", depth=4, has_ring=True, uses_tma=True, persistent=True,
            group_m=16, cluster=(2, 1, 1), sass_claims=_TMA_CLAIMS + _PREFETCH + ("USETMAXREG",),
            sass_absent=("FFMA",)),
    9: Step(9, "two consumers share B", source="ladder/step9_multi_consumer.cu", entry="gemm_step9_multi_consumer",
            forced_move="one consumer can't feed the tensor cores",
            mechanism="three warpgroups: producer/writeback + two consumers, each 64x256 of a 128x256 tile "
                      "(wgmma m64n256k16), sharing each staged B; the 2-CTA cluster multicasts the 256-wide "
                      "B; chunked epilogue: 64-column chunks through a 2-slot ring; setmaxnreg 40/232; "
                      "depth 4; tile order in groups of 16 tile rows",
            threads=384, style="warp-specialized", bn=256, depth=4, has_ring=True, uses_tma=True,
            persistent=True, group_m=16, cluster=(2, 1, 1), consumers=2, epi_stages=2,
            sass_claims=_TMA_CLAIMS + _PREFETCH + ("USETMAXREG", "HGMMA.64x256x16"),
            sass_absent=("FFMA",)),
    10: Step(10, "ping-pong consumers", source="ladder/step10_pingpong.cu", entry="gemm_step10_pingpong",
             forced_move="the epilogue on the tensor core's critical path",
             mechanism="step 9's structure, but each consumer warpgroup owns whole 64x256 tiles and the two "
                       "take turns (an ordered barrier): one writes its tile out while the other runs its "
                       "mainloop; an epilogue ring of two 64x64 chunk slots per consumer; 2-CTA cluster; "
                       "depth 4",
             threads=384, style="warp-specialized", bm=64, bn=256, depth=4, has_ring=True, uses_tma=True,
             persistent=True, group_m=16, cluster=(2, 1, 1), consumers=2, epi_stages=2, pingpong=True,
             sass_claims=_TMA_CLAIMS + _PREFETCH + ("USETMAXREG", "HGMMA.64x256x16"), sass_absent=("FFMA",)),
})

# Steps the pipeline simulator models before any kernel implements them ("model only").
MODELLED_STEPS: dict[int, Step] = {}

# The step the ladder's speed-ups are measured against.
BASELINE = "1"


def variant(step: Step, name: str, **fields) -> Step:
    """`step` with other field values (e.g. depth=4), named `name` (e.g. "d4")."""
    return dataclasses.replace(step, variant=name, **fields)


# Variants shown in the ladder's ablations: the ring's depth (the course's step 7 at depth 2
# was slower than its step 6; the deep ring pays), and each cluster step without its cluster.
VARIANTS: dict[str, Step] = {
    "7:d3": variant(STEPS[7], "d3", depth=3),
    "7:d4": variant(STEPS[7], "d4", depth=4),
    "5:d2": variant(STEPS[5], "d2", depth=2),
    "6:d2": variant(STEPS[6], "d2", depth=2),
    "8:c1": variant(STEPS[8], "c1", cluster=(1, 1, 1)),  # cluster off: no multicast
    "9:c1": variant(STEPS[9], "c1", cluster=(1, 1, 1)),
    "10:c1": variant(STEPS[10], "c1", cluster=(1, 1, 1)),
}
# What `gemm-ladder bench` runs by default: the ladder plus its ablations (ring depth, cluster);
# the bench adds the library's kernel for the size as the table's last row.
DEFAULT_BENCH = "1-10,7:d3,7:d4,8:c1,9:c1"


def all_steps(include_variants: bool = True) -> list[Step]:
    """Every step a kernel implements (and its named variants)."""
    out = list(STEPS.values())
    if include_variants:
        out += list(VARIANTS.values())
    return out
