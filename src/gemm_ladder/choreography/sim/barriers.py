"""The hardware objects of the model: mbarriers and the PipelineState of a ring end."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PipelineState:
    """A ring's bookkeeping: which slot (``stage``) and which parity (``phase``)."""

    depth: int
    stage: int = 0
    phase: int = 0

    def advance(self) -> None:
        self.stage += 1
        if self.stage == self.depth:
            self.stage = 0
            self.phase ^= 1


@dataclass
class MBarrier:
    """An mbarrier: init count, pending arrivals, tx-count, current phase.

    ``phase`` is the index of the current (incomplete) phase, starting at 0;
    its parity is ``phase & 1``.
    """

    name: str
    stage: int
    cta: int
    count: int
    pending: int = -1
    tx: int = 0
    phase: int = 0
    arrived: list = field(default_factory=list)     # lanes that arrived this phase
    expected: int = 0                                # bytes announced this phase
    landed: int = 0                                  # bytes landed this phase
    last_src: str = ""
    waiters: list = field(default_factory=list)
    # happens-before: the vector clock of what arrived in the current phase, and of the
    # last completed phase (what a waiter released by it has seen)
    phase_vc: dict = field(default_factory=dict)
    done_vc: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.pending < 0:
            self.pending = self.count

    @property
    def ref(self) -> str:
        return f"{self.name}[{self.stage}]"

    def try_wait(self, parity: int) -> bool:
        """``mbarrier.try_wait.parity``: has the phase with this parity completed?"""
        return (self.phase & 1) != parity

    def arrive(self, lane: str) -> None:
        self.pending -= 1
        self.arrived.append(lane)
        self.last_src = lane

    def expect_tx(self, nbytes: int) -> None:
        self.tx += nbytes
        self.expected += nbytes

    def complete_tx(self, nbytes: int, src: str) -> None:
        self.tx -= nbytes
        self.landed += nbytes
        self.last_src = src

    def ready(self) -> bool:
        return self.pending == 0 and self.tx == 0

    def flip(self) -> None:
        """Complete the current phase and re-arm."""
        self.phase += 1
        self.pending = self.count
        self.arrived = []
        self.expected = 0
        self.landed = 0
        self.done_vc, self.phase_vc = self.phase_vc, {}


def vc_merge(into: dict, other: dict) -> None:
    """Vector clocks: ``into`` becomes the element-wise maximum of both."""
    for k, v in other.items():
        if into.get(k, 0) < v:
            into[k] = v
