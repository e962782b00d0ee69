"""The selection's cost model: what a candidate kernel costs on (M, N, K), from its facts, and
every constant the model is priced with (the split-K deal's too: families/smallm.py).

What the model knows about a candidate comes from its facts: its CTA tile (bm x bn x bk), its
cluster (CTAs along M sharing B), its consumers, whether its grid is persistent, and
`accepts(M, N, K)`. The model (docs/suite.md):

  cluster tile   (cluster_m * bm) x bn; a cluster of 2 is one scheduling unit
  tiles          ceil(M / (cluster_m * bm)) * ceil(N / bn)
  slots          clusters resident at once = SMs * ctas_per_sm // cluster_m
  wave eff       tiles / (ceil(tiles / slots) * slots)     the last wave's idle slots
                 (stream-K: the last wave's tiles split into P aligned pieces, Step.stream_k_deal:
                 tiles / ((whole rounds + that wave's length in tiles) * slots))
  tile eff       M * N / (tiles * cluster tile area)       rows/columns computed past C
  t_compute      2 M N K_padded / peak / tile eff          all SMs at the tensor-core peak
  t_memory       (A + B + C once) / HBM bandwidth          compulsory traffic
  mem wave eff   as wave eff, but a wave with WAVE_HBM_SATURATION of the slots busy counts as
                 full (that many SMs already draw the full HBM bandwidth)
  t_l2           operand tiles from L2 / (busy SMs * L2_SM_GBS), a cluster deal's at
                 DSMEM_L2_SHARE of that rate
  score          max(t_compute / wave eff, t_memory / mem wave eff, t_l2)    lower is better
                 (+ the second launch's fixed cost for a split-K deal with split tiles)

t_memory counts B again for each row block a split-K deal's CTA runs after another of the same
column once more than L2_STREAM_BYTES have streamed in between (`b_passes`). The prediction
(`predict_us`) adds the write-back of the dirty L2 the benchmark's flush leaves (`dirty_us`).

B rows that are not whole 32-byte sectors (16-byte aligned, `rows_misaligned`: a K-major B
with K = 8 mod 16, a row-major b with N = 8 mod 16) slow a compute-bound ladder kernel that
fetches its own B tiles from L2 by MISALIGNED_B_COST, but not gemm:128x256c2, whose 2-CTA cluster
multicasts B (each CTA fetches half of it): with `b_misaligned` such candidates are charged
that cost when they need two waves or more (the choice, library/select.py, then considers
gemm:128x256c2 too).

An N-major B (a row-major b read in place, `b_mn`) travels in 64-wide blocks, which overhang
a ladder tile whose width is not a multiple of 64: such a candidate is charged OVERHANG_B_COST,
and one whose tiles start off 32-byte sectors (232 wide) is not offered.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

from ..cuda.device import H200
from .common import MN_BLOCK
from .ladder_step import Step
from .protocol import KernelFamily

# Two measured constants of two models, each the share of the SMs that, streaming at once,
# draws (nearly) the full HBM bandwidth. The wave model's (`score`), fitted on the ladder's
# 128-row tiles, which reuse each operand byte more, so more of them must stream at once:
WAVE_HBM_SATURATION = 0.85
# the split-K deal's (SmallM.deal_cost; docs/perf-notes.md item 21), fitted on the small-M
# family's 64-row tiles, which stream B with little reuse, so fewer CTAs saturate HBM:
SPLITK_DEAL_HBM_SATURATION = 0.65
# A model constant, not a measurement: the fixed cost of staging an MN-major operand
# K-major (host work and launch of one more torch kernel, ~6 us per call on the H200's
# host, issue 9); without it a tiny shape would copy rather than read in place.
COPY_LAUNCH_US = 6.0
# Measured: torch's transposing copy of a (K, N) operand into (N, K) moves ~0.6 TB/s of
# read + written bytes on the H200 (4096 x 14336: ~370 us; docs/perf-notes.md item 29).
TRANSPOSE_COPY_TBS = 0.6
ELEMENT_BYTES = 2  # fp16 / bf16 in and out
TMA_ROW_BYTES = 128  # the widest swizzled row a TMA box holds (128-byte swizzle): a box is at most this wide in K
# Measured (docs/perf-notes.md, item 32): B rows at 16-byte but not 32-byte offsets cost gemm:128x256 and
# gemm:128x192 9-29 % from 2048^2 to 8192^2 problems, N-major or K-major (each 128-byte box row of B
# touches five 32-byte sectors, and B is two thirds of the operand traffic from L2), ~1 % when
# only A's rows are so, and gemm:128x256c2 with its multicast cluster 0-2 %. One cost for all: the low end.
MISALIGNED_B_COST = 0.15
SECTOR_BYTES = 32
# Measured (docs/perf-notes.md, items 35 and 57): an N-major B travels in whole 64-wide blocks, so
# on a tile width that is not a multiple of 64 its blocks overhang the tile (176: 192 columns
# read, 224 and 240: 256). Against the same width reading B K-major that cost 0-6.5 % for 224 and
# 240 and 4-14 % for 176; one cost for all, near the high end. Where a tile's first column is
# not at a 32-byte offset (232: 464 bytes per tile) every other tile's rows straddle sectors:
# 25-45 % slower, so such a width does not take an N-major B at all.
OVERHANG_B_COST = 0.10
# Measured (docs/perf-notes.md, items 51 and 117): the small-M multicast pairs run only on rows that
# straddle 32-byte sectors (MULTICAST_NICHE), and there the kernel's time beyond the fixed cost was
# ~1.6x an aligned problem's of the same size (1000^3 on the pairs 11.5 us against 1024^3 on single
# CTAs 9.5, LAUNCH_US 6.0 each: 5.5 against 3.5 us), where the score's roofline sees no difference.
# Fitted on that pair of runs; 1000^3 is the suite's only row in the niche. Charged in the prediction
# only: the niche was chosen by measurement (item 51), and in the score it would move unmeasured picks.
MISALIGNED_PAIRS_COST = 0.5


def rows_misaligned(row_stride_elems: int) -> bool:
    """Rows `row_stride_elems` apart start at 16-byte but not 32-byte offsets (of each other)."""
    return (row_stride_elems * ELEMENT_BYTES) % SECTOR_BYTES != 0


def contiguous_b_misaligned(N: int, K: int) -> bool:
    """A contiguous K-major B (N x K, what matmul_nt reads; K padded to 8) has such rows."""
    return N > 1 and rows_misaligned(-(-K // 8) * 8)


@dataclass(frozen=True)
class Device:
    """What the model needs of the GPU. Defaults: the H200 SXM datasheet (dense fp16/bf16
    tensor-core peak, HBM3e bandwidth); only their ratio and the SM count change a pick."""
    sms: int = H200.sms
    peak_tflops: float = H200.peak_tflops
    hbm_tbs: float = H200.hbm_tbs
    source: str = H200.source
    copy_tbs: float = H200.copy_tbs  # measured copy rate: what the prediction streams at


# The model's prediction of a kernel's time (Score.predicted_us), beside its score. The score
# ranks candidates by their roofline terms alone; the prediction adds what those leave out,
# two constants fitted once on the suite's 16 squares at e7560a9 and checked on its other 122
# rows, held out (scripts/costmodel_record.py, docs/perf-notes.md item 78), and streams at the
# measured copy rate instead of the datasheet's. Neither changes a pick.
# Each SM takes its operand tiles from L2 at most this fast (GB/s; the SM's port onto the
# L2 fabric): a candidate whose CTAs re-read their operands from L2 many times (narrow tiles
# over a long K, one-consumer 64-row tiles at M > 64) is bound by it before the tensor
# core or HBM. None: the term is left out.
L2_SM_GBS: float | None = 120.0
# Measured (docs/perf-notes.md item 85, the suite's every-candidate run at d073294): a split-K
# deal whose pieces a cluster sums on chip (DSMEM) takes its tiles from L2 at ~0.7 of the rate
# of the same tile's other deals (smallm:n64 at M = 128-256: 51-83 GB/s per SM, median 67-70,
# against 66-98, median 92-94, on the same CTA counts); priced so in the score too (not yet in
# the family's deal_cost: its deals would change, unmeasured).
DSMEM_L2_SHARE = 0.7
# Fitted (item 85, on half of the suite's shapes, held to the other half): the L2 a stream
# turns over, ~half the H200's 60 MB. The benchmark's zeroing flush leaves L2 dirty: the first
# bytes a kernel reads evict dirty lines, written back at the copy rate beside its reads,
# L2_STREAM_BYTES * (1 - exp(-reads / L2_STREAM_BYTES)) in all (7 us saturated; item 74 measured
# 7-8 us at 16 x 8192^2 against a clean L2), in the prediction only (a decode step's L2 is
# rarely all dirty). And a B tile read again after more than this has streamed through comes
# from HBM again (20-45 MB give the same rows).
L2_STREAM_BYTES = 30e6
# Fitted (docs/perf-notes.md item 90, on half A of the suite's shapes, held to half B and the
# long-K probe): a split deal's reduction, a fixed time after its last k-tile (`reduce_us`).
# A cluster of P CTAs sums its pieces through DSMEM: each CTA stages its fp32 piece, waits at a
# cluster barrier for its slowest peer, reads its column slice from the P - 1 others and waits
# again before its shared memory may go; priced per KiB read from the peers, barriers included
# (a 64 x 64 tile: 0.7 us in pairs, 1.3 in clusters of 8; 128 x 64 in clusters of 4: 2.2).
CLUSTER_REDUCE_US_PER_KIB = 0.09
# The second pass over the workspace planes, launched programmatically: its launch hides under
# the split kernel's tail, what is left is its own read of the planes and store of C.
REDUCE_PASS_US = 2.0
LAUNCH_US = 6.0  # a call's fixed cost: launch, the ring's first fill, the last tile's store (256^3 runs in 6.1 us)
TENSOR_EFFICIENCY = 0.755  # the tensor-core rate sustained, as a share of the datasheet peak (clock, issue gaps)


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def compulsory_bytes(M: int, N: int, K: int, elem: int = ELEMENT_BYTES) -> int:
    """A and B read once, C written once."""
    return elem * (M * K + N * K + M * N)


def operand_bytes(step: KernelFamily, M: int, N: int, K: int, elem: int = ELEMENT_BYTES) -> int:
    """Bytes the step's CTAs load as operand tiles over the whole problem, plus C once:
    each CTA reads its A and B tiles once per k-tile, and a cluster along M (N) reads the B (A)
    tile it shares once. With no L2 reuse between clusters this is the HBM traffic; it is the
    traffic L2 must deliver in any case."""
    f = step.facts()
    if f.swap_ab:
        M, N = N, M
    # K as loaded: in boxes of at most a 128-byte swizzled row, and a box wholly past K reads nothing
    # (TMA fills it with zeros), so a k-tile of two such boxes reads no more than one past the end
    load_k = min(f.bk, TMA_ROW_BYTES // elem)
    Kp = _ceil(K, load_k) * load_k
    a_reads = _ceil(N, f.bn * f.cluster_n) * M * Kp  # every cluster column re-reads A
    b_reads = _ceil(M, f.bm * f.cluster_m) * N * Kp  # every cluster row re-reads B
    return elem * (a_reads + b_reads + M * N)


def intensity(step: Step, M: int, N: int, K: int) -> float:
    """FLOP per operand byte (see operand_bytes): where a step sits on a roofline."""
    return 2.0 * M * N * K / operand_bytes(step, M, N, K)


@dataclass
class Score:
    key: str
    label: str = ""
    available: bool = True
    accepted: bool = False
    padded: bool = False
    shape: tuple[int, int, int] = (0, 0, 0)  # what the kernel runs
    tiles: int = 0
    slots: int = 0
    waves: int = 0
    wave_eff: float = math.nan
    mem_wave_eff: float = math.nan
    tile_eff: float = math.nan
    t_compute_us: float = math.nan
    t_memory_us: float = math.nan
    t_l2_us: float = 0.0  # the operand tiles from L2 at L2_SM_GBS per SM busy
    score_us: float = math.inf
    l2_bytes: int = 0
    padded_flop: float = math.nan
    bound: str = ""
    why: str = ""
    slowed: bool = False  # charged MISALIGNED_B_COST
    overhang: bool = False  # charged OVERHANG_B_COST
    consumers: int = 1  # MMA warpgroups per CTA
    tile: tuple[int, int] = (0, 0)  # (bm, bn)
    predicted_us: float = math.nan  # the model's prediction of the kernel's time (LAUNCH_US ...)
    b_passes: int = 1  # B streamed from HBM this many times (b_passes)
    dirty_us: float = 0.0  # the flush's dirty L2 written back as the kernel reads (prediction only)
    pass_charge_us: float = 0.0  # the score's charge for a second launch (split_overhead_bytes)
    straddling_pairs: bool = False  # the small-M multicast pairs: the prediction charges MISALIGNED_PAIRS_COST
    t_reduce_us: float = 0.0  # the prediction's: the cluster's exchange or the second pass (reduce_us)


def padded_shape(M: int, N: int, K: int) -> tuple[int, int, int]:
    """The shape `gemm_ladder.matmul` hands the kernel when N or K is not a multiple of 8."""
    return M, N + (-N) % 8, K + (-K) % 8


def _problems(step: KernelFamily, shape: tuple[int, int, int], b_mn: bool) -> list[str]:
    """Why `step` does not take the shape (the small-M family's answer depends on whether B
    is read N-major: smallm.SmallM.large_m_problems)."""
    return step.shape_problems(*shape, b_mn=b_mn)


def b_passes(deal, m_tiles: int, b_tile_bytes: int, sms: int) -> int:
    """How many times a split-K deal streams B from HBM. Its tiles go column-major over C, so
    a column's row blocks usually run side by side on neighbouring CTAs and share B in L2; but
    where a CTA's run holds several whole tiles, it takes a column's row blocks one after the
    other, and once the machine has streamed more than L2_STREAM_BYTES of B in between, each
    comes from HBM again (128 x 8192 x 8192 on smallm:n64, two row blocks per run: 78 us, the
    time of B read twice; item 85)."""
    if deal is None or deal.mc > 1 or deal.dsmem or deal.fixup:
        return 1
    per_run = min(m_tiles, deal.units // deal.k_tiles)
    return per_run if per_run > 1 and deal.k_tiles * min(deal.ctas, sms) * b_tile_bytes > L2_STREAM_BYTES else 1


def reduce_us(deal, tile_elems: int) -> float:
    """The time a split-K deal's reduction adds after its last k-tile: a cluster's exchange of
    its P fp32 pieces of `tile_elems` through DSMEM (each CTA reads its slice, (P - 1) / P of a
    piece, from its peers), or the programmatically launched second pass over the workspace
    planes (their fp32 bytes are in t_memory); 0 for whole tiles."""
    if deal is None or deal.mc > 1 or deal.fixup:
        return 0.0
    if deal.dsmem:
        p = deal.cluster[0]
        return CLUSTER_REDUCE_US_PER_KIB * 4 * tile_elems * (p - 1) / p / 1024
    return REDUCE_PASS_US if deal.planes else 0.0


def score(step: Step, M: int, N: int, K: int, dev: Device = Device(), b_misaligned: bool = False,
          b_mn: bool = False) -> Score:
    s = Score(step.key, step.label)
    shape = (M, N, K)
    overhang = b_mn and isinstance(step, Step) and step.bn % MN_BLOCK != 0
    if overhang and step.bn * ELEMENT_BYTES % SECTOR_BYTES:
        s.why = (f"an N-major B: its {step.bn}-column tiles start {step.bn * ELEMENT_BYTES} bytes apart, every "
                 "other one off a 32-byte sector")
        return s
    if problems := _problems(step, shape, b_mn):
        shape = padded_shape(M, N, K)
        if shape == (M, N, K) or _problems(step, shape, b_mn):
            s.why = "rejects the shape: " + "; ".join(problems)
            return s
        s.padded = True
    s.accepted, s.shape = True, shape
    f = step.facts()
    s.consumers, s.tile = f.consumers, (f.bm, f.bn)
    deal = step.deal(*shape, dev.sms)  # a split-K family deals out its work per shape
    if deal is not None:
        f = dataclasses.replace(f, split_k=deal.splits)
    m, n, k = shape
    if f.swap_ab:  # the small dimension becomes the MMA's N
        m, n = n, m
    k_split = _ceil(k, f.split_k)
    kp = _ceil(k_split, f.bk) * f.bk * f.split_k
    cm_rows = f.bm * f.cluster_m
    s.tiles = _ceil(m, cm_rows) * _ceil(n, f.bn) * f.split_k
    s.slots = max(1, dev.sms * f.ctas_per_sm // f.cluster_m)
    if not f.persistent:  # one CTA per SM assumed resident at a time
        s.slots = max(1, dev.sms // f.cluster_m)
    s.waves = _ceil(s.tiles, s.slots)
    s.wave_eff = s.tiles / (s.waves * s.slots)
    area = s.tiles // f.split_k * cm_rows * f.bn
    work = s.tiles  # in tile-sized pieces: what fills the waves
    sk_tiles, sk_ctas = step.stream_k_deal(*shape, min(s.slots, s.tiles)) if f.stream_k else (0, 1)
    if sk_tiles:  # the last wave's tiles in P pieces: a piece plus its fixup
        kt = _ceil(k, f.bk)
        rounds = (s.tiles - sk_tiles) / s.slots + step.stream_k_last_wave(kt, sk_ctas // sk_tiles) / kt
        s.wave_eff = s.tiles / (rounds * s.slots)
    if deal is not None:  # equal runs of k-tiles, one CTA each: the work, not the tile count, fills the waves
        # a deal counts CTAs (a multicast deal's pairs: no more clusters than fit at once); a cluster
        # reduction's or shared-load deal's clusters sit inside a GPC, so fewer of its CTAs are
        # resident at once
        clustered = deal.dsmem or deal.split and deal.cluster[0] > 1
        s.slots = step.resident_cluster_ctas(deal.cluster[0], dev.sms) if clustered else dev.sms
        s.tiles = deal.ctas
        s.waves = _ceil(deal.ctas, s.slots)
        work = deal.total / deal.units
        area = deal.tiles * f.bm * f.bn
        if deal.mc > 1:  # multicast pairs: whole tiles round by round, a pair's tile below C included
            s.waves, work = deal.rounds, deal.groups * deal.mc
            area = work * f.bm * f.bn
        s.wave_eff = work / (s.waves * s.slots)
        kp = deal.k_tiles * f.bk
    # Streaming from HBM, a wave needs only WAVE_HBM_SATURATION of the slots busy to draw the full
    # bandwidth: a last wave that fills them is no loss to the memory time, one below is.
    sat = max(1.0, WAVE_HBM_SATURATION * s.slots)
    s.mem_wave_eff = work / ((s.waves - 1) * s.slots + max(work - (s.waves - 1) * s.slots, sat))
    s.tile_eff = (m * n) / area
    s.padded_flop = 2.0 * area * kp
    peak = dev.peak_tflops * 1e12
    s.t_compute_us = s.padded_flop / peak * 1e6
    partials = deal.planes if deal is not None else (f.split_k if f.split_k > 1 else 0)
    # fp32 partials through memory, written and read back (a cluster sums them on chip). B
    # counts once for the split-K family's row blocks where they run side by side (at M = 128
    # the 64-row n128 entry measured 1.00-1.06x cuBLAS wherever its deal fills 128 SMs;
    # perf-notes item 28), else once per row block a CTA runs after another (b_passes)
    s.b_passes = b_passes(deal, _ceil(m, f.bm), f.bn * f.bk * ELEMENT_BYTES, dev.sms)
    reads = ELEMENT_BYTES * (M * K + N * K) + (s.b_passes - 1) * ELEMENT_BYTES * n * k
    mem = reads + ELEMENT_BYTES * M * N + 2 * 4 * M * N * partials
    s.t_memory_us = mem / (dev.hbm_tbs * 1e12) * 1e6
    copy_tbs = dev.copy_tbs or dev.hbm_tbs
    s.dirty_us = L2_STREAM_BYTES * -math.expm1(-reads / L2_STREAM_BYTES) / (copy_tbs * 1e12) * 1e6
    s.l2_bytes = operand_bytes(step, *shape)
    if L2_SM_GBS:  # the SMs that hold CTAs, each fed from L2 at most that fast
        busy = min(dev.sms if deal is None else s.slots, s.tiles * (f.cluster_m if deal is None else 1))
        s.t_l2_us = s.l2_bytes / (busy * L2_SM_GBS * (DSMEM_L2_SHARE if deal is not None and deal.dsmem else 1)
                                  * 1e9) * 1e6
    s.score_us = max(s.t_compute_us / s.wave_eff, s.t_memory_us / s.mem_wave_eff, s.t_l2_us)
    if deal is not None and deal.planes:  # the second launch, a fixed cost (~4 % at 1 x 14336 x 4096)
        s.pass_charge_us = step.split_overhead_bytes / (dev.hbm_tbs * 1e12) * 1e6
        s.score_us += s.pass_charge_us
    # the prediction prices the reduction by the fitted time instead (REDUCE_PASS_US, and the
    # cluster's exchange, which the score leaves out: item 90 measured the picks it would move slower)
    s.t_reduce_us = reduce_us(deal, f.bm * f.bn)
    s.bound = "compute" if s.t_compute_us >= s.t_memory_us else "memory"
    if s.t_l2_us > max(s.t_compute_us / s.wave_eff, s.t_memory_us / s.mem_wave_eff):
        s.bound = "L2"  # the operand tiles' traffic sets the score (MISALIGNED_B_COST charges compute-bound ones only)
    s.slowed = slowed = (b_misaligned and isinstance(step, Step) and f.cluster_m == 1 and s.bound == "compute"
                         and s.waves >= 2)
    if slowed:  # B's rows straddle sectors and no cluster shares its fetches
        s.score_us *= 1 + MISALIGNED_B_COST
    s.straddling_pairs = getattr(step, "multicast", 1) > 1  # their rows straddle sectors by construction
    if overhang:  # an N-major B's 64-wide blocks overhang the tile
        s.score_us *= 1 + OVERHANG_B_COST
        s.overhang = True
    s.predicted_us = predict_us(s, dev)
    s.why = (f"{s.bound}-bound ({s.t_compute_us:.1f} us compute, {s.t_memory_us:.1f} us memory, "
             f"{s.t_l2_us:.1f} us operand tiles from L2); "
             f"{s.tiles} tiles of {cm_rows if deal is None else f.bm}x{f.bn} on {s.slots} slots: {s.waves} wave(s), "
             f"{s.wave_eff:.0%} full; {s.tile_eff:.0%} of the computed area is C"
             + (f"; N, K padded to {shape[1]}, {shape[2]}" if s.padded else "")
             + (f"; {describe_deal(deal)}" if deal is not None else "")
             + (f"; B from HBM {s.b_passes} times (a CTA's row blocks one after another)" if s.b_passes > 1 else "")
             + (f"; stream-K: the last {sk_tiles} tiles in {sk_ctas // sk_tiles} pieces each" if sk_tiles else "")
             + (f"; B rows not whole 32-byte sectors, fetched without multicast: +{MISALIGNED_B_COST:.0%}"
                if slowed else "")
             + (f"; an N-major B's 64-wide blocks overhang the {f.bn}-wide tile: +{OVERHANG_B_COST:.0%}"
                if overhang else ""))
    return s


def predict_us(s: Score, dev: Device) -> float:
    """The kernel's time as the model predicts it: the score's roofline terms at the sustained
    tensor-core rate and the measured copy rate (the score's charges scaled alike), plus the
    fixed cost of a call. HBM carries the flush's dirty lines back beside the kernel's reads:
    that adds to the traffic, not to what the CTAs in flight can request (the wave term)."""
    base = max(s.t_compute_us / s.wave_eff, s.t_memory_us / s.mem_wave_eff, s.t_l2_us)
    if base <= 0:
        return LAUNCH_US + s.t_reduce_us
    t_mem = s.t_memory_us * dev.hbm_tbs / (dev.copy_tbs or dev.hbm_tbs)
    rates = max(s.t_compute_us / s.wave_eff / TENSOR_EFFICIENCY, t_mem / s.mem_wave_eff, t_mem + s.dirty_us,
                s.t_l2_us)
    kernel = (s.score_us - s.pass_charge_us) * rates / base * (1 + MISALIGNED_PAIRS_COST * s.straddling_pairs)
    # the reduction's time is a time, not a rate: it replaces the score's charge, unscaled
    return LAUNCH_US + kernel + s.t_reduce_us


def describe_deal(deal) -> str:
    """A split-K family's deal of work in words (families/smallm.py, Deal)."""
    if deal.mc > 1:
        return (f"deal: {deal.tiles} whole tiles of {deal.k_tiles} k-tiles in {deal.groups} groups of {deal.mc} along M "
                f"(each group a cluster sharing its B tiles by multicast) on {deal.ctas} CTAs, {deal.rounds} round(s)")
    if deal.split:  # shared loads
        return (f"deal: {deal.tiles} tiles x {deal.k_tiles} k-tiles, each tile in {deal.split} piece(s) of up to "
                f"{deal.units} k-tiles on {deal.ctas} CTAs in clusters of {deal.cluster[0]} sharing their loads"
                + (", the pieces through the workspace" if deal.split > 1 else ""))
    how = ("every tile whole" if deal.splits == 1
           else f"{deal.cluster[0]} pieces per tile summed in a cluster" if deal.dsmem
           else f"up to {deal.planes} pieces per tile through the workspace")
    return (f"deal: {deal.tiles} tiles x {deal.k_tiles} k-tiles in runs of {deal.units} over "
            f"{deal.ctas} CTAs, {how}")
