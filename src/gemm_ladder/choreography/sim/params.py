"""The simulator's parameters: what it models of a step comes from the step's `Step`, the
timings are H200 estimates (see :class:`SimParams`)."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ...cuda.device import H200
from ...families.common import EPI_CHUNK_COLS
from ...families.keys import get_step
from ...families.ladder import MODELLED_STEPS, all_steps
from ...families.ladder_step import Step

# SMs of an H100 SXM / H200, for sizing persistent grids when the real count is not known.
DEFAULT_NUM_SMS = H200.sms


def simulated_steps() -> list[Step]:
    """The steps the simulator models: every kernel step with mbarrier stages (the TMA
    steps), then the steps modelled before their kernels exist ("model only")."""
    return [st for st in all_steps(include_variants=False) if st.uses_tma] + list(MODELLED_STEPS.values())


@dataclass
class SimParams:
    """Model parameters.  Times in ns, sizes in bytes / elements.

    Defaults are rough estimates for one H200 SM at 128x128x64 fp16 tiles:

    * ``mma_ns = 280``: a 128x128x64 k-tile is 2*128*128*64 = 2.10 MFLOP; an
      SM's dense fp16 tensor throughput is 4096 FLOP/clock (ANCHORS.md: 132
      SMs x 4096 FLOP/clk x 1.83 GHz = 989 TFLOP/s), so 512 clocks = 0.28 us
      at 1.83 GHz.  Derived from the datasheet peak, not measured.
    * ``load_latency_ns = 800``: TMA issue -> bytes landed for a 16 KB box
      under load (L2 hits mixed with HBM misses).  An estimate (the brief's
      0.8-1.0 us range); calibrate it from a measured trace.
    * ``l2_bytes_per_ns = None``: the issuing SM's share of L2->SMEM bandwidth.
      None = unlimited (a pure latency model).  A value around 60-70 B/ns
      (~8-9 TB/s over 132 SMs, an estimate) makes 128x128 tiles bandwidth-bound,
      which is what the cluster multicast and the shared B of steps 8-9 relieve.
    * ``epilogue_ns = 300``: registers -> SMEM (stmatrix) of a 128x128 fp16
      tile (32 KB at ~128 B/clock plus fences); estimate.
    * ``store_latency_ns = 500``: TMA store issue -> staging buffer read
      (``cp.async.bulk.wait_group.read``) per stored chunk; estimate.
    * ``issue_ns = 10``, ``wake_ns = 10``: instruction issue cost and the delay
      from a phase completion to the waiter resuming; estimates.
    * ``consumer_gap_ns = 411``: the shortest time from one wgmma issue of a consumer
      warpgroup to its next: its loop's own latency. One consumer cannot issue faster than
      this however fast the tensor core is. Its parts: ``mma_issue_ns = 122`` from the
      barrier wait returning to the k-tile's wgmma group being issued, ``mma_wait_ns = 119``
      from the previous group being done (or this one issued, whichever is later) to
      ``wgmma.wait_group`` returning and the release of that group's stage, and the rest
      looping back to the next barrier wait. From a measurement: fitted to the traced 7:d4
      run in docs/samples (:func:`~.calibrate.calibrate`), its consumer issues a k-tile every
      449 ns, 134 ns after its wait returns, and releases a stage 130 ns after the next
      issue, on an SM clock at which a k-tile needs 305.7 ns at peak; the same clocks at the
      1.83 GHz of ``mma_ns`` are 411, 122 and 119 ns. The traced loop includes the tracer's
      own stores.
    * ``first_load_latency_ns = None``: the loads of a CTA's first ring round (its first
      tile's first ``depth`` k-tiles) land this long after issue instead (cold: descriptors,
      TLB, an L2 the benchmark flushed). None: ``load_latency_ns``. Measured traces show the
      first load landing ~1.8 µs after its issue against ~0.93 µs for the median
      (docs/samples' 7:d4); :func:`~.calibrate.calibrate` fits it.
    * ``setup_ns = 0``: a CTA's start (its first event) to its producer's first wait: the
      roles' set-up (barrier init, descriptor prefetch, register reallocation). Fitted the same way.
    * ``cluster_release_ns = 0``: in a cluster a consumer hands a stage back through the
      cluster (``mapa`` + ``mbarrier.arrive.release.cluster`` on its own CTA's empty barrier and
      the peer's), and those arrivals land this long after they are issued; 0 keeps the
      CTA-local hand-off (``wake_ns`` after the last arrival). On the H200 the producer of step 8
      resumes ~194 SM cycles after the last release, 7:d4's (local) ~30: the held-out
      prediction sets the difference (``heldout.CLUSTER_RELEASE_CLOCKS``) at the run's clock.
    """

    step: int = 7
    key: str = "7"             # the step's registry key, e.g. "7:d4"
    name: str = "warp specialization"
    style: str = "warp-specialized"   # or "lockstep"
    model_only: bool = False   # no kernel implements this step yet
    depth: int = 4
    k_tiles: int = 64
    tiles_per_cta: int = 1
    tile_m: int = 128          # rows of A per consumer warpgroup
    tile_n: int = 128          # columns (rows of B) per CTA
    tile_k: int = 64
    in_bytes: int = 2          # fp16 / bf16
    out_bytes: int = 2
    num_consumers: int = 1
    pingpong: bool = False     # consumers take whole tiles in turns (else they split each tile)
    cluster: int = 1           # CTAs per cluster (B multicast across them)
    epi_n: int | None = None   # epilogue chunk width (columns); None = whole tile
    staging_stages: int = 1    # C staging slots of the CTA (the mma2ld/ld2mma ring)
    borrowed_chunks: int = 0   # chunks staged in the stage the tile's last k-tile drained (Step.borrow_stage)
    warps_per_consumer: int = 4  # arrivals per consumer release (one per warp leader)
    mma_ns: float = 280.0      # per 128x128x64 k-tile, scaled by the consumer tile volume
    consumer_gap_ns: float = 411.0  # a consumer's shortest wgmma issue-to-issue time
    mma_issue_ns: float = 122.0  # of which: from its barrier wait returning to the group issued
    mma_wait_ns: float = 119.0  # and: from the group waited for being done to the stage's release
    load_latency_ns: float = 800.0
    first_load_latency_ns: float | None = None  # the CTA's first ring round (cold); None: load_latency_ns
    setup_ns: float = 0.0      # a CTA's start to its producer's first wait
    l2_bytes_per_ns: float | None = None
    epilogue_ns: float = 300.0  # per 128x128 tile, scaled by area
    store_latency_ns: float = 500.0
    issue_ns: float = 10.0
    wake_ns: float = 10.0
    cluster_release_ns: float = 0.0  # a release through the cluster lands this much later (see above)

    @property
    def lockstep(self) -> bool:
        return self.style == "lockstep"

    @property
    def title(self) -> str:
        notes = self.style + (", model only" if self.model_only else "")
        return f"step {self.key} - {self.name} ({notes})"

    @property
    def consumers_per_stage(self) -> int:
        """Consumers that read each stage: all of them, or one when they take turns."""
        return 1 if self.pingpong else self.num_consumers

    @property
    def cta_m(self) -> int:
        """Rows of the CTA's output tile (and of its A k-tile)."""
        return self.tile_m * self.consumers_per_stage

    @property
    def a_bytes(self) -> int:
        """Bytes of the CTA's A k-tile per stage (the consumers' rows together)."""
        return self.cta_m * self.tile_k * self.in_bytes

    @property
    def b_bytes(self) -> int:
        """Bytes of the CTA's B tile per stage."""
        return self.tile_n * self.tile_k * self.in_bytes

    @property
    def stage_bytes(self) -> int:
        """Bytes that land in one CTA's stage (its full barrier's expect_tx)."""
        return self.a_bytes + self.b_bytes

    @property
    def empty_count(self) -> int:
        """Arrivals per phase of the empty barrier mma2tma: the warps of every consumer that
        reads the stage, in every CTA of the cluster."""
        return self.warps_per_consumer * self.consumers_per_stage * self.cluster

    @property
    def mma_time(self) -> float:
        return self.mma_ns * (self.tile_m * self.tile_n * self.tile_k) / (128 * 128 * 64)

    @property
    def chunks(self) -> int:
        """Epilogue chunks per tile (each a TMA store of all the CTA's rows)."""
        if not self.epi_n or self.epi_n >= self.tile_n:
            return 1
        return max(1, math.ceil(self.tile_n / self.epi_n))

    @property
    def lent_chunks(self) -> int:
        """Chunks of each tile staged in the borrowed operand stage: the kernel borrows it only
        when K has at least `depth` k-tiles."""
        return min(self.borrowed_chunks, self.chunks) if self.k_tiles >= self.depth and not self.pingpong else 0

    @property
    def shared_staging(self) -> bool:
        """The consumers stage their rows of each chunk into the same slot (mma2ld counts them)."""
        return self.num_consumers > 1 and not self.pingpong

    @property
    def epilogue_chunk_time(self) -> float:
        """One consumer staging its rows of one chunk."""
        return self.epilogue_ns * (self.tile_m * self.tile_n) / (128 * 128) / self.chunks

    @property
    def store_chunk_bytes(self) -> int:
        return self.cta_m * self.tile_n * self.out_bytes // self.chunks

    def load_latency(self, tile: int, k: int) -> float:
        """A load's latency: the cold one for the CTA's first ring round (the first ``depth``
        k-tiles of its first tile), else the steady one."""
        if self.first_load_latency_ns is not None and tile == 0 and k < self.depth:
            return self.first_load_latency_ns
        return self.load_latency_ns

    def transfer_ns(self, nbytes: float) -> float:
        """Time ``nbytes`` spend in the SM's L2->SMEM pipe (0 without a bandwidth limit)."""
        return nbytes / self.l2_bytes_per_ns if self.l2_bytes_per_ns else 0.0

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def params_for_step(step: int | str | Step, *, size: tuple[int, int, int] | None = None,
                    num_sms: int | None = None, **overrides: Any) -> SimParams:
    """The model of a ladder step: tile, ring depth, style, consumers and cluster come from
    its :class:`~gemm_ladder.families.ladder_step.Step` (a key such as ``7`` or ``"7:d4"``, or a
    Step), the timings from :class:`SimParams`' defaults; ``overrides`` (None values
    ignored) replace any field.

    Without ``size``: k_tiles = 64 (K = 4096 at BK = 64), and 2 tiles per CTA for the
    persistent steps (enough to show the tile-to-tile hand-over; at 4096^3 on 132 SMs a
    persistent CTA runs 8), else 1.  With ``size`` = (M, N, K): the k-tiles of K and the
    busiest CTA's tile count on ``num_sms`` SMs (default 132).
    """
    try:
        st = step if isinstance(step, Step) else get_step(step, modelled=True)
    except KeyError as e:
        raise ValueError(e.args[0]) from None
    if not isinstance(st, Step) or not st.uses_tma:
        keys = ", ".join(s.key for s in simulated_steps())
        what = f"{st.key}, a kernel family beside the ladder" if not isinstance(st, Step) else f"step {st.key}"
        raise ValueError(f"the simulator models steps {keys} (their mbarrier pipelines), not {what}")
    base: dict[str, Any] = dict(
        step=st.number, key=st.key, name=st.name, style=st.style, model_only=st.model_only,
        depth=st.depth, tile_m=st.bm if st.pingpong else st.bm // st.consumers, tile_n=st.bn,
        tile_k=st.bk, num_consumers=st.consumers, pingpong=st.pingpong, cluster=st.cluster_m,
        epi_n=EPI_CHUNK_COLS if st.epi_stages else None, staging_stages=st.epilogue_slots,
        borrowed_chunks=st.borrowed_chunks,
        k_tiles=64, tiles_per_cta=2 if st.persistent else 1)
    if size is not None:
        M, N, K = size
        base.update(k_tiles=-(-K // st.bk), tiles_per_cta=busiest_cta_tiles(st, M, N, num_sms or DEFAULT_NUM_SMS))
    base.update({k: v for k, v in overrides.items() if v is not None})
    p = SimParams(**base)
    if p.depth < 1 or p.k_tiles < 1 or p.tiles_per_cta < 1:
        raise ValueError("depth, k_tiles and tiles_per_cta must be >= 1")
    return p


def busiest_cta_tiles(st: Step, M: int, N: int, num_sms: int, ctas: int | None = None) -> int:
    """Output tiles the busiest CTA of a persistent grid computes; a cluster walks cluster
    tiles (cluster_m tile rows, the last pair may reach below C), each CTA one tile of each.
    ``ctas``: the launched grid (fewer clusters may fit than SMs / cluster size)."""
    if not st.persistent:
        return 1
    cm = st.cluster[0]
    cluster_tiles = -(-(-(-M // st.bm)) // cm) * -(-N // st.bn)
    clusters = (ctas // cm) if ctas else min(num_sms * st.ctas_per_sm // cm, cluster_tiles)
    return -(-cluster_tiles // max(1, clusters))


def depth_needed(p: SimParams) -> int:
    """The smallest ring depth at which the model's warp-specialized mainloop
    keeps its consumers fed.

    A stage freed when its readers are done with k-tile k is refilled and ready for
    k+depth after ``wake + issue (expect_tx) + pieces*issue + transfer + latency + wake +
    issue``; the consumers reach k+depth after ``(depth-1)`` more stage periods, a period
    being the longer of a consumer's issue gap and the tensor-core time of the stage's
    wgmmas.  So depth >= 1 + ceil(refill / period).
    """
    pieces = 2
    xfer = p.transfer_ns(p.a_bytes + p.b_bytes / max(1, p.cluster))
    refill = (2 * p.wake_ns + (pieces + 2) * p.issue_ns + xfer + p.load_latency_ns)
    period = max(p.consumer_gap_ns, p.mma_time * p.consumers_per_stage)
    return 1 + math.ceil(refill / period - 1e-9)
