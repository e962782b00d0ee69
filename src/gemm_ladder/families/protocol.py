"""The kernel-family protocol: every question the shared machinery (the selection and its cost
model, the runner, the hot path, the compile report, the benchmarks) asks a kernel, asked the
same way of a ladder step (families/ladder_step.py), a production GEMM entry (families/gemm.py)
and a small-M entry (families/smallm.py). A new family implements this class; nothing reads a
family through getattr.

What a kernel tells:
- who it is: `key`, `label`, its `source` file under kernels/ and `entry` point, `threads`;
- its facts, as the cost model prices them (`facts()`), and whether a split-K family deals its
  work per shape (`deal()`);
- the defines its kernel is configured by (`kernel_defines()`; the kernel has no defaults of
  its own), the per-call layout defines (`layout_defines()`) and which operands it reads
  MN-major in place (`reads_mn()`; a family that reads K-major only takes both from
  `KMajorOnly`), and its build (`compile()`);
- which shapes it takes, and in one line each why not (`shape_problems()`, `accepts()`);
- its launch geometry (shared memory, barriers, grid) in its own fields, read by the runner.
"""
from __future__ import annotations

import abc
from dataclasses import dataclass

from .common import ConfigError


@dataclass(frozen=True)
class Facts:
    """A kernel's geometry as the cost model sees it."""
    bm: int  # CTA tile rows (every consumer warpgroup together)
    bn: int  # CTA tile columns
    bk: int  # k-tile
    cluster_m: int  # CTAs along M sharing each B tile (multicast)
    consumers: int  # MMA warpgroups per CTA
    persistent: bool  # grid = SMs, a tile scheduler
    ctas_per_sm: int
    swap_ab: bool = False  # the small dimension runs as the MMA's N
    split_k: int = 1  # a fixed split of K (a deal's split comes from `deal`)
    stream_k: bool = False  # a ragged last wave's tiles split along K in the kernel
    cluster_n: int = 1  # CTAs along N sharing each A tile (multicast)


class KernelFamily(abc.ABC):
    """The interface every kernel implements (module docstring)."""

    dtypes: tuple[str, ...] = ("float16", "bfloat16")

    @property
    def model_only(self) -> bool:
        """Modelled by the simulator, but no kernel implements it yet."""
        return False

    @abc.abstractmethod
    def facts(self) -> Facts:
        """The cost model's inputs."""

    def deal(self, M: int, N: int, K: int, num_sms: int):
        """A split-K family's deal of the (tile, k-tile) units over CTAs for this shape; None
        for kernels whose grid is their tiles."""
        return None

    @abc.abstractmethod
    def kernel_defines(self) -> dict[str, int]:
        """The compile-time configuration of the kernel, from the family's fields alone."""

    @abc.abstractmethod
    def layout_defines(self, a_mn: bool = False, b_mn: bool = False) -> dict[str, int]:
        """The per-call defines of an M-major A / N-major B build (only what `reads_mn` allows)."""

    @abc.abstractmethod
    def reads_mn(self) -> tuple[bool, bool]:
        """(reads an M-major A in place, reads an N-major B in place)."""

    @abc.abstractmethod
    def compile(self, *, bf16: bool = False, extra_defines: dict | None = None, use_cache: bool = True,
                strict: bool = True):
        """Build the kernel (cuda/jit.py) with the build's switches (GL_TRACE, ...)."""

    @abc.abstractmethod
    def shape_problems(self, M: int, N: int, K: int, *, b_mn: bool = False) -> list[str]:
        """Why this kernel cannot take (M, N, K) (with B read N-major when b_mn); empty if it can."""

    def accepts(self, M: int, N: int, K: int, *, b_mn: bool = False) -> bool:
        return not self.shape_problems(M, N, K, b_mn=b_mn)


class KMajorOnly:
    """`layout_defines` and `reads_mn` of a family that reads its operands K-major only (fp8,
    attention): no MN-major build, and an MN-major request refused in one line that says why
    (`kmajor_only_why`, the family's own words)."""

    kmajor_only_why = "reads its operands K-major only"

    def layout_defines(self, a_mn: bool = False, b_mn: bool = False) -> dict[str, int]:
        if a_mn or b_mn:
            raise ConfigError(f"{self.key}: {self.kmajor_only_why}")
        return {}

    def reads_mn(self) -> tuple[bool, bool]:
        return (False, False)
