"""Which kernel for (M, N, K, dtype): the library's one choice, priced by the cost model
(families/cost_model.py), not a table of tuned shapes.

`choose` scores every candidate (CANDIDATES: the production GEMM family's and the small-M
family's entries, by key; adding a kernel family is one entry) with the cost model. Where B's
rows are not whole 32-byte sectors and the best candidate is charged for it, gemm:128x256c2
(the 2-CTA cluster) joins the candidates (MISALIGNED_B_CANDIDATES). Scores within TIE of the best are treated as equal (the model is
not finer than that); among those, from K = 2048 (MORE_ISSUERS_MIN_KT), a candidate running the
same tile with the same traffic as another but with fewer MMA warpgroups drops out (measured,
the small-M family's two consumers on 128 x 128, `smallm:c2n128`, against gemm:128x128's one in
a single wave: 512 x 4096² 0.98 against 0.94-0.95, 128 x 11008 x 4096 0.96 against 0.92,
docs/perf-notes.md item 41; on a short K the one consumer measured ahead, 1280^3, item 115). An
entry that only splits another's whole tiles' k-tiles between two MMA warpgroups
(`smallm:n64alt`, `k_alternate`) never competes: it stands in for a chosen candidate with the
same tile and traffic (n64 where n64's own deal is whole tiles; item 104); then
the pick is the candidate moving the fewest operand bytes from L2 into shared memory
(`operand_bytes`: each CTA reads its A and B tiles once per k-tile, a cluster reads its
shared operand once), then the one computing the least padding, then registry order.
A shape no candidate accepts (K or N not a multiple of 8) is scored at the shape the
library pads it to, and the choice says so.

The rule (`step_for`), computed once per configuration:
1. the selection's pick for the shape: `pick(M, N, K, dtype, SMs)` (memoized), among
   CANDIDATES (the gemm family's entries and the small-M family's);
2. the small-M family takes the shapes it accepts with N and K rounded up to 8 (TMA
   zero-fills the K edge and B's rows past N; the result's rows are N rounded up to 8 long,
   and the kernel writes the padding columns as zeros; above 128 rows, K-major rows that are
   not whole 32-byte sectors only with an N-major b: smallm.ALIGNED_K); otherwise the best
   ladder candidate;
3. an operand stored MN-major (an M-major `a`, i.e. a transposed view; an N-major `b`,
   i.e. a row-major (K, N) `b`, the usual `a @ b`) is read MN-major — in place, or from an
   MN-major copy (a plain copy) when TMA cannot take its strides or address — by a kernel
   that reads it so (`common.reads_mn`: a Step with `mn_major` reads both, the small-M
   family an N-major `b` only). If the pick is a ladder step that does not, the best
   candidate that does (gemm:128x256) runs instead when it accepts the shape; else the operand is
   copied K-major. The small-M family with an M-major `a` keeps the shape, `a` copied, when
   the selection's model (cost_model.score) prices its time plus the copy (COPY_LAUNCH_US for the
   extra torch kernel's host work and launch, plus the operand read and written once at the
   measured rate of a transposing copy, TRANSPOSE_COPY_TBS) below the other candidate's time;
   else that candidate reads it in place. E.g. 16x4096x4096 with a transposed-view a: the
   copy of 128 KB costs ~6.4 us against gemm:128x256's 58 us -> copy. A row-major `b` at decode
   shapes is read in place by the family (its GL_B_MN build): copying it cost ~10x the GEMM
   (16 x 4096 x 14336: 416 against 42 us for torch.matmul, docs/perf-notes.md item 29).
4. B rows that are not whole 32-byte sectors (`b_misaligned`, from the row stride the
   kernel reads B with: a row-major b of N = 8 mod 16 columns, a K-major b of K = 8 mod 16)
   slow the kernels that fetch B alone, not gemm:128x256c2, whose cluster multicasts it: the
   selection charges them (cost_model.MISALIGNED_B_COST) and considers gemm:128x256c2 too. E.g.
   3000x5000x4000 with a row-major b (rows of 10000 bytes): gemm:128x192 235 us, gemm:128x256c2 184 us
   (docs/perf-notes.md, item 32).
5. An N-major `b` on a tile width that is not a multiple of 64 (gemm:128x176, gemm:128x224, gemm:128x240) travels
   in whole 64-wide blocks that overhang the tile: the selection charges it
   (cost_model.OVERHANG_B_COST; measured 0-14 % slower than the same width reading B K-major, docs/
   perf-notes.md items 35 and 57), so such a width runs only where its waves gain more (512 x
   14336 x 4096: gemm:128x224 1.10 x cuBLAS against gemm:128x256's 1.00). A width whose tiles do not start at
   32-byte offsets (gemm:128x232) does not take an N-major `b` (25-45 % slower).
6. A tile width that suits only a single wave read K-major (ONE_WAVE_CANDIDATES: gemm:128x144)
   is a candidate only there: 1536^3 with a K-major b runs 132 tiles of 128 x 144, one full wave.
`step=` forces a step; MN-major operands go to it directly when it reads them so
(`common.reads_mn`), else they are copied.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field

from ..cuda.device import H200
from ..families.common import ShapeError, reads_mn
from ..families.cost_model import (COPY_LAUNCH_US, ELEMENT_BYTES, TRANSPOSE_COPY_TBS, Device, Score, rows_misaligned,
                                   score)
from ..families.keys import get_step
from ..families.smallm import MORE_ISSUERS_MIN_KT
from ..families.ladder_step import Step
from .layout import MAX_DIM, round_up

# Candidate kernels, in order of preference on a tie. A key that is not (yet) registered is
# listed as unavailable, never picked. Measured on the H200 (docs/perf-notes.md, entries 6-9):
# the 2-CTA multicast costs more than the L2 traffic it saves (the cluster kernels at or below
# their cluster-free forms), so the candidates are cluster-free, which the model's traffic
# tie-break would otherwise pass over. gemm:128x128 (one consumer, depth 5) stands for its
# geometry: measured 1-6 % ahead of ladder step 7 at depth 4 at every M = 128 .. 2048 suite
# shape (item 21).
CANDIDATES: list[str] = ["gemm:128x256", "gemm:128x128", "gemm:128x240", "gemm:128x232", "gemm:128x224",
                         "gemm:128x192", "gemm:128x176", "smallm:n128", "smallm:n128m2", "smallm", "smallm:c2n128",
                         "smallm:c2", "smallm:c2n64", "smallm:c2n64d", "smallm:n64s", "smallm:n64", "smallm:n64alt",
                         "smallm:n32"]
TIE = 0.01  # measured differences of 1-3 % between tile shapes at large M x N track the wave model (item 25)
# The same tile with more MMA warpgroups replaces one with fewer only from MORE_ISSUERS_MIN_KT
# k-tiles of 64 (families/smallm.py, smallm:n64alt's threshold too): on a long K the issue rate
# sets the pace (items 41, 104), on a short one the fill and the epilogue do, and there the
# production kernel's one consumer measured ahead (1280^3: gemm:128x128 0.979 / 0.996 x cuBLAS
# against smallm:c2n128's 0.950 / 0.954, item 110; the autotuned suite at d073294 alike, 13.10 /
# 12.86 against 13.95 / 13.31 us).
MISALIGNED_B_CANDIDATES: list[str] = ["gemm:128x256c2"]  # joins the candidates where B's rows slow the others
# Candidates only where their tiles fit in one wave and B is read K-major (rule 6). Measured
# (docs/perf-notes.md items 107, 110): gemm:128x144 fills the wave at 1536^3 (132 tiles):
# 0.968 / 0.956 x cuBLAS against gemm:128x176's 0.903 / 0.887 with a K-major b, but 0.821 / 0.802
# against 0.877 / 0.854 with a row-major one (its 64-wide N-major blocks overhang the tile by 48
# columns); over several waves narrower tiles lost what the wave model gave them (item 60).
ONE_WAVE_CANDIDATES: list[str] = ["gemm:128x144"]


@dataclass
class Choice:
    M: int
    N: int
    K: int
    dtype: str
    device: Device
    scores: list[Score] = field(default_factory=list)
    pick: Score | None = None
    reason: str = ""

    @property
    def step(self) -> Step:
        if self.pick is None:
            raise LookupError(f"no candidate kernel takes {self.M}x{self.N}x{self.K}: {self.reason}")
        return get_step(self.pick.key)

    @property
    def kernel_shape(self) -> tuple[int, int, int]:
        return self.pick.shape if self.pick else (self.M, self.N, self.K)

    def as_dict(self) -> dict:
        return {"M": self.M, "N": self.N, "K": self.K, "dtype": self.dtype,
                "device": dataclasses.asdict(self.device),
                "pick": self.pick.key if self.pick else None, "reason": self.reason,
                "candidates": [dataclasses.asdict(s) for s in self.scores]}


def _candidate_steps(candidates) -> list[tuple[str, Step | None]]:
    out = []
    for c in candidates:
        if isinstance(c, Step):
            out.append((c.key, c))
            continue
        try:
            out.append((c, get_step(c)))
        except KeyError:
            out.append((c, None))
    return out


def candidate_keys(b_misaligned: bool = False) -> list[str]:
    """The default candidates (the one-wave ones included: `choose` drops them elsewhere); with B
    rows that are not whole sectors, gemm:128x256c2 too."""
    return CANDIDATES + ONE_WAVE_CANDIDATES + (MISALIGNED_B_CANDIDATES if b_misaligned else [])


def choose(M: int, N: int, K: int, dtype: str = "float16", *, device: Device = Device(),
           candidates=None, b_misaligned: bool = False, b_mn: bool = False) -> Choice:
    """Score every candidate on (M, N, K) and pick one (module docstring). b_misaligned: B's
    rows (as the kernel reads them) are not whole 32-byte sectors (`rows_misaligned`); b_mn:
    B is read N-major (what the small-M family takes depends on it)."""
    ch = Choice(M, N, K, dtype, device)
    alternating = set()  # entries splitting a whole tile's k-tiles between two MMA warpgroups (smallm:n64alt)
    for key, st in _candidate_steps(candidate_keys(b_misaligned) if candidates is None else candidates):
        if getattr(st, "k_alternate", False):
            alternating.add(key)
        if st is None or st.model_only:
            ch.scores.append(Score(key, available=False, why="not in the step registry" if st is None
                                   else "model only: no kernel yet"))
            continue
        if dtype not in st.dtypes:
            ch.scores.append(Score(key, st.label, why=f"does not support {dtype}"))
            continue
        ch.scores.append(score(st, M, N, K, device, b_misaligned, b_mn))
    for s in ch.scores:  # rule 6: one wave, B K-major
        if s.key in ONE_WAVE_CANDIDATES and s.accepted and (b_mn or s.waves > 1):
            s.accepted = False
            s.why = ("a candidate only where its tiles fill one wave and B is read K-major "
                     f"(here {'B is N-major' if b_mn else f'{s.waves} waves'}); {s.why}")
    ok = [s for s in ch.scores if s.accepted]
    extra = [s for s in ok if b_misaligned and s.key in MISALIGNED_B_CANDIDATES and s.key not in CANDIDATES]
    rest = [s for s in ok if s not in extra]
    if extra and rest and not min(rest, key=lambda s: s.score_us).slowed:
        for s in extra:  # only where the misalignment is what the best of the others pays
            s.why += "; considered only where B's misalignment slows the best of the others"
        ok = rest
    # entries that only add MMA warpgroups to another's whole tiles (smallm:n64alt) never compete:
    # they stand in for that one where it is chosen with the same tile and traffic (below)
    alternates = [s for s in ok if s.key in alternating]
    ok = [s for s in ok if s not in alternates]
    if not ok:
        ch.reason = "no candidate accepts the shape, even padded"
        return ch
    best = min(s.score_us for s in ok)
    near = [s for s in ok if s.score_us <= best * (1 + TIE)]
    # the same tile and traffic with more MMA issuers replaces one with fewer on a long K (module docstring)
    same = lambda t, s: t.tile == s.tile and t.l2_bytes == s.l2_bytes and t.padded == s.padded  # noqa: E731
    fewer = [s for s in near if any(same(t, s) and t.consumers > s.consumers for t in near)]
    short_k = bool(fewer) and -(-K // 64) < MORE_ISSUERS_MIN_KT
    if not short_k:
        near = [s for s in near if s not in fewer]
    stands_in = {}  # alternate key -> the key it replaces
    for i, s in enumerate(near):
        t = next((t for t in alternates if same(t, s) and t.score_us <= s.score_us * (1 + TIE)), None)
        if t is not None:
            near[i], stands_in[t.key] = t, s.key
    # unpadded before padded, an N-major B without overhang before one with (its cost is a
    # round figure), whole tiles before pieces summed (the exchange or second pass the score does
    # not see: perf-notes item 116), then least L2 traffic, then least wasted work, then registry order
    tie_key = lambda s: (s.padded, s.overhang, s.t_reduce_us > 0, s.l2_bytes, s.padded_flop)  # noqa: E731
    ch.pick = min(near, key=tie_key)
    others = [s.key for s in near if s is not ch.pick]
    equal = [s.key for s in near if s is not ch.pick and tie_key(s) == tie_key(ch.pick)]
    summing = [s.key for s in near if tie_key(s)[:2] == tie_key(ch.pick)[:2] and tie_key(s)[2] > tie_key(ch.pick)[2]]
    why_first = (f"listed before {', '.join(equal)} in select.CANDIDATES, equal on every tie-break" if equal else
                 f"{ch.pick.key} sums no pieces of a tile, where {', '.join(summing)} would" if summing else
                 f"{ch.pick.key} moves the fewest operand bytes, {ch.pick.l2_bytes / 1e6:.0f} MB")
    ch.reason = (f"lowest modelled time {ch.pick.score_us:.1f} us"
                 + (f" (within {TIE:.0%} of it: {', '.join(others)}; {why_first})" if others else "")
                 + f"; {ch.pick.why}")
    if short_k:
        ch.reason += (f"; on a short K (under {MORE_ISSUERS_MIN_KT * 64}) more MMA warpgroups on the same tile do not "
                      "take a tie (select.MORE_ISSUERS_MIN_KT)")
    if ch.pick.key in stands_in:
        ch.reason += (f"; {ch.pick.key} stands in for {stands_in[ch.pick.key]}: the same tiles, two MMA warpgroups "
                      "alternating k-tiles")
    return ch


@functools.lru_cache(maxsize=4096)
def pick(M: int, N: int, K: int, dtype: str = "float16", sms: int = H200.sms, b_misaligned: bool = False,
         b_mn: bool = False) -> str:
    """The chosen step key, memoized: cheap enough for a matmul call path."""
    return choose(M, N, K, dtype, device=Device(sms=sms), b_misaligned=b_misaligned, b_mn=b_mn).step.key


def explain_rows(ch: Choice) -> list[dict]:
    """One dict per candidate, formatted for a table."""
    rows = []
    for s in ch.scores:
        mark = "pick" if ch.pick is s else ("" if s.accepted else "-")
        if not s.accepted:
            rows.append({"": mark, "kernel": s.key, "why": s.why})
            continue
        rows.append({"": mark, "kernel": s.key, "shape run": "x".join(map(str, s.shape)),
                     "tiles": s.tiles, "waves": f"{s.waves} ({s.wave_eff:.0%})",
                     "tile eff": f"{s.tile_eff:.0%}", "compute us": f"{s.t_compute_us:.1f}",
                     "memory us": f"{s.t_memory_us:.1f}", "L2 us": f"{s.t_l2_us:.1f}", "score us": f"{s.score_us:.1f}",
                     "why": s.bound + ("-bound, padded" if s.padded else "-bound")})
    return rows


@functools.lru_cache(maxsize=64)
def _pick_among(M: int, N: int, K: int, dtype: str, sms: int, keys: tuple[str, ...],
                b_misaligned: bool = False, b_mn: bool = False) -> str | None:
    """choose's pick among `keys`; None when none of them accepts the shape."""
    ch = choose(M, N, K, dtype, device=Device(sms=sms), candidates=list(keys), b_misaligned=b_misaligned, b_mn=b_mn)
    return ch.pick.key if ch.pick else None


def _candidates(want, b_misaligned: bool = False) -> tuple[str, ...]:
    out = []
    for key in candidate_keys(b_misaligned):
        try:
            st = get_step(key)
        except KeyError:
            continue
        if want(st):
            out.append(key)
    return tuple(out)


@functools.lru_cache(maxsize=4096)
def step_for(M: int, N: int, K: int, dtype: str = "float16", sms: int = H200.sms, a_mn: bool = False,
             b_mn: bool = False, b_misaligned: bool = False):
    """The kernel `matmul` runs for (M, N, K) >= 1 when `a_mn`/`b_mn` say an operand could be
    read in place only MN-major and `b_misaligned` that B's rows are not whole 32-byte sectors
    (module docstring); a Step or a kernel-family entry."""
    mis = b_misaligned
    try:
        st = get_step(pick(M, N, K, dtype, sms, mis, b_mn))
    except LookupError as e:
        raise ShapeError(f"no kernel takes {M}x{N}x{K}: {e}") from None
    if not isinstance(st, Step) and not st.accepts(M, round_up(N, 8), round_up(K, 8), b_mn=b_mn):
        key = _pick_among(M, N, K, dtype, sms, _candidates(lambda s: isinstance(s, Step), mis), mis)
        st = get_step(key) if key else st
    if not _reads(st, a_mn, b_mn):  # (a family entry must take the shape as rule 2 says)
        key = _pick_among(M, N, K, dtype, sms, _candidates(
            lambda s: _reads(s, a_mn, b_mn)
            and (isinstance(s, Step) or s.accepts(M, round_up(N, 8), round_up(K, 8), b_mn=b_mn)), mis), mis, b_mn)
        if key and (isinstance(st, Step) or _copy_loses(st, get_step(key), M, N, K, sms, a_mn, b_mn, mis)):
            st = get_step(key)
    return st


def _reads(st, a_mn: bool, b_mn: bool) -> bool:
    """st reads the operands in place as they are (an MN-major one only if it can)."""
    a_ok, b_ok = reads_mn(st)
    return (a_ok or not a_mn) and (b_ok or not b_mn)


def _copy_loses(st, in_place, M: int, N: int, K: int, sms: int, a_mn: bool, b_mn: bool,
                b_misaligned: bool = False) -> bool:
    """In the selection's model: `st` after copying the MN-major operand(s) K-major is slower
    than `in_place` reading them as they are."""
    dev = Device(sms=sms)
    a_ok, b_ok = reads_mn(st)
    a_cp, b_cp = a_mn and not a_ok, b_mn and not b_ok  # the operands st would need copied
    copy_bytes = 2 * ELEMENT_BYTES * K * ((M if a_cp else 0) + (N if b_cp else 0))  # read + write
    copy_us = (int(a_cp) + int(b_cp)) * COPY_LAUNCH_US + copy_bytes / (TRANSPOSE_COPY_TBS * 1e12) * 1e6
    b_mis_st = rows_misaligned(round_up(K, 8)) if b_cp else b_misaligned  # a copy's rows: K-major
    return (score(st, M, N, K, dev, b_mis_st, b_mn and not b_cp).score_us + copy_us
            > score(in_place, M, N, K, dev, b_misaligned, b_mn).score_us)


_DTYPE_NAMES = {"float16": "float16", "fp16": "float16", "half": "float16", "bfloat16": "bfloat16",
                "bf16": "bfloat16"}


def best_step(M: int = 4096, N: int = 4096, K: int = 4096, dtype: str = "float16", sms: int = H200.sms):
    """The kernel `matmul_nt` runs for K-major operands of this shape (default 4096^3, the
    ladder benchmark's size); dtype 'float16'/'fp16', 'bfloat16'/'bf16' or the torch dtype."""
    for name, v in (("M", M), ("N", N), ("K", K), ("sms", sms)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise TypeError(f"best_step: {name} must be a positive int, got {v!r}")
        if v >= MAX_DIM:
            raise ValueError(f"best_step: {name}={v} is over {MAX_DIM - 1}: the kernels index with 32-bit ints")
    name = _DTYPE_NAMES.get(str(dtype).removeprefix("torch."))
    if name is None:
        raise TypeError(f"best_step: dtype must be float16 or bfloat16 ('fp16', 'bf16' or the torch dtype), got {dtype!r}")
    return step_for(M, N, K, name, sms)
