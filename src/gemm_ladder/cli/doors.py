"""What stands between a user's input and the work: argument types with ranges, one-line
errors (never a traceback for a bad input), the GPU requirement, output folders, and
progress that shows on a terminal only."""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import sys
import warnings
from pathlib import Path

from ..families.keys import UnknownStep, as_step, parse_step_spec
from ..families.ladder import all_steps
from ..families.ladder_step import Step

DEFAULT_OUT_DIR = "out"
MAX_DIM = 2**31 - 1  # the kernels index with 32-bit ints


class CliError(Exception):
    """A bad input or an unmet requirement: printed as one line, exit code `code`."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (no usage block)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def fail(prog: str, message: str, code: int = 2) -> int:
    print(f"{prog}: error: {message}", file=sys.stderr)
    return code


# ---- argument types ---------------------------------------------------------------------
def number(kind: type, low: float, high: float, unit: str = "", *, low_open: bool = False):
    """An argparse type: `kind` (int or float) in [low, high] (or (low, high] with low_open)."""
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'an integer' if kind is int else 'a number'}") from None
        below = value <= low if low_open else value < low
        if not math.isfinite(value) or below or value > high:
            bound = f"> {low:g}" if low_open else f">= {low:g}"
            raise argparse.ArgumentTypeError(f"{text} is out of range: must be {bound} and at most {high:g}"
                                             + (f" {unit}" if unit else ""))
        return value
    parse.__name__ = kind.__name__
    return parse


def parse_sizes(spec: str) -> list[tuple[int, int, int]]:
    """'4096,3000x5000x4000' -> [(4096, 4096, 4096), (3000, 5000, 4000)]."""
    out = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        dims = part.lower().split("x")
        if len(dims) not in (1, 3) or not all(d.strip().isdigit() for d in dims):
            raise argparse.ArgumentTypeError(f"bad size {part!r}: use N (square) or MxNxK, e.g. 4096 or 3000x5000x4000")
        dims = [int(d) for d in dims] * (3 if len(dims) == 1 else 1)
        if min(dims) < 1 or max(dims) > MAX_DIM:
            raise argparse.ArgumentTypeError(f"bad size {part!r}: each of M, N, K must be in 1..{MAX_DIM}")
        out.append(tuple(dims))
    if not out:
        raise argparse.ArgumentTypeError("no sizes given: use N (square) or MxNxK, comma separated")
    return out


DTYPES = {"fp16": "float16", "float16": "float16", "half": "float16", "bf16": "bfloat16", "bfloat16": "bfloat16"}


def dtype(text: str) -> str:
    if text.lower() not in DTYPES:
        raise argparse.ArgumentTypeError(f"unknown dtype {text!r}: use fp16 or bf16")
    return DTYPES[text.lower()]


def dtype_or_both(text: str) -> str:
    """--dtype of bench: fp16 or bf16, or both (the suite runs each)."""
    return "both" if text.lower() == "both" else dtype(text)


def step_list(spec: str):
    """--steps: '1-7,7:d4' -> Steps."""
    try:
        return parse_step_spec(spec)
    except UnknownStep as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def traced_step(key: str):
    """--step of trace/deadlock: one step that has mbarrier pipelines (TMA steps)."""
    try:
        st = as_step(key)
    except UnknownStep as e:
        raise argparse.ArgumentTypeError(str(e)) from None
    tma = ", ".join(s.key for s in all_steps(include_variants=False) if s.uses_tma)
    if not isinstance(st, Step):  # a kernel family beside the ladder: its deal and launches are its own
        raise argparse.ArgumentTypeError(f"{st.key} is a kernel family beside the ladder; trace and deadlock "
                                         f"take the ladder's steps with mbarrier pipelines ({tma})")
    if not st.uses_tma:
        raise argparse.ArgumentTypeError(f"step {st.key} has no mbarrier pipeline to trace or ablate "
                                         f"(steps {tma} have)")
    return st


# ---- requirements -----------------------------------------------------------------------
def hopper_problem() -> str | None:
    """Why this machine cannot run the kernels (None when it has an sm_90 GPU)."""
    # Without numpy, torch warns at import; a CLI that needs no numpy should not say so.
    warnings.filterwarnings("ignore", message="Failed to initialize NumPy")
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    try:
        if not torch.cuda.is_available():
            return "no CUDA GPU is available here"
        cap = torch.cuda.get_device_capability()
    except Exception as e:  # a broken driver reads as "no usable GPU", not a traceback
        return f"the CUDA driver is not usable ({str(e).splitlines()[0] if str(e) else type(e).__name__})"
    if cap != (9, 0):
        return f"{torch.cuda.get_device_name()} is compute capability {cap[0]}.{cap[1]}"
    return None


def require_hopper(hint: str = "") -> None:
    why = hopper_problem()
    if why:
        raise CliError(f"needs a Hopper GPU (sm_90: H100/H200), but {why}" + (f"; {hint}" if hint else ""))


# One rule for every file a command writes: a missing folder is created and said so on
# stderr; a path that cannot be written is refused before the work starts, in one line.
def out_dir(path: str | os.PathLike) -> Path:
    """The output folder, created (said on stderr when new); a CliError when it cannot be
    created or written."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise CliError(f"{p} is a file, not a folder: give a folder for the output")
    new = not p.exists()
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CliError(f"cannot create the output folder {p}: {e.strerror or e}") from None
    if not os.access(p, os.W_OK):
        raise CliError(f"cannot write to the output folder {p}: permission denied")
    if new:
        print(f"gemm-ladder: created the folder {p}", file=sys.stderr)
    return p


def out_file(path: str | os.PathLike) -> Path:
    """An output file path whose folder exists (created when missing) and that can be
    written: tried now, so that a long run does not end in an error."""
    p = Path(path)
    if p.is_dir():
        raise CliError(f"{p} is a folder; give a file name")
    out_dir(p.parent if str(p.parent) else ".")
    existed = p.exists()
    try:
        with open(p, "ab"):
            pass
    except OSError as e:
        raise CliError(f"cannot write {p}: {e.strerror or e}; give a path you can write") from None
    if not existed:
        with contextlib.suppress(OSError):
            p.unlink()
    return p


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write a command's output file; an OSError becomes a one-line CliError."""
    p = Path(path)
    try:
        p.write_text(text)
    except OSError as e:
        raise CliError(f"cannot write {p}: {e.strerror or e}") from None
    return p


def input_file(path: str | os.PathLike) -> Path:
    """An input file that exists and is a file (not a folder)."""
    p = Path(path)
    if p.is_dir():
        raise CliError(f"{p} is a folder; give a file")
    if not p.is_file():
        raise CliError(f"{p}: no such file")
    return p


# ---- progress ---------------------------------------------------------------------------
def say_compiling(steps, bf16: bool = False) -> None:
    """One line on stderr when a run is about to compile kernels that are not in the JIT
    cache (seconds each, so a first run would otherwise sit silent); nothing when cached."""
    from ..cuda import jit
    todo = 0
    try:
        for st in steps:
            if st.model_only or not st.source:
                continue
            defines = dict(st.kernel_defines(), **({"GL_BF16": 1} if bf16 else {}))  # as step.build sets them
            todo += not (jit.cache_dir() / f"{jit.cache_key(st.source, jit.build_options(defines))}.json").is_file()
    except (OSError, AttributeError):  # a hint only: an unusual cache or kernel is not worth an error
        return
    if todo:
        print(f"gemm-ladder: compiling {todo} kernel{'s' if todo > 1 else ''} with NVRTC (first run: "
              "they are cached for later runs)", file=sys.stderr)


def stderr_is_terminal() -> bool:
    return sys.stderr.isatty()


@contextlib.contextmanager
def status(text: str):
    """A spinner on stderr while the block runs, on a terminal only; yields update(text)."""
    if not stderr_is_terminal():
        yield lambda _text: None
        return
    from rich.console import Console
    with Console(stderr=True).status(text) as s:
        yield lambda new: s.update(new)


def progress():
    """A transient rich Progress on stderr on a terminal, else None (callers then stay quiet)."""
    if not stderr_is_terminal():
        return contextlib.nullcontext(None)
    from rich.console import Console
    from rich.progress import Progress
    return Progress(console=Console(stderr=True), transient=True)
