"""The course's what-ifs: one table for the simulator, the GPU runs and the command line.

Each what-if breaks one rule of the mbarrier choreography. The simulator models every one
(`gemm-ladder simulate --what-if NAME`); those with an `ablation` also run for real as a
debug build of the kernel with bounded waits (`gemm-ladder deadlock --what-if NAME`).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class WhatIf:
    name: str
    text: str  # what is changed
    default_step: str  # the step it is shown on (a registry key)
    ablation: dict = field(default_factory=dict)  # kernel defines of the GPU run ({}: model only)
    why: str = ""  # what goes wrong in the kernel when it runs on the GPU


WHAT_IFS: dict[str, WhatIf] = {w.name: w for w in (
    WhatIf("both-phase-0",
           "both PipelineStates of the operand ring start at phase 0 (the producer should start at 1)",
           "7", {"GL_ABLATE_SAME_PHASE": 1},
           "both ends of the operand ring started at phase 0: on a fresh barrier the producer's first wait "
           "(mma2tma, parity 0) blocks like the consumer's (tma2mma, parity 0), and each waits for the "
           "other's first arrival"),
    WhatIf("expect-tx-small",
           "the producer's expect_tx announces fewer bytes than the stage's loads deliver (the B tile is left out)",
           "7", {"GL_ABLATE_EXPECT_TX_DELTA": -1024},
           "expect_tx announced 1 KB less than delivered: the phase completes before the last bytes land, and "
           "the surplus bytes are credited to the next phase, which then can no longer balance"),
    WhatIf("expect-tx-large",
           "the producer's expect_tx announces more bytes than the stage's loads deliver (one B tile too many)",
           "7", {"GL_ABLATE_EXPECT_TX_DELTA": 1024},
           "expect_tx announced 1 KB more than the copy engine delivers, so the stage's tx-count never "
           "returns to zero and tma2mma never completes its phase"),
    WhatIf("init-count-high",
           "the empty barrier's init count is one more than the arrivals per phase (full barrier for lockstep steps)",
           "7"),
    WhatIf("init-count-low",
           "the empty barrier mma2tma's init count is one less than the consumers that arrive per phase",
           "8"),
    WhatIf("depth-1",
           "a one-stage ring: the load of k-tile k+1 cannot overlap the wgmma of k-tile k",
           "7"),
)}


def gpu_what_ifs() -> list[str]:
    """The what-ifs a debug build of the kernel can run on the GPU."""
    return [name for name, w in WHAT_IFS.items() if w.ablation]


def get_what_if(name: str) -> WhatIf:
    if name not in WHAT_IFS:
        raise ValueError(f"unknown what-if {name!r}; choose from {', '.join(WHAT_IFS)}")
    return WHAT_IFS[name]
