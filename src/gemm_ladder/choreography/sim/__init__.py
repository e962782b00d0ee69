"""A discrete-event simulator of the GEMM ladder's mbarrier pipelines (steps 4-10).

Pure standard-library Python: importing it imports neither torch nor CUDA.

What is modelled
----------------
* **mbarrier** (:class:`MBarrier`) with the hardware's semantics: an init
  (expected arrival) count, a pending arrival count, a signed transaction-byte
  count (``expect_tx`` adds, a TMA completion subtracts) and a current phase.
  The phase completes (flips) when the pending count reaches 0 *and* the
  tx-count is 0; the pending count is then re-armed to the init count.
  ``try_wait.parity(p)`` succeeds when the phase with parity ``p`` has
  completed, i.e. when the barrier's current phase parity is not ``p``: a fresh
  barrier (phase 0) lets a wait for parity 1 pass at once and blocks a wait for
  parity 0.
* **PipelineState** ``{stage, phase}`` with ``advance()`` (stage + 1, phase flips on
  wrap).  The producer of a ring starts at phase 1, its consumer at phase 0.
* **TMA loads**: a load issued at ``t`` lands at ``t + load_latency_ns`` (the loads of a
  CTA's first ring round after ``first_load_latency_ns``, when set: cold; plus,
  when ``l2_bytes_per_ns`` is set, the time its bytes spend in the issuing SM's
  L2->SMEM pipe, which serialises that SM's loads).  Landing performs
  ``complete_tx`` on the destination stage's full barrier - in every CTA it is
  multicast to.
* **wgmma**: ``mma_ns`` per 128x128x64 k-tile (scaled by the consumer tile's
  volume), serial on the SM's tensor core (a FIFO shared by the SM's consumer
  warpgroups); issued asynchronously, waited with ``wgmma.wait_group``.
* **Epilogue**: accumulators -> SMEM staging (``epilogue_ns`` per 128x128 tile,
  split into EPI_N-column chunks when ``epi_n`` is set), then a **TMA store**
  (``store_latency_ns`` per chunk until the staging buffer has been read).
* Every role pays ``issue_ns`` per instruction it issues and resumes
  ``wake_ns`` after the phase completion that releases it.

Roles per step (the parameters come from the step's `Step`, see :func:`params_for_step`)
-------------------------------------------------------------------------------------
* *lockstep* (steps 4-6): one team issues its loads, waits on the full barrier,
  issues the wgmma, waits for it, ... and writes the epilogue itself.  With one
  stage (step 4) nothing overlaps; with a ring of ``depth`` stages the team
  prefetches depth-1 ahead and keeps one wgmma in flight (``wgmma.wait_group(1)``);
  a persistent step runs several tiles per CTA.  The TMA engine's loads/stores
  in flight are drawn on a ``cta0/tma`` lane.
* *warp-specialized* (step 7): a producer warp, consumer warpgroup(s) and a
  writeback warp; two rings = four mbarriers: ``tma2mma``/``mma2tma`` (the SMEM
  operand ring, depth stages) and ``mma2ld``/``ld2mma`` (the accumulator staging
  buffer: full / free).
* a cluster of 2 CTAs (step 8): each CTA loads its own A and half of B,
  multicasting its B half to both CTAs; each CTA's full barrier expects the
  whole stage's bytes; the empty barrier counts the consumer warps of both CTAs
  (remote arrive); a cluster barrier before exit.
* two consumers (step 9): as 8, with two consumer warpgroups per CTA that both
  read each staged stage (each its own rows of A), and a chunked (64-column)
  epilogue through a ring of staging slots both consumers fill.
* ping-pong (step 10): two consumers take whole tiles in turns (turn barriers),
  each with its own staging slot; the writeback stores tiles in order.
* a consumer's issue gap: its loop (issue, ``wgmma.wait_group``, release, loop
  back) issues at most one k-tile per ``consumer_gap_ns``.

Deadlocks and hazards (the course's exercises, :data:`..whatifs.WHAT_IFS`) never
hang and never raise: :func:`simulate` returns a :class:`SimResult` whose
``verdict`` is ``"deadlock"``, ``"early_release"`` or ``"early_exit"`` with a
one-sentence ``explanation``. Hazards are found by timing and by happens-before
(vector clocks), see ``engine``.

Modules: ``params`` (SimParams from a Step), ``barriers`` (MBarrier, PipelineState),
``engine`` (the event loop and its hazard checks), ``roles`` (the kernels' roles),
``explain`` (deadlock explanations), ``run`` (simulate, what-ifs), ``calibrate``
(fitting to a measured trace, and the makespan check); for the attention steps A2-A5,
``attn_params`` (AttnParams from an AttnStep, the attention what-ifs), ``attn_roles`` (the
team, producer and consumers on one SM's tensor core and CUDA cores) and ``attention``
(simulate_attention, the predicted TFLOP/s, the comparison with a record).
"""
from ..whatifs import WHAT_IFS
from .barriers import MBarrier, PipelineState
from .calibrate import MAKESPAN_TOLERANCE, calibrate, check_calibration, simulate_like
from .params import DEFAULT_NUM_SMS, SimParams, depth_needed, params_for_step, simulated_steps
from .run import SimResult, run_what_if, simulate, simulate_step
from .attention import (ATTN_STEPS, ATTN_WHAT_IFS, AttnParams, compare_with_record, params_for_attention, predict,
                        run_attention_what_if, simulate_attention)

__all__ = [
    "SimParams", "SimResult", "MBarrier", "PipelineState", "WHAT_IFS", "DEFAULT_NUM_SMS",
    "simulated_steps", "params_for_step", "simulate", "simulate_step", "run_what_if",
    "depth_needed", "calibrate", "simulate_like", "check_calibration", "MAKESPAN_TOLERANCE",
    "AttnParams", "ATTN_STEPS", "ATTN_WHAT_IFS", "params_for_attention", "simulate_attention",
    "run_attention_what_if", "predict", "compare_with_record",
]
