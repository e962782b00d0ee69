"""The shape suites of `gemm-ladder bench --suite NAME`: the shapes people multiply.

A shape is C[M, N] = A[M, K] @ B[N, K]^T. Suites:
  squares  M = N = K from 256 to 8192
  llm      transformer projections at batch/sequence rows M in LLM_ROWS: for each
           (hidden, MLP width) pair the MLP up (N = width, K = hidden) and down (N = hidden,
           K = width) projections, and the attention projections N = K = hidden
  odd      primes, dimensions that are not multiples of 8, a short K
  longk    small M with a narrow N and a long K: too few output tiles to fill the SMs
           unless K is split (M in 16 .. 256, N in 512 .. 2048, K in 4096 .. 16384)
  smallsq  small squares between the suite's squares, odd sizes included (320 .. 2047)
  all      every suite, without duplicates
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Shape:
    M: int
    N: int
    K: int
    group: str
    label: str

    @property
    def mnk(self) -> tuple[int, int, int]:
        return self.M, self.N, self.K

    @property
    def flop(self) -> float:
        return 2.0 * self.M * self.N * self.K


SQUARES = (256, 512, 1024, 2048, 3072, 4096, 6144, 8192)
# (hidden, MLP width) of widely used decoder models: 4096 with 11008 and with 14336, 8192 with 28672.
LLM_PAIRS = ((4096, 11008), (4096, 14336), (8192, 28672))
LLM_ROWS = (1, 16, 64, 128, 512, 2048, 8192)
ODD = (
    (1000, 1000, 1000, "no dimension a multiple of the 128 tile"),
    (3000, 5000, 4000, "ragged last wave"),
    (4097, 4095, 4096, "one past / one short of 4096"),
    (127, 8191, 255, "M, N prime; N, K not multiples of 8"),
    (1009, 1013, 1019, "all prime"),
    (4096, 4096, 256, "short K"),
)


LONGK_M = (16, 64, 128, 256)
LONGK_N = (512, 1024, 2048)
LONGK_K = (4096, 8192, 16384)
SMALL_SQUARES = (320, 384, 511, 640, 768, 896, 1000, 1023, 1280, 1536, 1537, 1792, 2047)


def squares() -> list[Shape]:
    return [Shape(n, n, n, "squares", f"{n}^3") for n in SQUARES]


def llm() -> list[Shape]:
    nk: dict[tuple[int, int], str] = {}
    for hidden, width in LLM_PAIRS:
        nk.setdefault((hidden, hidden), f"attn proj h{hidden}")
        nk.setdefault((width, hidden), f"mlp up h{hidden} w{width}")
        nk.setdefault((hidden, width), f"mlp down h{hidden} w{width}")
    return [Shape(m, n, k, "llm", f"{label} M={m}") for (n, k), label in nk.items() for m in LLM_ROWS]


def odd() -> list[Shape]:
    return [Shape(m, n, k, "odd", label) for m, n, k, label in ODD]


def longk() -> list[Shape]:
    return [Shape(m, n, k, "longk", f"long K, narrow N: M={m}") for m in LONGK_M for n in LONGK_N for k in LONGK_K]


def smallsq() -> list[Shape]:
    return [Shape(n, n, n, "smallsq", f"{n}^3") for n in SMALL_SQUARES]


SUITES = {"squares": squares, "llm": llm, "odd": odd, "longk": longk, "smallsq": smallsq}


def get_suite(name: str) -> list[Shape]:
    """The shapes of suite `name` ('all': every suite, each shape once, first label kept)."""
    if name == "all":
        seen: dict[tuple[int, int, int], Shape] = {}
        for fn in SUITES.values():
            for s in fn():
                seen.setdefault(s.mnk, s)
        return list(seen.values())
    if name not in SUITES:
        raise KeyError(f"unknown suite {name!r}; known: {', '.join([*SUITES, 'all'])}")
    return SUITES[name]()


def suite_names() -> list[str]:
    return [*SUITES, "all"]
