// fp8_pieces.cuh — the order of a consumer's MMAs and promotions with overlapped pieces
// (GL_FP8_OVERLAP_PIECES, fp8_gemm.cu): each k-tile's MMAs in PIECES column pieces, piece h in
// partial sum h % 2 (PIECES is even, so a piece's partial is the same registers in every
// k-tile), and each piece's partial promoted while the next piece's MMAs run — across the
// k-tile boundary too: k-tile kt + 1's first piece is issued before kt's last is promoted.
//
// Every wait keeps one group in flight but the last (wait_group 1, then 0), and its count is a
// constant where it stands: a count chosen by a branch makes ptxas serialize every wgmma of the
// kernel. ptxas (NVRTC 13.0 and 13.5) serializes them too where one straight tail follows the
// loop (the reads of the partial carried in flight across the loop's back edge are flagged as
// C7514): the loop stops with one or two k-tiles left and the tail writes each case out, as the
// overlap across k-tiles' loop does (found by building the variants on the CPU).
#pragma once
#include "gl_wgmma.cuh"

// issue(kt, h): wait for kt's stage when h == 0, then piece h's MMAs into partial h % 2 and a
// commit; retire(kt, h): after the wait that retired piece h of kt, promote its partial (and
// release kt's stage when h is the last piece). kt and h are passed as ints, constants where
// h indexes registers once the calls are inlined and unrolled.
template <int PIECES, class Issue, class Retire>
GL_DEVICE void overlapped_pieces(int k0, int k1, Issue issue, Retire retire) {
  static_assert(PIECES >= 2 && PIECES % 2 == 0, "two partials in turn: an even number of pieces");
  auto pieces_after_first = [&](int kt) {
#pragma unroll
    for (int h = 1; h < PIECES; ++h) {
      issue(kt, h);
      wgmma_wait<1>();
      retire(kt, h - 1);
    }
  };
  auto into_next = [&](int kt) {  // kt + 1's first piece in flight, kt's last promoted
    issue(kt + 1, 0);
    wgmma_wait<1>();
    retire(kt, PIECES - 1);
  };
  if (k0 >= k1) return;
  issue(k0, 0);
  int kt = k0;
  for (; kt + 2 < k1; ++kt) {
    pieces_after_first(kt);
    into_next(kt);
  }
  if (kt + 1 < k1) {  // two k-tiles left
    pieces_after_first(kt);
    into_next(kt);
    pieces_after_first(kt + 1);
    wgmma_wait<0>();
    retire(kt + 1, PIECES - 1);
  } else {
    pieces_after_first(kt);
    wgmma_wait<0>();
    retire(kt, PIECES - 1);
  }
}
