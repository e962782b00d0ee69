"""The library's production GEMM family (kernels/gemm/): the ladder's warp-specialized
structure with every tuning the library needs and the lesson does not.

Two kernels, one per consumer layout:
- `gemm_two_consumers.cu` (CUTLASS's "cooperative"): ladder step 9's three warpgroups and
  chunked epilogue, with tile widths 104-256 (a narrower last chunk where the width is not a
  multiple of 64), stream-K for a ragged last wave, MN-major operands read in place, the
  borrowed stage and early loads;
- `gemm_one_consumer.cu`: ladder step 8's one consumer on 128 x 128 tiles, with early loads.

An entry is a `Step` (the ladder's type: its facts and everything derived from them) keyed
`gemm:<tile>` instead of by a step number: the shared machinery (runner, hot path, compile
report, cost model) reads both the same way. The selection's candidates are these entries and
the small-M family's (library/select.py).
"""
from __future__ import annotations

from dataclasses import dataclass

from .ladder_step import Step

FAMILY = "gemm"
_CLAIMS = ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS", "STSM", "UTMACCTL.PF", "USETMAXREG")


@dataclass(frozen=True)
class GemmEntry(Step):
    """A production entry: a Step's facts, keyed by the family and the entry's name."""

    @property
    def key(self) -> str:
        return f"{FAMILY}:{self.variant}"

    @property
    def label(self) -> str:
        return f"{self.key} ({self.name})"


def _two_consumers(name: str, bn: int = 256, cluster: tuple[int, int, int] = (1, 1, 1), **fields) -> GemmEntry:
    return GemmEntry(
        0, "two consumers" + (", 2-CTA cluster" if cluster[0] > 1 else "") + (", stream-K" if fields.get("stream_k")
                                                                              else ""),
        source="gemm/gemm_two_consumers.cu", entry="gemm_two_consumers",
        forced_move="(the library's kernel: ladder step 9 with the library's tunings)",
        mechanism=f"two consumer warpgroups of 64 x {bn} sharing each staged B; chunked epilogue, the first "
                  "chunks in the operand stage the last k-tile drained; M-/N-major operands in place; early "
                  "loads without a cluster; stream-K where a last wave is ragged",
        threads=384, style="warp-specialized", bn=bn, depth=4, has_ring=True, uses_tma=True, persistent=True,
        group_m=16, cluster=cluster, consumers=2, epi_stages=2, mn_major=True,
        stream_k=fields.pop("stream_k", False), borrow_stage=fields.pop("borrow_stage", True), early_loads=True,
        variant=name, sass_claims=_CLAIMS + (f"HGMMA.64x{bn}x16",), sass_absent=("FFMA",), **fields)


ENTRIES: dict[str, GemmEntry] = {e.key: e for e in (
    # 256 wide; the 2-CTA cluster multicasting B where B's rows are not whole 32-byte sectors
    # (each CTA fetches half of them: docs/perf-notes.md item 32)
    _two_consumers("128x256"),
    _two_consumers("128x256c2", cluster=(2, 1, 1)),
    # 224, 232 and 240 wide: near 256's intensity, for shapes whose waves they fill better
    # (3000 x 5000: 528 tiles of 128 x 232 are four full waves of 132 CTAs; 128 x 192 needs five)
    *(_two_consumers(f"128x{bn}", bn) for bn in (240, 232, 224)),
    # 192 wide for shapes whose 256-wide tiles leave a ragged last wave; 176 where 192 leaves one
    # and 176 fills it (512 x 11008: 252 tiles, two full waves); 168 measured, not a candidate
    # (perf-notes item 60: it lost where the model promised it most)
    *(_two_consumers(f"128x{bn}", bn) for bn in (192, 176, 168)),
    # 144 and 104 wide, experiments (not candidates, not yet measured): 1536³ is 12 x 11 = 132 tiles
    # of 128 x 144, one full wave, where 176 makes 108 (cuBLAS runs 144 x 128 tiles there); 1280³ is
    # 10 x 13 = 130 of 128 x 104, where smallm:c2n128 makes 100 (cuBLAS: 112 x 128) (perf-notes item 107)
    _two_consumers("128x144", 144),
    _two_consumers("128x104", 104),
    # stream-K: the ragged last wave's tiles split along K over every CTA, summed in the kernel
    _two_consumers("128x256sk", stream_k=True, borrow_stage=False),
    GemmEntry(0, "one consumer", source="gemm/gemm_one_consumer.cu", entry="gemm_one_consumer",
              forced_move="(the library's kernel: ladder step 8 without the cluster, with early loads)",
              mechanism="one consumer warpgroup on 128 x 128 tiles (two m64n128 halves), producer and writeback "
                        "warps, depth 5, early loads, tile order in groups of 16 tile rows",
              threads=256, style="warp-specialized", depth=5, has_ring=True, uses_tma=True, persistent=True,
              group_m=16, early_loads=True, variant="128x128", sass_claims=_CLAIMS, sass_absent=("FFMA",)),
)}


def all_entries() -> list[GemmEntry]:
    return list(ENTRIES.values())
