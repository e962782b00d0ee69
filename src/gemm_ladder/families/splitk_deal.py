"""How the small-M family's CTAs share the work: the deal of (tile, k-tile) units
(families/smallm.py explains the rule that picks one; kernels/smallm_splitk.cu's Segments
walks the same deal)."""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

CLUSTER_PIECES = (2, 4, 8)  # cluster reduction: pieces per tile (portable cluster sizes dividing BN / 4)


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class Deal:
    """tiles x k_tiles units of work, tile-major, in runs of `units` per CTA (the kernel's
    Segments walks the same deal; its reduction recomputes a tile's pieces from it). dsmem:
    runs of k_tiles / P with P in CLUSTER_PIECES, launched as clusters of P CTAs (one tile
    each) that sum the pieces through distributed shared memory instead of a workspace."""
    tiles: int
    k_tiles: int
    units: int
    dsmem: bool = False
    fixup: bool = False  # split tiles summed in the kernel (GL_FIXUP entries): no planes
    wave: int = 0  # fixup: the CTAs of its one wave (whole tiles round by round, then runs of `units`)
    # multicast entries: clusters of `mc` CTAs along M walk groups of mc vertically adjacent
    # whole tiles (the kernel's PairWalk): `groups` of them on `clusters` clusters
    mc: int = 1
    groups: int = 0
    clusters: int = 0
    # shared-load entries: every tile in `split` pieces (piece p: k-tiles [p K / split,
    # (p + 1) K / split), units the longest), one per CTA, launched as clusters of share_a x
    # share_b CTAs (along N x M) that run the same piece of adjacent tiles (the kernel's
    # shared_cta); split tiles' pieces go through the workspace
    share_a: int = 1
    share_b: int = 1
    split: int = 0

    @classmethod
    def multicast(cls, m_tiles: int, n_tiles: int, k_tiles: int, mc: int, max_clusters: int) -> "Deal":
        """Whole tiles in groups of `mc` along M, one cluster per group, at most `max_clusters`
        clusters (the rest round by round)."""
        groups = cdiv(m_tiles, mc) * n_tiles
        return cls(m_tiles * n_tiles, k_tiles, k_tiles, mc=mc, groups=groups, clusters=min(groups, max_clusters))

    @classmethod
    def hybrid(cls, tiles: int, k_tiles: int, grid: int) -> "Deal":
        """A fixup deal on `grid` CTAs: floor(tiles / grid) rounds of whole tiles, then the
        remaining tiles' units in equal runs (the kernel's Segments under GL_FIXUP)."""
        rest = (tiles - tiles // grid * grid) * k_tiles
        return cls(tiles, k_tiles, cdiv(rest, grid) if rest else k_tiles, fixup=True, wave=grid)

    def __post_init__(self) -> None:
        object.__setattr__(self, "units", max(1, min(self.units, self.total)))
        if self.mc > 1 and (self.units != self.k_tiles or self.dsmem or self.fixup or self.clusters < 1):
            raise ValueError("a multicast deal runs whole tiles on at least one cluster")
        if self.share_a * self.share_b > 1 and (not 1 <= self.split <= self.k_tiles or self.dsmem or self.fixup
                                                or self.mc > 1 or self.units != cdiv(self.k_tiles, self.split)):
            raise ValueError(f"a shared-load deal runs every tile in `split` pieces (k_tiles {self.k_tiles}, split "
                             f"{self.split}, units {self.units}) through the workspace")
        if self.dsmem and (self.k_tiles % self.units or self.k_tiles // self.units not in CLUSTER_PIECES):
            raise ValueError(f"a cluster reduction needs runs of k_tiles / P, P in {CLUSTER_PIECES} "
                             f"(k_tiles {self.k_tiles}, units {self.units})")

    @property
    def total(self) -> int:
        return self.tiles * self.k_tiles

    @classmethod
    def shared(cls, tiles: int, k_tiles: int, split: int, share_a: int, share_b: int) -> "Deal":
        """A shared-load deal: every tile in `split` pieces, one per CTA."""
        return cls(tiles, k_tiles, cdiv(k_tiles, split), share_a=share_a, share_b=share_b, split=split)

    @property
    def kernel_units(self) -> int:
        """The split-K kernel's and the reduction's `units` argument: the run length, or a
        shared-load deal's pieces per tile."""
        return self.split if self.split else self.units

    @property
    def ctas(self) -> int:
        if self.split:
            return self.tiles * self.split
        if self.mc > 1:
            return self.mc * self.clusters
        return self.wave if self.wave else cdiv(self.total, self.units)

    @property
    def rounds(self) -> int:
        """Multicast: the groups each cluster walks at most (else 1)."""
        return cdiv(self.groups, self.clusters) if self.mc > 1 else 1

    @property
    def dp_rounds(self) -> int:
        """Fixup: rounds of whole tiles before the stream-K part."""
        return self.tiles // self.wave if self.wave else 0

    @property
    def run(self) -> int:
        """k-tiles of the longest run."""
        if self.mc > 1:
            return self.rounds * self.k_tiles
        return self.dp_rounds * self.k_tiles + (self.units if not self.wave or self.tiles % self.wave else 0)

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.ctas, 1, 1)

    @property
    def cluster(self) -> tuple[int, int, int]:
        """The launch's cluster shape: (P, 1, 1) for a cluster reduction, (mc, 1, 1) for a
        multicast deal, (share_a x share_b, 1, 1) for a shared-load deal, else (1, 1, 1)."""
        if self.mc > 1 or self.share_a * self.share_b > 1:
            return (max(self.mc, self.share_a * self.share_b), 1, 1)
        return (self.k_tiles // self.units, 1, 1) if self.dsmem else (1, 1, 1)

    def cta_of_block(self, block: int, m_tiles: int) -> int:
        """The CTA of the deal (its run of units) that launch block `block` runs, as the kernel's
        Segments computes it (multicast pairs walk tiles otherwise, PairWalk). Aligned pieces
        without a cluster go piece-major (block b: piece b // tiles of tile b % tiles); shared
        loads: a cluster of share_a x share_b blocks runs one piece of share_b x share_a adjacent
        tiles (rank r: column r % share_a, row r // share_a)."""
        pieces = self.split or self.k_tiles // self.units
        cluster = self.share_a * self.share_b
        if cluster > 1:
            r, g = block % cluster, block // cluster
            p, h, groups = g % pieces, g // pieces, m_tiles // self.share_b
            return ((h // groups * self.share_a + r % self.share_a) * m_tiles + h % groups * self.share_b
                    + r // self.share_a) * pieces + p
        if not (self.fixup or self.dsmem) and self.k_tiles % self.units == 0:
            return block % self.tiles * pieces + block // self.tiles
        return block

    def piece_k_tiles(self, piece: int) -> tuple[int, int]:
        """A shared-load deal's piece: its k-tiles [k0, k1) (the kernel's shared Segments)."""
        return piece * self.k_tiles // self.split, (piece + 1) * self.k_tiles // self.split

    def pieces(self, tile: int) -> int:
        """How many CTAs compute a part of this tile (1: it is written whole)."""
        if self.split:
            return self.split
        first = tile * self.k_tiles // self.units
        return (tile * self.k_tiles + self.k_tiles - 1) // self.units - first + 1

    @functools.cached_property
    def planes(self) -> int:
        """Workspace planes: the most pieces of any split tile (0: no tile is split, or the
        cluster sums them). Tile starts repeat with period units / gcd(k_tiles, units): with
        at least that many tiles every start occurs and the most is planes_bound; else the
        tiles are counted."""
        if self.split:
            return self.split if self.split > 1 else 0
        if self.dsmem or self.fixup or self.units % self.k_tiles == 0:
            return 0
        period = self.units // math.gcd(self.k_tiles, self.units)
        if self.tiles >= period:
            return self.planes_bound
        most = max(self.pieces(t) for t in range(self.tiles))
        return most if most > 1 else 0

    @property
    def planes_bound(self) -> int:
        """At most this many pieces per tile: a tile starting g before a run's end (g =
        gcd(k_tiles, units), the finest start offset) reaches furthest."""
        if self.split:
            return self.split if self.split > 1 else 0
        if self.dsmem or self.fixup or self.units % self.k_tiles == 0:
            return 0
        g = math.gcd(self.k_tiles, self.units)
        return cdiv(self.units - g + self.k_tiles, self.units)

    @property
    def split_tiles(self) -> bool:
        """Some tile falls to more than one CTA."""
        if self.split:
            return self.split > 1
        rest = self.total - self.dp_rounds * self.ctas * self.k_tiles if self.wave else self.total
        return not self.dsmem and rest > 0 and self.units % self.k_tiles != 0 and rest > self.units

    @property
    def segments(self) -> int:
        """The most tile pieces one run touches (multicast: whole tiles, round by round)."""
        if self.mc > 1:
            return self.rounds
        if self.split:
            return 1
        if self.units % self.k_tiles == 0:
            return self.units // self.k_tiles
        if self.k_tiles % self.units == 0:
            return 1
        return cdiv(self.units, self.k_tiles) + 1

    @property
    def splits(self) -> int:
        """Pieces per tile at most (1: every tile whole), as the selection model counts them."""
        return self.cluster[0] if self.dsmem else max(1, self.planes)


def fixup_flag_floats(ctas: int, consumers: int) -> int:
    """The flags' share of a fixup buffer, in floats: one int per (CTA, consumer), padded to
    256 bytes (the kernel's fixup_slot computes the same from its grid)."""
    return cdiv(ctas * consumers * 4, 256) * 64
