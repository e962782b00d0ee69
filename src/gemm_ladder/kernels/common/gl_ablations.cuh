// gl_ablations.cuh — every build switch's default, in one place. A normal build sets none of
// them; the Python side names each one in its switch table (families/switches.py), which a CPU
// test holds to this file. What a switch does is written where it acts, in the header that owns
// the mechanism it breaks; the kernels themselves read as if the switches were not there.
#pragma once

// ---- build variants ------------------------------------------------------------------------
// Element type of A, B and C: fp16, or bf16 with GL_BF16=1.
#ifndef GL_BF16
#define GL_BF16 0
#endif
// Operand layouts, chosen per call like the element type: A M-major (a (K, M) row-major matrix
// read as A), B N-major (a (K, N) row-major matrix, the usual x @ W). Only kernels that check
// them take them (a static_assert elsewhere).
#ifndef GL_A_MN
#define GL_A_MN 0
#endif
#ifndef GL_B_MN
#define GL_B_MN 0
#endif
// fp8 operand formats (the fp8 family): A, B in e5m2 instead of e4m3 (gl_wgmma_fp8_ops.cuh).
#ifndef GL_FP8_A_E5M2
#define GL_FP8_A_E5M2 0
#endif
#ifndef GL_FP8_B_E5M2
#define GL_FP8_B_E5M2 0
#endif
// The fp8 family's promotion variants (fp8/fp8_gemm.cu, where each is described): two
// partials, the next k-tile's MMAs in flight while one is promoted; the same over a k-tile's
// column pieces; the next k-tile's block scales read under this k-tile's MMAs from per-tile
// pointers; GL_FP8_SCALE_ROWS: the same pointers, read a k-tile ahead. Set by an entry's fields.
#ifndef GL_FP8_OVERLAP_KT
#define GL_FP8_OVERLAP_KT 0
#endif
#ifndef GL_FP8_OVERLAP_PIECES
#define GL_FP8_OVERLAP_PIECES 0
#endif
#ifndef GL_FP8_LATE_SCALES
#define GL_FP8_LATE_SCALES 0
#endif
#ifndef GL_FP8_SCALE_ROWS
#define GL_FP8_SCALE_ROWS 0
#endif
// In-kernel event tracing (gl_trace.cuh).
#ifndef GL_TRACE
#define GL_TRACE 0
#endif
// Bounded mbarrier waits that name who was stuck where, then trap (gl_mbarrier.cuh).
#ifndef GL_DEBUG_WAITS
#define GL_DEBUG_WAITS 0
#endif
#ifndef GL_WAIT_TIMEOUT_NS
#define GL_WAIT_TIMEOUT_NS 1000000000ull  // 1 s without the phase completing
#endif

// ---- the course's what-ifs (choreography/whatifs.py) ---------------------------------------
// The producer's PipelineState starts at phase 0 like the consumer's (gl_pipeline.cuh): on a
// fresh barrier both sides then block, the deadlock the course warns about.
#ifndef GL_ABLATE_SAME_PHASE
#define GL_ABLATE_SAME_PHASE 0
#endif
// A producer announces this many bytes more (or fewer) than a stage delivers (gl_pipeline.cuh).
// Too many: the phase never completes. Too few: it completes before the data has landed.
#ifndef GL_ABLATE_EXPECT_TX_DELTA
#define GL_ABLATE_EXPECT_TX_DELTA 0
#endif
// In a cluster, a stage's empty barrier counts and hears only this CTA's consumers
// (gl_pipeline.cuh): a refill may overwrite operands the peer still reads.
#ifndef GL_ABLATE_LOCAL_EMPTY
#define GL_ABLATE_LOCAL_EMPTY 0
#endif
// No cluster barrier before exit (gl_cluster.cuh): a peer may arrive on an exited CTA's barriers.
#ifndef GL_ABLATE_NO_EXIT_SYNC
#define GL_ABLATE_NO_EXIT_SYNC 0
#endif
// The rank-1 consumer sleeps this long per k-tile (gl_warpspec.cuh), so the two CTAs of a
// cluster drift apart and a race another switch opens is lost every time.
#ifndef GL_ABLATE_SKEW_NS
#define GL_ABLATE_SKEW_NS 0
#endif

// ---- attention's what-ifs (choreography/whatifs.py; docs/attention.md) ----------------------
// The ordered barrier's first group waits for its turn like the others (gl_pipeline.cuh): each
// consumer waits for its predecessor's turn, which never comes: the ping-pong deadlock.
#ifndef GL_ABLATE_TURNS_NO_FIRST
#define GL_ABLATE_TURNS_NO_FIRST 0
#endif
// The V ring's producer starts at phase 0 like its consumers (attention/attn_warpspec.cuh): its
// first wait on a fresh empty barrier blocks, and the consumers wait for V forever.
#ifndef GL_ABLATE_V_RING_PHASE
#define GL_ABLATE_V_RING_PHASE 0
#endif
// The online softmax leaves O unscaled when the running max moves (attention/attn_common.cuh):
// blocks summed at different scales, a wrong result.
#ifndef GL_ABLATE_NO_RESCALE
#define GL_ABLATE_NO_RESCALE 0
#endif

// ---- measurements (docs/perf-notes.md) -----------------------------------------------------
// No prefetch of the tensor maps' descriptors (gl_tma.cuh; item 64).
#ifndef GL_ABLATE_NO_PREFETCH
#define GL_ABLATE_NO_PREFETCH 0
#endif
// A cluster's CTAs each load the whole B tile, nothing multicast (gl_warpspec.cuh; item 65).
#ifndef GL_ABLATE_NO_MULTICAST
#define GL_ABLATE_NO_MULTICAST 0
#endif
// The warp-specialized k-loop's consumers wait for each stage and hand it back without its MMAs
// (gl_warpspec.cuh, mma_mainloop): the loads' own pace. A wrong result (item 120).
#ifndef GL_ABLATE_NO_MMA
#define GL_ABLATE_NO_MMA 0
#endif
// The production kernel's borrowed stage written without waiting for the partner consumer
// (gemm/gemm_epilogue.cuh; a race: item 62).
#ifndef GL_ABLATE_BORROW_NO_SYNC
#define GL_ABLATE_BORROW_NO_SYNC 0
#endif
// The fp8 family reads no block scales of A (of B): each row's (n-block's) is 1
// (fp8/fp8_scales.cuh), to measure what their loads cost.
#ifndef GL_ABLATE_FP8_UNIT_SA
#define GL_ABLATE_FP8_UNIT_SA 0
#endif
#ifndef GL_ABLATE_FP8_UNIT_SB
#define GL_ABLATE_FP8_UNIT_SB 0
#endif
// The fp8 family fetches no tile's row-wise column scales and bias into L2 as the tile starts
// (fp8/fp8_scales.cuh).
#ifndef GL_ABLATE_FP8_NO_SCALE_PREFETCH
#define GL_ABLATE_FP8_NO_SCALE_PREFETCH 0
#endif
