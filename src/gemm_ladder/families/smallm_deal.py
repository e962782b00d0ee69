"""The small-M family's deal model: how an entry's CTAs share the (tile, k-tile) units of a
shape (families/smallm.py explains the rule; splitk_deal.Deal is the deal itself; the
kernel's Segments walk it). `SmallMDeal` is mixed into `SmallM`: it reads the entry's tile,
ring and switches."""
from __future__ import annotations

import dataclasses

from ..cuda.device import H200
from .common import ConfigError
from .cost_model import SPLITK_DEAL_HBM_SATURATION
from .splitk_deal import CLUSTER_PIECES, Deal, cdiv

# The constants below count 64-wide k-tiles (DEAL_KT): an entry with 128-wide k-tiles (bk 128) scales
# them, so that its deal costs the same bytes as its 64-wide twin's (SmallMDeal.kt_scale)
DEAL_KT = 64
MIN_KT_PER_SPLIT = 4  # k-tiles per run at least: a shorter K range never fills the ring
CTA_OVERHEAD_KT = 3   # a CTA's fixed cost in k-tiles: ring fill latency + partial-tile store
SEGMENT_OVERHEAD_KT = 1  # each further tile piece of a run: drain, store, restart (the ring runs on)
MAX_WAVES = 4  # candidate grids: up to this many waves of CTAs
MAX_FIXUP_CTAS = H200.sms  # fixup deals: one resident wave (an owner waits for CTAs after it)
FIXUP_SLOT_READS = 2  # fixup: the owner's slot reads, in slots (~a k-tile's worth of L2 bytes each)
# The deal model's two measured constants (an entry may carry its own; docs/perf-notes.md,
# item 21): the share of the SMs that, streaming at once, draws (nearly) the full HBM bandwidth
# (cost_model.SPLITK_DEAL_HBM_SATURATION), and the fp32 pieces cost this many times their
# bytes' streaming time: 4, not the 2 of item 21, since every shape whose deal moved from 2 to
# 4 measured as fast or faster (item 33: 64 x 4096 x 4096 21.4 -> 20.1 us on 2 planes instead
# of 4, 192 x 2048 x 2048 14.3 -> 13.1 us)
WORKSPACE_COST = 4.0
# clusters of P of this kernel resident at once on the H200 (cuOccupancyMaxActiveClusters):
# clusters sit inside a GPC, so 4 and 8 fit 120 CTAs, not 128
CLUSTER_SLOTS = {2: 66, 4: 30, 8: 15}
# a cluster reduction's piece exchange and its two cluster barriers, in k-tiles. The deal rule
# keeps this and REDUCE_OVERHEAD_BYTES as the score does; the prediction prices both reductions
# by item 90's fit (cost_model.reduce_us), which moved picks to slower deals in the score
DSMEM_EXCHANGE_KT = 1
LADDER_WAVE_TILES = H200.sms
REDUCE_OVERHEAD_BYTES = 13e6  # the second launch's fixed cost: ~3.5 us of streaming at ~3.7 TB/s


class SmallMDeal:
    """What `SmallM` adds to deal out its work: tiles, k-tiles, the rule's deal and its cost."""

    def tiles(self, M: int, N: int) -> tuple[int, int]:
        """(m_tiles, n_tiles) of C."""
        return cdiv(M, self.bm), cdiv(N, self.bn)

    def k_tiles(self, K: int) -> int:
        return cdiv(K, self.bk)

    @property
    def kt_scale(self) -> float:
        """The deal constants' k-tiles (DEAL_KT wide) per k-tile of this entry: 1, or 0.5 at bk 128."""
        return DEAL_KT / self.bk

    @property
    def min_kt_per_split(self) -> int:
        return max(1, round(MIN_KT_PER_SPLIT * self.kt_scale))

    def make_deal(self, M: int, N: int, K: int, units: int, num_sms: int = LADDER_WAVE_TILES) -> "Deal":
        """The deal of runs of `units` k-tiles (clipped to 1 .. all the work); multicast pairs
        are dealt whole on `num_sms` SMs (plan passes the device's)."""
        if self.whole_tiles:
            if units != self.k_tiles(K):
                raise ConfigError(f"{self.key} runs whole tiles: units must be the k-tiles")
            return self.deal(M, N, K, num_sms)
        m_tiles, n_tiles = self.tiles(M, N)
        if self.shared_loads > 1:  # every tile in ceil(k_tiles / units) pieces
            kt = self.k_tiles(K)
            return Deal.shared(m_tiles * n_tiles, kt, cdiv(kt, min(max(units, 1), kt)), self.share_a, self.share_b)
        return Deal(m_tiles * n_tiles, self.k_tiles(K), units)

    def fixed_deal(self, M: int, N: int, K: int, splits: int, num_sms: int = LADDER_WAVE_TILES) -> "Deal":
        """Runs of ceil(k_tiles / splits) k-tiles: K split `splits` ways (fewer if the k-tiles
        run out, e.g. 3 k-tiles asked to split 4 ways give 3 pieces per tile; shared loads: every
        tile in `splits` pieces of floor or ceil(k_tiles / splits) k-tiles)."""
        if splits < 1:
            raise ValueError(f"splits must be >= 1, got {splits}")
        kt = self.k_tiles(K)
        if self.whole_tiles:
            if splits != 1:
                raise ConfigError(f"{self.key} runs whole tiles: splits must be 1")
            return self.deal(M, N, K, num_sms)
        if self.shared_loads > 1:
            m_tiles, n_tiles = self.tiles(M, N)
            return Deal.shared(m_tiles * n_tiles, kt, min(splits, kt), self.share_a, self.share_b)
        units = cdiv(kt, min(splits, kt))
        d = self.make_deal(M, N, K, units)
        if self.fixup:  # the kernel sums split tiles itself: always a fixup deal, one wave at most
            return Deal.hybrid(d.tiles, kt, min(d.ctas, MAX_FIXUP_CTAS))
        if self.cluster_reduce and kt % units == 0 and kt // units in CLUSTER_PIECES and d.units == units:
            return Deal(d.tiles, kt, units, dsmem=True)
        return d

    @staticmethod
    def resident_cluster_ctas(p: int, num_sms: int) -> int:
        """CTAs in clusters of p resident at once: clusters sit inside a GPC (the measured
        capacity, scaled to this SM count)."""
        return max(p, min(num_sms, CLUSTER_SLOTS[p] * p * num_sms // H200.sms // p * p))

    def deal_cost(self, M: int, N: int, num_sms: int, d: "Deal") -> float:
        """The deal's time in k-tile stages of the whole machine (module docstring)."""
        slots = self.resident_cluster_ctas(d.cluster[0], num_sms) if d.cluster[0] > 1 else num_sms
        saturation = SPLITK_DEAL_HBM_SATURATION if self.hbm_saturation is None else self.hbm_saturation
        sat = max(1, round(saturation * num_sms))
        over = CTA_OVERHEAD_KT + SEGMENT_OVERHEAD_KT * (d.segments - 1) + (DSMEM_EXCHANGE_KT if d.dsmem else 0)
        run = d.run + over * self.kt_scale
        full, rest = divmod(d.ctas, slots)
        cost = full * run * max(slots, sat) + (run * max(rest, sat) if rest else 0)
        if d.fixup and d.split_tiles:  # the owner reads the later pieces' slots
            cost += FIXUP_SLOT_READS * self.bm * self.bn * 4 / self.stage_bytes * num_sms
        if d.planes_bound:  # (the exact count would cost a loop per candidate)
            ws_cost = WORKSPACE_COST if self.workspace_cost is None else self.workspace_cost
            cost += (REDUCE_OVERHEAD_BYTES + ws_cost * 2 * d.planes_bound * M * N * 4) / self.stage_bytes
        return cost / num_sms

    @property
    def split_overhead_bytes(self) -> float:
        """What a deal with split tiles pays for its second launch, in bytes of streaming
        (the selection adds it to the memory time of such a deal)."""
        return REDUCE_OVERHEAD_BYTES

    def busiest_sm_bytes(self, M: int, N: int, K: int, num_sms: int) -> float:
        """The cost of the chosen deal in bytes: comparable between tile widths."""
        return self.deal_cost(M, N, num_sms, self.deal(M, N, K, num_sms)) * self.stage_bytes

    def deal(self, M: int, N: int, K: int, num_sms: int) -> "Deal":
        """The deal by the rule in the module docstring. An entry with 128-wide k-tiles takes the
        deal its 64-wide form's rule gives wherever its k-tiles cut K at the same places: the two
        measured on that deal, the 128-wide faster (docs/perf-notes.md item 123). Cuts only the wider
        k-tiles allow measured slower (K = 448's 4 k-tiles in two cluster pieces: 32 x 2048 x 448
        8.5 us against 7.8 whole), so elsewhere (its 64-wide form's runs an odd count) its own rule."""
        if self.bk != DEAL_KT and not (self.whole_tiles or self.shared_loads > 1 or self.fixup):
            # smallm.k64_twin's form (not importable here: smallm imports this module); of the fields
            # that function changes the rule reads only bk
            narrow = dataclasses.replace(self, bk=DEAL_KT).rule_deal(M, N, K, num_sms)
            same = self.same_cuts(narrow, M, N, K, num_sms)
            if same is not None:
                return same
        return self.rule_deal(M, N, K, num_sms)

    def same_cuts(self, narrow: "Deal", M: int, N: int, K: int, num_sms: int) -> "Deal | None":
        """This entry's deal with `narrow`'s CTAs, each tile cut at the same k positions (`narrow`
        counts 64-wide k-tiles), or None where this entry's k-tiles cannot cut it so."""
        scale = self.bk // DEAL_KT
        kt = self.k_tiles(K)
        if narrow.units >= narrow.k_tiles:
            d = self.make_deal(M, N, K, kt, num_sms)  # whole tiles
        elif narrow.dsmem:
            d = self.fixed_deal(M, N, K, narrow.k_tiles // narrow.units, num_sms)  # the same pieces, in clusters
        elif narrow.units % scale == 0:
            d = self.make_deal(M, N, K, narrow.units // scale, num_sms)  # runs of the same k-columns
        else:
            return None
        same = (d.ctas, d.dsmem, d.cluster, d.planes) == (narrow.ctas, narrow.dsmem, narrow.cluster, narrow.planes)
        return d if same else None

    def rule_deal(self, M: int, N: int, K: int, num_sms: int) -> "Deal":
        """The rule's deal in this entry's own k-tiles (module docstring)."""
        m_tiles, n_tiles = self.tiles(M, N)
        kt = self.k_tiles(K)
        if self.multicast > 1:  # whole tiles, a cluster per group, as many clusters as fit at once
            p = self.multicast
            return Deal.multicast(m_tiles, n_tiles, kt, p, max(1, CLUSTER_SLOTS[p] * num_sms // H200.sms))
        if self.k_alternate:  # whole tiles, one per CTA (shared loads: in clusters)
            if self.shared_loads > 1:
                return Deal.shared(m_tiles * n_tiles, kt, 1, self.share_a, self.share_b)
            return Deal(m_tiles * n_tiles, kt, kt)
        if self.shared_loads > 1:  # every tile in P pieces, one per CTA: the cheapest P up to MAX_WAVES waves
            deals = [Deal.shared(m_tiles * n_tiles, kt, p, self.share_a, self.share_b) for p in range(1, kt + 1)
                     if p == 1 or kt // p >= self.min_kt_per_split and m_tiles * n_tiles * p <= MAX_WAVES * num_sms]
            return min(deals, key=lambda d: (self.deal_cost(M, N, num_sms, d), d.planes_bound, -d.units))
        total = m_tiles * n_tiles * kt
        shortest = min(kt, self.min_kt_per_split)
        runs = ({cdiv(kt, s) for s in range(1, kt + 1)}                      # K split s ways
                | {cdiv(total, g) for g in range(1, MAX_WAVES * num_sms + 1)})  # equal runs over g CTAs
        if self.fixup:  # one resident wave: whole tiles round by round, the rest stream-K
            deals = [Deal.hybrid(m_tiles * n_tiles, kt, g) for g in range(1, min(num_sms, MAX_FIXUP_CTAS) + 1)]
            deals = [d for d in deals if d.units >= shortest or not d.split_tiles]
            return min(deals, key=lambda d: (self.deal_cost(M, N, num_sms, d), -d.ctas))
        deals = [Deal(m_tiles * n_tiles, kt, u) for u in runs if u >= shortest]
        if self.cluster_reduce:  # only where every cluster is resident at once: the pieces exist to fill
            # the SMs on few tiles; a second round of clusters loses to whole tiles (128 x 11008 x 4096
            # would take 344 CTAs in clusters of 4 on a cost tie)
            deals += [Deal(m_tiles * n_tiles, kt, kt // p, dsmem=True) for p in CLUSTER_PIECES
                      if kt % p == 0 and kt // p >= shortest
                      and m_tiles * n_tiles * p <= self.resident_cluster_ctas(p, num_sms)]
        return min(deals, key=lambda d: (self.deal_cost(M, N, num_sms, d), d.planes_bound, not d.dsmem, -d.units))

    def plan_deal(self, M: int, N: int, K: int, num_sms: int, *, splits: int | None = None,
                  units: int | None = None, wave: int | None = None) -> Deal:
        """The deal `plan` runs: the rule's, or (experiments, tests) a fixup entry's on `wave`
        CTAs, runs of `units` k-tiles, or K split `splits` ways, in that order of precedence."""
        if wave is not None and self.fixup:  # a fixup deal on `wave` CTAs (experiments, tests)
            m_tiles, n_tiles = self.tiles(M, N)
            return Deal.hybrid(m_tiles * n_tiles, self.k_tiles(K), wave)
        if units is not None:  # runs of `units` k-tiles (experiments, tests); fixup: on that many CTAs
            d = self.make_deal(M, N, K, units, num_sms)
            if self.fixup:
                d = Deal.hybrid(d.tiles, d.k_tiles, min(d.ctas, MAX_FIXUP_CTAS))
            return d
        if splits is not None:
            return self.fixed_deal(M, N, K, splits, num_sms)
        return self.deal(M, N, K, num_sms)
