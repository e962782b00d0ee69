"""Fuzzing gemm_ladder: seeded cases, their layouts and values, and one-line reproducers.

A case is drawn from (seed, index, dtype) alone (`random.Random` seeded with a string is
the same on every machine), so any case can be regenerated without the ones before it, and
its one-line description (`Case.line()`) holds every field needed to rebuild it
(`Case.from_line`), data included (`data_seed`). Needs only torch (no hypothesis), and
builds on any device: CPU tensors in CI, CUDA tensors on the GPU.

What is drawn:
  shapes   M, N, K in 1..10,000 from families: tile edges (64/128/256 multiples, +-1),
           primes, 1, small, 8192+-1, multiples of 8, log-uniform; M*N*K capped
  layouts  a: row-major, transposed view, padded rows, every other row, misaligned pointer;
           leading batch dims of a; b: row-major, transposed view (what the kernels read),
           transposed with padded rows, padded rows, misaligned; out=: none, contiguous,
           padded rows, transposed, misaligned
  values   randn; tiny (x1e-3); large (a x300, b x300 in bf16 or x10/sqrt(K) in fp16 so the
           fp16 result cannot overflow); exact small integers (the result must be exact)
  targets  gemm_ladder.matmul, matmul(step=...) and each ladder step's strict run_step on
           shapes it accepts (Step.accepts)
Padding and guard memory around every operand holds NaN: reading it, or writing outside
the output, shows up as a failure. The checks live in fuzz_check.py.
"""
from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass, fields, replace

MAX_DIM = 10_000
WORK_CAP = 3 << 30  # M*N*K of one case (the fp64 reference runs on the device too)
NAIVE_WORK_CAP = 1 << 28  # step 1 is ~1 TFLOP/s
TILES = (64, 128, 256)
PRIMES = (2, 3, 5, 7, 11, 13, 17, 31, 61, 67, 127, 131, 251, 257, 509, 521, 1021, 1031, 2039, 2053,
          4093, 4099, 8191, 9973)
DTYPES = ("float16", "bfloat16")
SHAPE_FAMILIES = {"tile-edge": 5, "prime": 2, "one": 1, "small": 1, "8k-edge": 1, "multiple-of-8": 2,
                  "log-uniform": 2}
A_LAYOUTS = ("row-major", "transposed", "padded-rows", "every-other-row", "misaligned")
B_LAYOUTS = ("row-major", "transposed", "transposed-padded", "padded-rows", "misaligned")
OUT_KINDS = {"none": 4, "contiguous": 2, "padded-rows": 1, "transposed": 1, "misaligned": 1}
VALUES = {"randn": 4, "tiny": 2, "large": 2, "exact-int": 2}
TARGET_KINDS = {"matmul": 11, "matmul@step": 3, "run_step": 6}
RUN_STEP_B = "nt"  # run_step takes b as the (N, K) row-major matrix B^T


def step_keys() -> list[str]:
    """Every ladder step and variant and every production GEMM entry, e.g. ['1', ..., '7',
    '7:d3', ..., 'gemm:128x256', ...]."""
    import gemm_ladder
    from gemm_ladder.families.gemm import ENTRIES
    return [str(k) for k in gemm_ladder.STEPS] + list(gemm_ladder.VARIANTS) + list(ENTRIES)


def get_step(key: str):
    import gemm_ladder
    return gemm_ladder.get_step(key)


@dataclass(frozen=True)
class Case:
    seed: int
    index: int
    target: str  # "matmul", "matmul@<step>", "run_step:<step>"
    dtype: str
    M: int  # rows of the product, batch dims folded in
    N: int
    K: int
    batch: tuple[int, ...] = ()  # leading dims of a (M = prod(batch) * rows)
    a: str = "row-major"
    b: str = "row-major"
    out: str = "none"
    values: str = "randn"
    data_seed: int = 0
    fam: str = "-"  # the shape family of M, N, K (coverage statistics only)

    @property
    def step(self) -> str | None:
        """The ladder step the case names (None: matmul's own choice)."""
        for prefix in ("matmul@", "run_step:"):
            if self.target.startswith(prefix):
                return self.target[len(prefix):]
        return None

    @property
    def kind(self) -> str:
        """'matmul', 'matmul@step' or 'run_step'."""
        return "run_step" if self.target.startswith("run_step:") else \
            "matmul@step" if self.target.startswith("matmul@") else "matmul"

    @property
    def rows(self) -> int:
        return self.M // math.prod(self.batch) if self.batch else self.M

    @property
    def exact(self) -> bool:
        return self.values == "exact-int"

    def line(self) -> str:
        """One line that rebuilds this case: `Case.from_line(case.line()) == case`."""
        d = asdict(self)
        d["batch"] = "x".join(map(str, self.batch)) or "-"
        return " ".join(f"{k}={v}" for k, v in d.items())

    @classmethod
    def from_line(cls, line: str) -> "Case":
        kv = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
        types = {f.name: f.type for f in fields(cls)}
        args = {}
        for name, typ in types.items():
            if name not in kv:
                continue
            v = kv[name]
            if name == "batch":
                args[name] = () if v in ("-", "") else tuple(int(x) for x in v.split("x"))
            elif typ == "int":
                args[name] = int(v)
            else:
                args[name] = v
        return cls(**args)

    def repro(self) -> str:
        return f"GEMM-FUZZ REPRO: python scripts/fuzz.py --replay '{self.line()}'"


# ---- generation -------------------------------------------------------------------------------
def _loguniform(rng: random.Random, lo: int, hi: int) -> int:
    if hi <= lo:
        return lo
    return min(hi, max(lo, int(round(math.exp(rng.uniform(math.log(lo), math.log(hi + 1)))))))


def _pick(rng: random.Random, weights: dict[str, int]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def draw_dim(rng: random.Random, max_dim: int = MAX_DIM) -> tuple[str, int]:
    fam = _pick(rng, SHAPE_FAMILIES)
    if fam == "tile-edge":
        t = rng.choice(TILES)
        v = t * _loguniform(rng, 1, max(1, max_dim // t)) + rng.choice((-1, 0, 1))
    elif fam == "prime":
        v = rng.choice(PRIMES)
    elif fam == "one":
        v = 1
    elif fam == "small":
        v = rng.randint(1, 32)
    elif fam == "8k-edge":
        v = 8192 + rng.choice((-1, 0, 1))
    elif fam == "multiple-of-8":
        v = 8 * _loguniform(rng, 1, max(1, max_dim // 8))
    else:
        v = _loguniform(rng, 1, max_dim)
    return fam, min(max(v, 1), max_dim)


def _fit(step, M: int, N: int, K: int, rng: random.Random | None, max_dim: int) -> tuple[int, int, int]:
    """Move (M, N, K) onto the shapes `step` takes: tile multiples for steps 2-3 (one tile
    more at random when rng is given), N and K multiples of 8 for TMA steps (rounded up:
    129 -> 136 keeps the tile edge)."""
    if step.tile_multiple:
        def mult(t, v):
            return t * max(1, min(v // t + (rng.choice((0, 1)) if rng else 0), max_dim // t))
        return mult(step.bm, M), mult(step.bn, N), mult(step.bk, K)
    if step.uses_tma:
        def up8(v):
            return min(-(-v // 8) * 8, max_dim - max_dim % 8)
        return M, up8(N), up8(K)
    return M, N, K


def _shrink(step, M: int, N: int, K: int, cap: int, max_dim: int) -> tuple[int, int, int]:
    """Halve the largest dimension until M*N*K fits the cap, within the step's constraints
    (a step's smallest shape, e.g. one 128x128x64 tile, may stay above a tiny cap)."""
    while M * N * K > cap:
        dims = [M, N, K]
        for i in sorted(range(3), key=lambda i: -dims[i]):  # the largest dimension that can shrink
            trial = list(dims)
            trial[i] = max(1, dims[i] // 2)
            if step is not None:
                trial = list(_fit(step, *trial, None, max_dim))
            if trial[0] * trial[1] * trial[2] < M * N * K:
                M, N, K = trial
                break
        else:
            return M, N, K
    return M, N, K


def generate(seed: int, index: int, dtype: str, *, max_dim: int = MAX_DIM, work_cap: int = WORK_CAP,
             targets: tuple[str, ...] = tuple(TARGET_KINDS), steps: list[str] | None = None) -> Case:
    """The case (seed, index, dtype): independent of every other index."""
    rng = random.Random(f"gemm-fuzz/{seed}/{index}/{dtype}")
    keys = steps if steps is not None else step_keys()
    kind = _pick(rng, {k: w for k, w in TARGET_KINDS.items() if k in targets})
    step = get_step(keys[index % len(keys)]) if kind != "matmul" else None
    target = "matmul" if step is None else (f"matmul@{step.key}" if kind == "matmul@step" else f"run_step:{step.key}")
    cap = NAIVE_WORK_CAP if step is not None and step.number == 1 else work_cap
    cap = min(cap, work_cap)
    for _attempt in range(40):
        (fm, M), (fn, N), (fk, K) = draw_dim(rng, max_dim), draw_dim(rng, max_dim), draw_dim(rng, max_dim)
        batch: tuple[int, ...] = ()
        if kind == "matmul" and rng.random() < 0.15:
            batch = tuple(rng.randint(2, 5) for _ in range(rng.choice((1, 2))))
            M = max(1, M // math.prod(batch)) * math.prod(batch)
        if step is not None:
            M, N, K = _fit(step, M, N, K, rng, max_dim)
        if M * N * K <= cap and (step is None or step.accepts(M, N, K)):
            break
    else:  # shrink the largest dimension until the work fits (rare)
        batch = ()
        M, N, K = _shrink(step, M, N, K, cap, max_dim)
    if kind == "run_step":
        a_layout, b_layout, out = "row-major", RUN_STEP_B, rng.choice(("none", "contiguous"))
    else:
        a_layout, b_layout, out = rng.choice(A_LAYOUTS), rng.choice(B_LAYOUTS), _pick(rng, OUT_KINDS)
    return Case(seed=seed, index=index, target=target, dtype=dtype, M=M, N=N, K=K, batch=batch,
                a=a_layout, b=b_layout, out=out, values=_pick(rng, VALUES), data_seed=rng.getrandbits(62),
                fam=f"{fm},{fn},{fk}")


def cases(seed: int, n_per_dtype: int, dtypes: tuple[str, ...] = DTYPES, *, start: int = 0, **kw):
    """n_per_dtype cases of every dtype, interleaved (index i has dtype dtypes[i % len])."""
    for i in range(start, start + n_per_dtype * len(dtypes)):
        yield generate(seed, i, dtypes[i % len(dtypes)], **kw)


def for_step(case: Case, key: str, kind: str = "run_step") -> Case:
    """The same draw aimed at one step: its strict run_step ("run_step") or matmul with
    that step ("matmul@step"), on a shape the step accepts."""
    st = get_step(key)
    rng = random.Random(f"gemm-fuzz/fit/{case.seed}/{case.index}/{key}")
    M, N, K = _fit(st, case.M, case.N, case.K, rng, MAX_DIM)
    M, N, K = _shrink(st, M, N, K, NAIVE_WORK_CAP if st.number == 1 else WORK_CAP, MAX_DIM)
    if kind == "run_step":
        layouts = dict(a="row-major", b=RUN_STEP_B, out=case.out if case.out in ("none", "contiguous") else "none")
        target = f"run_step:{st.key}"
    else:
        layouts = dict(b="transposed") if case.b == RUN_STEP_B else {}
        target = f"matmul@{st.key}"
    return replace(case, target=target, M=M, N=N, K=K, batch=(), **layouts)


# ---- tensors -----------------------------------------------------------------------------------
@dataclass
class Built:
    a: object  # what the target is called with
    b: object
    out: object | None
    a_logical: object  # (*batch, rows, K), dtype
    b_logical: object  # (K, N), dtype
    guards: list  # tensors that must still be all NaN afterwards (padding, memory around views)


def _values(case: Case, shape, which: str, gen, device):
    import torch
    if case.values == "exact-int":
        # |C| <= lim^2 * K stays below 2^24 (exact fp32 sums) and below fp16's 65504
        lim = 4 if case.dtype == "bfloat16" or case.K <= 4094 else 2
        return torch.randint(-lim, lim + 1, shape, generator=gen, device=device).float()
    x = torch.randn(shape, generator=gen, device=device)
    if case.values == "tiny":
        return x * 1e-3
    if case.values == "large":
        if which == "a" or case.dtype == "bfloat16":
            return x * 300.0
        return x * (10.0 / math.sqrt(case.K))
    return x


def place(logical, layout: str, pad: int, off: int):
    """A tensor equal to `logical` (..., R, C) in the given memory layout, and the guard
    regions around it (filled with NaN)."""
    import torch
    *lead, R, C = logical.shape
    nan = float("nan")

    def full(*shape):
        return torch.full(tuple(shape), nan, dtype=logical.dtype, device=logical.device)

    if layout == "row-major":  # a copy (clone() alone would keep a transposed view's strides)
        return logical.clone(memory_format=torch.contiguous_format), []
    if layout == "transposed":
        return logical.transpose(-1, -2).contiguous().transpose(-1, -2), []
    if layout == "padded-rows":
        base = full(*lead, R, C + pad)
        base[..., :C] = logical
        return base[..., :C], [base[..., C:]]
    if layout == "transposed-padded":
        base = full(*lead, C, R + pad)
        base[..., :R] = logical.transpose(-1, -2)
        return base[..., :R].transpose(-1, -2), [base[..., R:]]
    if layout == "every-other-row":
        base = full(*lead, 2 * R, C)
        base[..., ::2, :] = logical
        return base[..., ::2, :], [base[..., 1::2, :]]
    if layout == "misaligned":
        n = logical.numel()
        flat = full(off + n + 8)
        view = flat[off:off + n].view(logical.shape)
        view.copy_(logical)
        return view, [flat[:off], flat[off + n:]]
    raise ValueError(f"unknown layout {layout!r}")


def build(case: Case, device) -> Built:
    import torch
    dtype = getattr(torch, case.dtype)
    gen = torch.Generator(device=device).manual_seed(case.data_seed)
    a_shape = (*case.batch, case.rows, case.K)
    a_log = _values(case, a_shape, "a", gen, device).to(dtype)
    b_log = _values(case, (case.K, case.N), "b", gen, device).to(dtype)
    pad = 1 + (case.data_seed >> 3) % 13
    off = 1 + 2 * ((case.data_seed >> 9) % 4)  # odd element offsets: 2, 6, 10 or 14 bytes off 16
    a, ga = place(a_log, case.a, pad, off)
    b, gb = place(b_log.transpose(0, 1) if case.b == RUN_STEP_B else b_log,
                  "row-major" if case.b == RUN_STEP_B else case.b, pad, off)
    guards = ga + gb
    out = None
    if case.out != "none":
        poison = torch.full((*case.batch, case.rows, case.N), float("nan"), dtype=dtype, device=device)
        layout = "row-major" if case.out == "contiguous" else case.out
        out, go = place(poison, layout, pad, off)
        guards += go
    return Built(a, b, out, a_log, b_log, guards)


def invoke(case: Case, built: Built):
    """Call the library the way the case says."""
    import gemm_ladder
    if case.target == "matmul":
        return gemm_ladder.matmul(built.a, built.b, out=built.out)
    if case.target.startswith("matmul@"):
        return gemm_ladder.matmul(built.a, built.b, out=built.out, step=case.step)
    from gemm_ladder.library.runner import run_step
    return run_step(get_step(case.step), built.a, built.b, built.out)
