"""The attention model's parameters: what it models of a step (A2-A5) comes from the step's
:class:`~gemm_ladder.families.attention.AttnStep` (consumers, key block BN, head dim, ring
depth), the timings from H200 figures (see :class:`AttnParams`, and which are assumptions).

Also the attention what-ifs (:data:`ATTN_WHAT_IFS`): a rule of the choreography broken, which
the simulator shows as a named deadlock."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ...cuda.device import H200
from ...families import attention as attn_family
from ...families.common import ConfigError
from .params import SimParams

ATTN_STEPS = ("A2", "A3", "A4", "A5")
DEFAULT_SEQ_LEN = 16384  # the record's long sequence: 128 key blocks of 128 at head dim 128

# An SM's dense fp16 tensor-core rate, from the H200's datasheet peak (cuda/device.py):
# 989 TFLOP/s over 132 SMs = 7492 FLOP/ns per SM.
TC_FLOP_PER_NS = H200.peak_tflops * 1e3 / H200.sms
# 4096 dense fp16 FLOP per clock per SM (the GEMM model's figure) makes that peak a clock of
# 989e12 / (132 x 4096) = 1.83 GHz: the clock the CUDA-core rates below are counted at.
TC_FLOP_PER_CLK = 4096
CLOCK_GHZ = TC_FLOP_PER_NS / TC_FLOP_PER_CLK
# ASSUMPTION (not measured here): the MUFU (special function unit) computes 16 ex2 per SM per
# clock on Hopper, 4 per SM sub-partition. FlashAttention-3's argument rests on it: the H100's
# exponentials run at 989 / 3.9 TFLOP/s, ~250x slower than its matmuls.
MUFU_PER_CLK = 16
# ASSUMPTION: 128 fp32 results (FFMA, FMUL, FMNMX, FADD) per SM per clock, and the conversion of
# two scores to a packed 16-bit pair at half that rate (one conversion per two scores costs what
# one fp32 op per score does).
ALU_PER_CLK = 128
# Per score element of one warpgroup's block, the warpgroup alone on the SM's pipes: the ex2
# (MUFU), the row-max pass before it (one FMNMX, a pass of its own: the exponentials need the
# max) and the conversion to 16 bits; the FFMA of exp2's argument and the sum's FADD are issued
# in the MUFU's shadow. (1/16 + 2/128) clocks at 1.83 GHz = 0.0427 ns.
SOFTMAX_NS_PER_ELEM = (1 / MUFU_PER_CLK + 2 / ALU_PER_CLK) / CLOCK_GHZ
# Per O element: the rescale's FMUL. (1/128) clocks = 0.0043 ns.
RESCALE_NS_PER_ELEM = (1 / ALU_PER_CLK) / CLOCK_GHZ
# MEASURED (attention_trace.block_cuda_clocks, on A3's trace at 3724ed0, D 128, BN 128): a
# consumer's CUDA-core work per key block (softmax, rescale of O, P to 16 bits, the loop and its
# trace record) takes ~1690 SM cycles, twice the rates above, and as long when the other
# warpgroup computes at the same time (A3, half its softmax overlapped: 1687; A4: 1677; A5:
# 1670). One warp per SM sub-partition is bound by its instructions' latency, not the pipes'.
BLOCK_CUDA_CLOCKS = 1687.0

_GEMM = SimParams()  # the GEMM model's defaults the attention model reuses


@dataclass
class AttnParams:
    """One attention step's model. Times in ns, sizes in bytes / elements.

    From the step (families.attention): ``consumers`` (warpgroups of 64 query rows), ``bn``
    (keys per block), ``head_dim``, ``depth`` (K/V blocks in flight), the schedule
    (``lockstep`` A2, ``pingpong`` A4/A5, ``intra`` A5) and ``ctas_per_sm`` (A2 runs two CTAs
    per SM below head dim 256: families.attention's block choice; one otherwise).

    Timings, and where they come from:

    * ``tc_flop_per_ns`` = 7492: the H200's dense fp16 peak (989 TFLOP/s) per SM. Derived,
      not measured; a wgmma group of F FLOP holds the SM's one tensor core F / rate ns (m64
      wgmma and the register-A form assumed to run at the same rate as the GEMM's).
    * ``softmax_ns_per_elem`` = 0.0427: per score element of a block (64 x BN per warpgroup),
      the warpgroup alone on the SM's CUDA cores: ex2 at 16 per SM per clock (an assumption:
      the MUFU rate), the max pass and the conversion at 128 per clock (an assumption), at the
      1.83 GHz of the peak. When several warpgroups compute at once they share the pipes
      (processor sharing: two take twice as long each).
    * ``rescale_ns_per_elem`` = 0.0043: per element of O (64 x head dim), one FMUL.
    * ``softmax_fixed_ns`` = 60: per block, the row max's and sum's shuffles and the exp
      pass's dependency latency. An estimate.
    * ``block_cuda_ns`` = None: where set (the held-out prediction: :data:`BLOCK_CUDA_CLOCKS`
      at the run's clock), a warpgroup's softmax and rescale of a block take this long in all,
      split as the rates above split them, and the warpgroups do not share the pipes: the
      measured per-block time is latency-bound, the same with one warpgroup computing or two.
    * ``mma_issue_ns`` = 122 (barrier wait returned -> the wgmma group issued) and
      ``mma_wait_ns`` = 119 (the group done -> ``wgmma.wait_group`` returned and the stage
      released): the GEMM model's, fitted to the traced GEMM step 7:d4 (docs/simulator.md,
      Calibration; the tracer's own stores included), not to any attention measurement.
    * ``load_latency_ns`` = 800, ``l2_bytes_per_ns`` = None (unlimited), ``issue_ns`` = 10,
      ``wake_ns`` = 10: the GEMM model's estimates.
    * ``epilogue_ns`` = 300 per 128x128 elements (O / rowsum from registers to memory): the
      GEMM's epilogue estimate, scaled; once per tile.
    """

    step: str = "A4"
    name: str = ""
    head_dim: int = 128
    bn: int = 128
    consumers: int = 2
    depth: int = 2
    lockstep: bool = False     # A2: one warpgroup loads and computes in turn
    pingpong: bool = False     # A4, A5: the consumers take turns issuing MMAs
    intra: bool = False        # A5: QK^T_{j+1} issued before PV_j and waited for alone
    ctas_per_sm: int = 1
    blocks: int = DEFAULT_SEQ_LEN // 128  # key blocks per tile
    tc_flop_per_ns: float = TC_FLOP_PER_NS
    softmax_ns_per_elem: float = SOFTMAX_NS_PER_ELEM
    rescale_ns_per_elem: float = RESCALE_NS_PER_ELEM
    softmax_fixed_ns: float = 60.0
    block_cuda_ns: float | None = None
    mma_issue_ns: float = _GEMM.mma_issue_ns
    mma_wait_ns: float = _GEMM.mma_wait_ns
    load_latency_ns: float = _GEMM.load_latency_ns
    l2_bytes_per_ns: float | None = None
    epilogue_ns: float = _GEMM.epilogue_ns
    issue_ns: float = _GEMM.issue_ns
    wake_ns: float = _GEMM.wake_ns
    in_bytes: int = 2
    warps_per_consumer: int = 4  # arrivals per consumer release (one per warp)
    cluster: int = 1             # (the engine's naming: attention runs no cluster)

    # -- what the engine asks of any model ------------------------------------------------
    @property
    def num_consumers(self) -> int:
        return self.consumers

    @property
    def key(self) -> str:
        return self.step

    @property
    def title(self) -> str:
        return (f"attention {self.step} - {self.name} (D {self.head_dim}, BN {self.bn}, "
                f"{self.consumers} consumer{'s' if self.consumers > 1 else ''}, depth {self.depth}"
                + (f", {self.ctas_per_sm} CTAs per SM" if self.ctas_per_sm > 1 else "") + ")")

    # -- sizes ------------------------------------------------------------------------------
    @property
    def bm(self) -> int:
        """Query rows per CTA: 64 per consumer warpgroup."""
        return attn_family.WG_ROWS * self.consumers

    @property
    def kv_bytes(self) -> int:
        """One block of K (or of V): BN rows of the head dim."""
        return self.bn * self.head_dim * self.in_bytes

    @property
    def q_bytes(self) -> int:
        """One consumer's 64 query rows."""
        return attn_family.WG_ROWS * self.head_dim * self.in_bytes

    @property
    def mma_flops(self) -> int:
        """One consumer's Q K^T (or P V) of one block: 2 x 64 x BN x D."""
        return 2 * attn_family.WG_ROWS * self.bn * self.head_dim

    @property
    def mma_time(self) -> float:
        return self.mma_flops / self.tc_flop_per_ns

    @property
    def softmax_time(self) -> float:
        """One warpgroup's softmax of one block, alone on the SM's CUDA cores."""
        return attn_family.WG_ROWS * self.bn * self.softmax_ns_per_elem + self.softmax_fixed_ns

    @property
    def rescale_time(self) -> float:
        """One warpgroup's rescale of O, alone on the SM's CUDA cores."""
        return attn_family.WG_ROWS * self.head_dim * self.rescale_ns_per_elem

    def cuda_time(self, softmax: bool = True, rescale: bool = True) -> float:
        """One warpgroup's softmax and / or rescale of a block: from the rates, or where
        ``block_cuda_ns`` is set, that share of it."""
        t = (self.softmax_time if softmax else 0.0) + (self.rescale_time if rescale else 0.0)
        return t if self.block_cuda_ns is None else self.block_cuda_ns * t / (self.softmax_time + self.rescale_time)

    @property
    def epilogue_time(self) -> float:
        return self.epilogue_ns * attn_family.WG_ROWS * self.head_dim / (128 * 128)

    @property
    def tile_flops(self) -> int:
        """The FLOPs of one tile (the benchmark's count: 4 x rows x keys x D)."""
        return 4 * self.bm * self.blocks * self.bn * self.head_dim

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def attention_step(step: str, head_dim: int = 128):
    """The AttnStep of ``step`` (A2..A5) at ``head_dim``; ValueError in one line otherwise."""
    if step not in ATTN_STEPS:
        raise ValueError(f"the attention model covers steps {', '.join(ATTN_STEPS)}, not {step!r}")
    try:
        return attn_family.get(step, head_dim)
    except ConfigError as e:  # a head dim the step does not take
        raise ValueError(str(e)) from None


def params_for_attention(step: str, head_dim: int = 128, *, seq_len: int | None = None,
                         **overrides: Any) -> AttnParams:
    """The model of attention step ``step`` at ``head_dim``: consumers, BN and depth from its
    AttnStep, a tile of ``seq_len`` keys (default 16384: ceil(S / BN) blocks), the timings
    from :class:`AttnParams`' defaults; ``overrides`` (None values ignored) replace any field
    (``blocks`` included)."""
    st = attention_step(step, head_dim)
    S = DEFAULT_SEQ_LEN if seq_len is None else seq_len
    if S < 1:
        raise ValueError(f"the sequence length must be >= 1 (got {S})")
    base: dict[str, Any] = dict(
        step=st.key, name=st.label.split(": ", 1)[-1], head_dim=head_dim, bn=st.bn, consumers=st.consumers,
        depth=st.depth, lockstep=not st.producer, pingpong=st.key in ("A4", "A5"), intra=st.key == "A5",
        # families.attention: one warpgroup's small key blocks leave room for two CTAs per SM below
        # head dim 256 (shared memory and registers); one at 256, and one for the warp-specialized
        ctas_per_sm=2 if not st.producer and head_dim < 256 else 1,
        blocks=-(-S // st.bn))
    base.update({k: v for k, v in overrides.items() if v is not None})
    p = AttnParams(**base)
    if p.depth < 1 or p.blocks < 1 or p.ctas_per_sm < 1:
        raise ValueError("depth, blocks and CTAs per SM must be >= 1")
    return p


@dataclass(frozen=True)
class AttnWhatIf:
    name: str
    text: str          # what is changed
    default_step: str
    steps: tuple[str, ...]  # the steps that have what it breaks
    hint: str          # the cause, as the deadlock explanation names it
    why: str = ""
    ablation: dict = field(default_factory=dict)  # the kernel defines of the GPU run (gemm-ladder deadlock)
    modelled: bool = True  # False: it changes numbers, not the schedule; the GPU run shows it


ATTN_WHAT_IFS: dict[str, AttnWhatIf] = {w.name: w for w in (
    AttnWhatIf("pingpong-order-swapped",
               "ping-pong: both consumers' turn states start at phase 0, so each first waits for the "
               "other's turn (consumer 0's should start at phase 1: its first turn is free)",
               "A4", ("A4", "A5"),
               "both consumers' turn states started at phase 0 (each waits for the other's turn first)",
               "the ordered barrier's first turn must be free for one consumer: OrderedBarrier starts group 0 "
               "at phase 1, as the producer of a ring. With both at phase 0 each consumer waits on its turn "
               "barrier for the other's pass, which only comes after the other's own turn: no MMA is ever "
               "issued, and the producer stalls once the rings are full.",
               ablation={"GL_ABLATE_TURNS_NO_FIRST": 1}),
    AttnWhatIf("v-ring-phase-0",
               "the V ring's producer PipelineState starts at phase 0 (it should start at 1: a fresh "
               "empty barrier has nothing to wait for)",
               "A4", ("A3", "A4", "A5"),
               "the V ring's producer state started at phase 0",
               "the producer's first wait on v_empty[0] asks for the completion of a phase no consumer can "
               "complete before it has read V block 0, which the producer never loads: the consumers run "
               "their first Q K^T and softmax, then wait on v_full[0] forever.",
               ablation={"GL_ABLATE_V_RING_PHASE": 1}),
    AttnWhatIf("no-rescale",
               "the online softmax does not rescale O when a row's running max moves",
               "A2", ("A2", "A3", "A4", "A5"),
               "O was not rescaled when the running max moved",
               "each block's P V is accumulated at its own block's max: the blocks before a larger max stay "
               "too large by exp(scale x the max's move), and the final division by the (correctly rescaled) "
               "row sum cannot undo it: a wrong result, no deadlock. The schedule is unchanged, so the "
               "simulator has nothing to show: it runs on the GPU only.",
               ablation={"GL_ABLATE_NO_RESCALE": 1}, modelled=False),
)}


def get_attn_what_if(name: str, step: str | None = None) -> AttnWhatIf:
    """The what-if ``name``; ValueError when unknown, or when ``step`` lacks what it breaks."""
    if name not in ATTN_WHAT_IFS:
        raise ValueError(f"unknown attention what-if {name!r}; choose from {', '.join(ATTN_WHAT_IFS)}")
    w = ATTN_WHAT_IFS[name]
    if step is not None and step not in w.steps:
        raise ValueError(f"{name} applies to attention steps {', '.join(w.steps)}, not {step}")
    return w
