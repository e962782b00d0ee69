"""Stream-K for the production GEMM (the gemm:128x256sk entry, GL_STREAM_K): the host's side of the deal.

The last `sk_tiles` tiles of a persistent step's order (the remainder of a ragged last wave)
are not dealt whole: each is split into P pieces of equal k-ranges, computed by P CTAs after
their whole rounds (sk_ctas = P x sk_tiles), and summed in the kernel in column slices
(kernels/gl_fixup.cuh, step9_multi_consumer.cu). Here: which deal pays (`deal`, from a wave
model in k-tiles with the fixup's measured costs), which deals the kernel can run
(`problem`), and the workspace it needs (`workspace_floats`). Measured in
docs/perf-notes.md, item 24.
"""
from __future__ import annotations

from .common import EPI_CHUNK_COLS

# The fixup, in k-tiles of MMA time (~0.65 us each for 128 x 256 x 64 on the H200), from a
# trace of 512 x 11008 x 4096 (experiments/streamk): a whole 128 KB fp32 slot stored and its
# flag raised (~3.5 us), and one read back by one SM (~2.2 us: ~60 GB/s per SM).
PUBLISH = 5.4
READ = 3.4


def deal(step, M: int, N: int, K: int, ctas: int) -> tuple[int, int]:
    """(sk_tiles, sk_ctas) of a stream-K step on a grid of `ctas`: the remainder of a ragged
    last wave split into P equal k-pieces each, on P x remainder CTAs, with the P that makes
    the split wave shortest (`last_wave`) if that beats one whole tile; else (0, 1): every
    tile whole."""
    if not step.stream_k:
        return 0, 1
    tiles, kt = step.tiles(M, N), -(-K // step.bk)
    rest = tiles % ctas
    if tiles <= ctas or rest == 0:
        return 0, 1
    best, found = float(kt), (0, 1)
    for p in range(2, min(ctas // rest, step.bn // EPI_CHUNK_COLS, kt) + 1):
        wave = last_wave(step, kt, p)
        if wave < best and not problem(step, M, N, K, ctas, rest, rest * p):
            best, found = wave, (rest, rest * p)
    return found


def last_wave(step, k_tiles: int, pieces: int) -> float:
    """The split wave's length in k-tiles: a piece's share of the tile, then its fixup —
    publishing the chunks the other pieces write (PUBLISH per whole slot) and reading the
    others' parts of its own chunks (READ per whole slot), for the piece with the most of it
    (the column slices)."""
    chunks = step.bn // EPI_CHUNK_COLS
    own = [(j + 1) * chunks // pieces - j * chunks // pieces for j in range(pieces)]
    fixup = max(PUBLISH * (chunks - n) / chunks + READ * (pieces - 1) * n / chunks for n in own)
    return -(-k_tiles // pieces) + fixup


def problem(step, M: int, N: int, K: int, ctas: int, sk_tiles: int, sk_ctas: int) -> str:
    """Why the kernel cannot split `sk_tiles` tiles over `sk_ctas` of its `ctas` CTAs ("" if it
    can): each split tile is P = sk_ctas / sk_tiles pieces, one per CTA, 2 <= P <= the tile's
    64-column chunks (each piece writes a slice of them) and P <= its k-tiles; the units are
    counted in 32-bit integers."""
    tiles, kt = step.tiles(M, N), -(-K // step.bk)
    if not 0 <= sk_tiles <= tiles:
        return f"sk_tiles={sk_tiles} is outside 0..{tiles} (the tiles of C)"
    if not sk_tiles:
        return ""
    if not 1 <= sk_ctas <= ctas:
        return f"sk_ctas={sk_ctas} is outside 1..{ctas} (the CTAs of the grid)"
    p, chunks = sk_ctas // sk_tiles, step.bn // EPI_CHUNK_COLS
    if p * sk_tiles != sk_ctas or not 2 <= p <= min(chunks, kt):
        return (f"sk_ctas={sk_ctas} is not P x sk_tiles={sk_tiles} with 2 <= P <= {min(chunks, kt)} "
                f"(pieces per tile: at most its {chunks} chunks and {kt} k-tiles)")
    if sk_tiles * kt >= 2**31:
        return f"sk_tiles={sk_tiles} x {kt} k-tiles is too many units for 32-bit counts"
    return ""


def workspace_floats(step, ctas: int) -> int:
    """A stream-K launch's workspace on `ctas` CTAs, in floats: one flag per (CTA, consumer),
    padded to 256 bytes, then a BM x BN fp32 slot per CTA (gl_fixup.cuh)."""
    return -(-ctas * step.consumers * 4 // 256) * 64 + ctas * step.bm * step.bn
