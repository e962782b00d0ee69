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
    why: str = ""  # what goes wrong in the kernel, and why (one paragraph)
    needs: str = ""  # what the step must have: "pair" (producer + consumer), "shared-empty"
    #                  (an empty barrier several consumers arrive on), "cluster" (2-CTA cluster),
    #                  "borrow" (an epilogue that borrows the drained stage, Step.borrow_stage)
    race: bool = False  # on the GPU the outcome depends on timing: a run may finish correct

    def applies_to(self, step) -> str:
        """Why this what-if cannot run on `step` (a ladder Step); "" if it can."""
        if self.needs == "cluster" and step.cluster_m < 2:
            return f"{self.name} breaks a rule of the 2-CTA cluster; step {step.key} has no cluster"
        if self.needs in ("pair", "shared-empty") and step.style != "warp-specialized":
            return f"{self.name} needs a producer and a consumer; step {step.key} is {step.style}"
        if self.needs == "borrow" and not step.borrow_stage:
            return f"{self.name} breaks a rule of the production kernel's borrowed stage; {step.key} does not borrow"
        return ""


WHAT_IFS: dict[str, WhatIf] = {w.name: w for w in (
    WhatIf("both-phase-0",
           "both PipelineStates of the operand ring start at phase 0 (the producer should start at 1)",
           "7", {"GL_ABLATE_SAME_PHASE": 1},
           "both ends of the operand ring started at phase 0: on a fresh barrier the producer's first wait "
           "(mma2tma, parity 0) blocks like the consumer's (tma2mma, parity 0), and each waits for the "
           "other's first arrival", needs="pair"),
    WhatIf("expect-tx-small",
           "the producer's expect_tx announces fewer bytes than the stage's loads deliver (the B tile is left out)",
           "7", {"GL_ABLATE_EXPECT_TX_DELTA": -1024},
           "expect_tx announced 1 KB less than delivered: the phase completes before the last bytes land, and "
           "the surplus bytes are credited to the next phase, which then can no longer balance", race=True),
    WhatIf("expect-tx-large",
           "the producer's expect_tx announces more bytes than the stage's loads deliver (one B tile too many)",
           "7", {"GL_ABLATE_EXPECT_TX_DELTA": 1024},
           "expect_tx announced 1 KB more than the copy engine delivers, so the stage's tx-count never "
           "returns to zero and tma2mma never completes its phase"),
    WhatIf("init-count-high",
           "the empty barrier's init count is one more than the arrivals per phase (full barrier for lockstep steps)",
           "7"),
    WhatIf("init-count-low",
           "the empty barrier mma2tma's init count is one less than the consumer arrivals per phase",
           "8", needs="shared-empty"),
    WhatIf("depth-1",
           "a one-stage ring: the load of k-tile k+1 cannot overlap the wgmma of k-tile k",
           "7"),
    # The course's step-8 exercises, on the Hopper cluster (multicast instead of cta_group::2).
    WhatIf("local-empty",
           "2-CTA cluster: the empty barrier mma2tma counts and hears only this CTA's consumer warps "
           "(the course's CTA_GROUP left out of the init count)",
           "8", {"GL_ABLATE_LOCAL_EMPTY": 1, "GL_ABLATE_SKEW_NS": 4000},
           "each producer multicasts its half of B into both CTAs' stage, but with mma2tma counting only "
           "its own CTA's consumer warps it refills a stage as soon as its own consumer is done with it; "
           "nothing waits for the peer CTA's consumer, which may still be reading the old contents of that "
           "stage. When the two CTAs drift apart the refill overwrites operands in use (wrong results), "
           "and a multicast that lands while the peer's full barrier is still in an earlier phase skews "
           "that barrier's transaction count (a possible hang). Whether a run is hit depends on timing, so "
           "the GPU run slows the rank-1 consumer by 4 us per k-tile (GL_ABLATE_SKEW_NS) to make the CTAs drift.",
           needs="cluster", race=True),
    WhatIf("local-tx",
           "2-CTA cluster: each CTA's expect_tx announces only the bytes its own producer issues (A + its B "
           "half), not the peer's multicast half (the course's expect_tx x CTA_GROUP left out)",
           # the peer's half of B: BN / 2 rows of BK elements, 2 bytes each (step 8: 64 x 64 x 2)
           "8", {"GL_ABLATE_EXPECT_TX_DELTA": -8192},
           "a CTA's stage receives its A, its own half of B and the peer's half of B, but tma2mma expects "
           "only A and one half (24 KB of 32 KB): the phase completes when the first 24 KB have landed, so "
           "the consumer may read a B half that is still in flight, and the last 8 KB count against the "
           "next phase of that barrier, which then completes early too - or, once the byte counts drift "
           "apart, never (a hang caught by the bounded waits).",
           needs="cluster", race=True),
    WhatIf("no-exit-sync",
           "2-CTA cluster: no cluster barrier before exit (the course's cluster_sync replaced by nothing)",
           "8", {"GL_ABLATE_NO_EXIT_SYNC": 1, "GL_ABLATE_SKEW_NS": 4000},
           "each consumer releases every stage to both CTAs' empty barriers, so the last releases of a "
           "tile arrive remotely on the peer's shared memory, and nobody waits for them: a CTA that "
           "finishes first may exit while its peer still arrives on its barriers (or, with another order "
           "of work, multicasts into it). An arrival on the shared memory of an exited CTA is undefined: "
           "a CUDA error when the hardware catches it, silent success when the timing is lucky (the GPU run "
           "slows the rank-1 consumer by 4 us per k-tile, so rank 0 finishes first).",
           needs="cluster", race=True),
    # The production kernel's borrowed stage (docs/perf-notes.md item 62). Model only: on the GPU the same
    # mistake (GL_ABLATE_BORROW_NO_SYNC) gave a wrong result in 1 of 30 runs at 6144^3, too rare
    # for a what-if that must end in an error within seconds.
    WhatIf("borrow-no-sync",
           "the production kernel's borrowed stage: a consumer stages its chunks into the stage's B part "
           "without waiting for the other consumer, whose last wgmma may still read that B tile",
           "gemm:128x256c2", needs="borrow"),
)}


def gpu_what_ifs() -> list[str]:
    """The what-ifs a debug build of the kernel can run on the GPU."""
    return [name for name, w in WHAT_IFS.items() if w.ablation]


def get_what_if(name: str) -> WhatIf:
    if name not in WHAT_IFS:
        raise ValueError(f"unknown what-if {name!r}; choose from {', '.join(WHAT_IFS)}")
    return WHAT_IFS[name]
