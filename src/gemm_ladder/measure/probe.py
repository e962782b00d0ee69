"""What the kernel probes under benchmarks/results/experiments/ share: each candidate checked
on a poisoned output against fp32 and repeated bit for bit, then all of them timed interleaved
with cuBLAS after each of bench.py's L2 flushes, one row per (candidate, flush)."""
from __future__ import annotations

import contextlib
import statistics
from pathlib import Path

from .accuracy import check_product


def flushes(bench) -> dict:
    """The two L2 flushes the probes compare: bench.py's zeroing one (the suite's: it leaves L2
    full of dirty lines) and a read (L2 left clean)."""
    buf = bench.flush_buf
    return {"zero": lambda: buf.zero_(), "read": lambda: buf.sum()}


def add_sweep_args(ap, *, shapes: str, dtypes: str = "float16,bfloat16", reps: int = 60, passes: int = 2) -> None:
    """The arguments every `sweep` probe takes: --shapes, --dtypes, --reps, --passes, --json."""
    ap.add_argument("--shapes", default=shapes)
    ap.add_argument("--dtypes", default=dtypes)
    ap.add_argument("--reps", type=int, default=reps)
    ap.add_argument("--passes", type=int, default=passes)
    ap.add_argument("--json", default=None)


def add_flush_arg(ap) -> None:
    """--flush: which of `flushes` comes before each timed call (default the suite's zeroing one)."""
    ap.add_argument("--flush", choices=("zero", "read"), default="zero",
                    help="the L2 flush before each call: the suite's zeroing one (L2 left dirty) or a read "
                         "(left clean)")


def parse_switches(specs: list[str]) -> dict[str, int] | None:
    """Build switches given as NAME=V (a probe's repeated --switch): {NAME: V}, None if none."""
    out = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name.startswith("GL_") or not value.lstrip("-").isdigit():
            raise SystemExit(f"--switch {spec!r}: expected GL_NAME=INTEGER")
        out[name] = int(value)
    return out or None


def deal_text(plan) -> str | None:
    """A plan's deal of work in a few characters (None: the kernel has no deal)."""
    d = getattr(plan, "deal", None)
    if d is None:
        return None
    return (f"c{d.ctas} u{d.units} p{d.planes}" + (" dsmem" if d.dsmem else "")
            + (" fixup" if getattr(d, "fixup", False) else ""))


def checked_plans(cands: dict, a, b, make_plan, label: str, repeats: int = 1) -> list[tuple]:
    """[(name, plan, ok, repeat_identical, deal)] for the candidates {name: step or key} that
    plan and launch. Each output starts as NaN; the first result is checked against fp32, then
    `repeats` more runs on re-poisoned outputs must match it bit for bit. A candidate that
    cannot be planned or launched is printed and left out."""
    import torch
    sync = torch.cuda.synchronize if a.is_cuda else (lambda: None)
    M, N = a.shape[0], b.shape[0]
    out_rows = []
    for name, st in cands.items():
        out = torch.full((M, N), float("nan"), dtype=a.dtype, device=a.device)
        try:
            p = make_plan(st, a, b, out)
            p()
            sync()
        except Exception as e:  # reported, not fatal
            print(f"{label} {name}: {type(e).__name__}: {str(e)[:200]}", flush=True)
            continue
        ok = bool(check_product(out, a, b)[0])
        first = out.clone()
        same = True
        for _ in range(repeats):
            out.fill_(float("nan"))
            p()
            sync()
            same = same and torch.equal(first, out)
        out_rows.append((name, p, ok, same, deal_text(p)))
    return out_rows


def time_against_cublas(bench, checked: list[tuple], a, b, reps: int, label: str, row: dict,
                        flush_fns: dict | None = None) -> list[dict]:
    """Times the checked plans and cuBLAS (torch.matmul(a, b.T)) interleaved, medians of `reps`,
    after each flush; prints one line per flush and returns a row per (candidate, flush): `row`
    (the shape's fields) with kernel, flush, us, cublas_us, ratio_to_cublas, ok,
    repeat_identical, deal."""
    import torch
    fns = [p for _, p, *_ in checked] + [lambda: torch.matmul(a, b.T)]
    rows = []
    for fname, fl in (flush_fns or flushes(bench)).items():
        bench.flush_l2 = fl
        med = [statistics.median(t) * 1e3 for t in bench.time_interleaved(fns, reps)]
        cub = med[-1]
        line = [f"{label} {fname}: cuBLAS {cub:.1f} us"]
        for (name, _, ok, same, deal), us in zip(checked, med):
            line.append(f"{name} [{deal}] {us:.1f} ({cub / us:.3f}){'' if ok else ' WRONG'}{'' if same else ' MOVING'}")
            rows.append(dict(row, kernel=name, flush=fname, us=us, cublas_us=cub, ratio_to_cublas=cub / us, ok=ok,
                             repeat_identical=same, deal=deal))
        print("\n  ".join(line), flush=True)
    return rows


def sweep(bench, shapes: str, dtypes: str, passes: int, candidates, make_plan, reps: int,
          flush_fns: dict | None = None, repeats: int = 3) -> list[dict]:
    """The probes' loop: for each pass, dtype and shape ("MxNxK,..."; dtypes "float16,..."),
    fresh inputs, the candidates `candidates(M, N, K, dtype_name)` returns ({name: what
    `make_plan(what, a, b, out)` plans}) checked (`checked_plans`) and timed against cuBLAS
    (`time_against_cublas`); returns every row, each with M, N, K, dtype and pass_."""
    import torch
    rows = []
    for pas in range(passes):
        for dt in dtypes.split(","):
            for shape in shapes.split(","):
                M, N, K = map(int, shape.split("x"))
                a, b = bench.inputs(M, N, K, getattr(torch, dt))
                checked = checked_plans(candidates(M, N, K, dt), a, b, make_plan, f"{shape} {dt}", repeats=repeats)
                rows += time_against_cublas(bench, checked, a, b, reps, f"pass {pas} {shape} {dt}",
                                            dict(M=M, N=N, K=K, dtype=dt, pass_=pas), flush_fns=flush_fns)
    return rows


@contextlib.contextmanager
def kernels_from(kernel_dir, when=None):
    """Builds compiled inside the block come from another tree's kernels (`kernel_dir`, e.g. an
    older checkout's src/gemm_ladder/kernels, or a patched copy), launched with this tree's
    arguments: the A/B probes' other side. `when(defines)`: only builds whose defines it accepts
    (e.g. an experiment's switch); the others keep this tree's kernels. A build cached under
    the same key beforehand is not rebuilt (give the other side's entry a name of its own)."""
    from ..cuda import jit
    own = jit.compile_kernel
    other = Path(kernel_dir)

    def compile_kernel(*args, **kw):
        defines = args[2] if len(args) > 2 else kw.get("defines") or {}
        return own(*args, **({**kw, "kernel_dir": other} if when is None or when(defines) else kw))

    jit.compile_kernel = compile_kernel
    try:
        yield
    finally:
        jit.compile_kernel = own
