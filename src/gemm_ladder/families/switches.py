"""Every build switch of the kernels, by name: what it changes and where it acts.

Their defaults live in one header, kernels/common/gl_ablations.cuh; a CPU test holds this
table and that header to each other (tests/test_kernel_layout.py). A normal build sets none
of them. The what-ifs (choreography/whatifs.py) and the measurements in docs/perf-notes.md
set them through a build's extra defines.
"""
from __future__ import annotations

SWITCHES: dict[str, str] = {
    # build variants
    "GL_BF16": "A, B and C in bf16 instead of fp16",
    "GL_A_MN": "A read M-major (a row-major (K, M) matrix), by the kernels that take it",
    "GL_B_MN": "B read N-major (a row-major (K, N) matrix), by the kernels that take it",
    "GL_FP8_A_E5M2": "the fp8 family's A in e5m2 instead of e4m3",
    "GL_FP8_B_E5M2": "the fp8 family's B in e5m2 instead of e4m3",
    "GL_FP8_OVERLAP_KT": "the fp8 family's promotion through two partials: k-tile kt + 1's MMAs in flight while kt's "
                         "partial is promoted (one piece per k-tile)",
    "GL_FP8_OVERLAP_PIECES": "the fp8 family's promotion through two partials in turn over a k-tile's column pieces: "
                             "the next piece's MMAs (the next k-tile's first) in flight while one is promoted",
    "GL_FP8_LATE_SCALES": "the fp8 family reads the next k-tile's block scales under this k-tile's MMAs, from "
                          "pointers set once per tile",
    "GL_FP8_SCALE_ROWS": "the fp8 family reads the next k-tile's block scales a k-tile ahead, before the MMAs, from "
                         "pointers set once per tile",
    "GL_TRACE": "in-kernel event tracing (gl_trace.cuh)",
    "GL_DEBUG_WAITS": "bounded mbarrier waits that name who was stuck where, then trap (gl_mbarrier.cuh)",
    "GL_WAIT_TIMEOUT_NS": "how long a debug wait waits before it reports (default 1 s)",
    # the course's what-ifs
    "GL_ABLATE_SAME_PHASE": "the producer's PipelineState starts at phase 0 like the consumer's: deadlock",
    "GL_ABLATE_EXPECT_TX_DELTA": "a producer announces this many bytes more (or fewer) than a stage delivers",
    "GL_ABLATE_LOCAL_EMPTY": "in a cluster, a stage's empty barrier counts and hears only this CTA's consumers",
    "GL_ABLATE_NO_EXIT_SYNC": "no cluster barrier before a CTA of a cluster exits",
    "GL_ABLATE_SKEW_NS": "the rank-1 consumer of a cluster sleeps this long per k-tile (the CTAs drift apart)",
    # attention's what-ifs
    "GL_ABLATE_TURNS_NO_FIRST": "the ordered barrier's first group waits for a turn like the others: ping-pong deadlock",
    "GL_ABLATE_V_RING_PHASE": "the attention V ring's producer starts at phase 0: deadlock",
    "GL_ABLATE_NO_RESCALE": "the online softmax leaves O unscaled when the running max moves: wrong results",
    # measurements
    "GL_ABLATE_NO_PREFETCH": "no prefetch of the tensor maps' descriptors at entry (perf-notes item 64)",
    "GL_ABLATE_NO_MULTICAST": "a cluster's CTAs each load the whole B tile, nothing multicast (perf-notes item 65)",
    "GL_ABLATE_NO_MMA": "the warp-specialized k-loop's consumers hand each stage back without its MMAs: the loads' "
                        "own pace, a wrong result (perf-notes item 120)",
    "GL_ABLATE_FP8_UNIT_SA": "the fp8 family reads no block scales of A, each row's is 1 (what their loads cost)",
    "GL_ABLATE_FP8_UNIT_SB": "the fp8 family reads no block scales of B, each n-block's is 1 (what their loads cost)",
    "GL_ABLATE_FP8_NO_SCALE_PREFETCH": "the fp8 family fetches no tile's row-wise column scales and bias into L2 as "
                                       "the tile starts",
    "GL_ABLATE_BORROW_NO_SYNC": "the production kernel's borrowed stage written without waiting for the partner "
                                "consumer (a race, perf-notes item 62)",
}
