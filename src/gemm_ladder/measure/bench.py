"""The ladder benchmark: every step against cuBLAS, interleaved in one process.

Method (see docs/benchmarking.md): random normal inputs; each step's output is poisoned
(NaN) and checked against an fp32 reference before it is timed; ours and cuBLAS
(torch.matmul(A, B.T)) alternate call by call, each call preceded by a write of a buffer
larger than L2 so no call finds the previous one's data in L2; CUDA events around each
call; medians and 10th/90th percentiles; NVML clocks, power and throttle reasons sampled
after each step's timing loop. The ratio to cuBLAS compares medians measured side by side.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from ..families.ladder import BASELINE
from ..families.ladder_step import Step
from ..cuda import device as cuda_device
from ..library import runner, select
from .accuracy import check_output, tolerance
from .bandwidth import measure_copy
from .gpuinfo import Nvml


SPIN_MHZ = 1980  # the H200's highest SM clock: Bench.spin_cycles where NVML does not say


def git_commit(path: Path | None = None) -> str:
    """HEAD (+ "-dirty"), or $GEMM_LADDER_COMMIT where the tree travels without .git."""
    if os.environ.get("GEMM_LADDER_COMMIT"):
        return os.environ["GEMM_LADDER_COMMIT"]
    try:
        root = path or Path(__file__).resolve().parents[3]
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True).stdout.strip()
        return (sha or "unknown") + ("-dirty" if dirty else "")
    except Exception:
        return "unknown"


def percentile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    if not s:
        return math.nan
    i = (len(s) - 1) * q
    lo, hi = math.floor(i), math.ceil(i)
    return s[lo] + (s[hi] - s[lo]) * (i - lo)


@dataclass(kw_only=True)
class Measured:
    """What every timed row holds: correctness against the reference, then our and
    cuBLAS's medians and spreads, side by side (bench's ladder rows, the suite's rows)."""
    ok: bool = False
    error: str = ""
    max_abs_err: float = math.nan
    rel_err: float = math.nan
    reps: int = 0
    ms: float = math.nan
    ms_p10: float = math.nan
    ms_p90: float = math.nan
    cublas_ms: float = math.nan
    cublas_ms_p10: float = math.nan
    cublas_ms_p90: float = math.nan
    tflops: float = math.nan
    cublas_tflops: float = math.nan
    ratio_to_cublas: float = math.nan
    gpu: dict = field(default_factory=dict)


@dataclass
class Row(Measured):
    step: str
    label: str
    forced_move: str
    M: int
    N: int
    K: int
    dtype: str
    speedup_over_step1: float = math.nan
    smem_ai: float = math.nan
    library: bool = False  # the library's kernel for the size (the table's last row)


def graphed(fn):
    """fn captured once in a CUDA graph (after a run on a side stream, as capture wants): a
    replay launches what fn launches without its host cost."""
    import torch
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


class Bench:
    def __init__(self, device_index: int = 0, seed: int = 0, flush_mb: int = 256):
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.torch = torch
        self.dev = device_index
        self.nvml = Nvml(device_index)
        self.gen = torch.Generator(device=f"cuda:{device_index}").manual_seed(seed)
        l2 = getattr(torch.cuda.get_device_properties(device_index), "L2_cache_size", 60 << 20)
        self.flush_buf = torch.empty(max(flush_mb << 20, 4 * l2) // 4, dtype=torch.int32, device=f"cuda:{device_index}")

    def flush_l2(self) -> None:
        self.flush_buf.zero_()

    def inputs(self, M: int, N: int, K: int, dtype):
        t = self.torch
        a = t.randn((M, K), device=f"cuda:{self.dev}", dtype=t.float32, generator=self.gen).to(dtype)
        b = t.randn((N, K), device=f"cuda:{self.dev}", dtype=t.float32, generator=self.gen).to(dtype)
        return a, b

    def spin_cycles(self, us: float) -> int:
        """torch.cuda._sleep cycles (SM clock) that spin at least `us` microseconds: exactly
        that at the highest SM clock (NVML's, else SPIN_MHZ), longer at a lower one."""
        if getattr(self, "_sm_mhz", None) is None:
            self._sm_mhz = self.nvml.static().get("max_sm_clock_mhz") or SPIN_MHZ
        return max(1, round(us * self._sm_mhz))

    def time_interleaved(self, fns: list, reps: int, flush: bool = True, lead_us: float = 0.0,
                         lead_cycles: int = 0) -> list[list[float]]:
        """Call every fn in fns once per repetition, alternating their order, each after an
        L2 flush (unless flush=False: L2-resident measurements); returns per-fn lists of
        milliseconds (CUDA events). lead_us > 0: a GPU spin of at least that long
        (torch.cuda._sleep) after the flush, before the start event, so that the work queued
        ahead of a call outlasts the call's host enqueue where that may exceed the flush (a
        library call that copies operands, perf-notes item 104); 0 (default): none. lead_cycles:
        the spin given in SM cycles instead (a probe that measures the spin itself)."""
        t = self.torch
        cycles = lead_cycles or (self.spin_cycles(lead_us) if lead_us > 0 else 0)
        events = [[] for _ in fns]
        for r in range(reps):
            order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
            for i in order:
                if flush:
                    self.flush_l2()
                if cycles:
                    t.cuda._sleep(cycles)
                s, e = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
                s.record()
                fns[i]()
                e.record()
                events[i].append((s, e))
        t.cuda.synchronize(self.dev)
        return [[s.elapsed_time(e) for s, e in ev] for ev in events]


def run(steps: list[Step], sizes: list[tuple[int, int, int]], *, dtype: str = "float16",
        reps: int = 50, min_reps: int = 3, budget_s: float = 2.0, device_index: int = 0,
        progress=None, log=print, library_row: bool = False) -> dict:
    """Benchmark `steps` at each size. Returns the JSON-able result dict. library_row: after
    the steps, the kernel the library chooses for the size (library/select.py), so the climb
    ends at the library's figure (its row's `library` is true)."""
    import torch
    torch_dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    runner.check_device(torch.device(f"cuda:{device_index}"))
    torch.cuda.set_device(device_index)
    bench = Bench(device_index)
    result = {
        "kind": "gemm-ladder bench",
        "commit": git_commit(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "gpu": {"torch_name": torch.cuda.get_device_name(device_index), **bench.nvml.static()},
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "method": {"reps": reps, "min_reps": min_reps, "budget_s_per_step": budget_s,
                   "l2_flush_bytes": bench.flush_buf.numel() * 4, "interleaved": True,
                   "timer": "CUDA events per call", "inputs": "randn fp32 -> dtype",
                   "reference": "fp32 torch.matmul (TF32 off)", "tolerance(max,rel)": tolerance(dtype)},
        "rows": [],
    }
    task = progress.add_task("ladder", total=(len(steps) + library_row) * len(sizes)) if progress else None
    for (M, N, K) in sizes:
        a, b = bench.inputs(M, N, K, torch_dtype)
        ref = torch.matmul(a.float(), b.float().T)
        c_cublas = torch.empty((M, N), dtype=torch_dtype, device=a.device)
        cublas = lambda: torch.matmul(a, b.T, out=c_cublas)  # noqa: E731
        step1_ms = None
        lib = [select.step_for(M, N, K, dtype, cuda_device.num_sms(device_index))] if library_row else []
        for st in steps + lib:
            row = Row(st.key, st.label, st.forced_move, M, N, K, dtype, smem_ai=st.smem_ai())
            if lib and st is lib[0]:
                row.label, row.forced_move = f"library: {st.key}", "the library's kernel for the shape"
                row.library = True
            if progress:
                progress.update(task, description=f"{M}x{N}x{K} step {st.key}")
            try:
                out = torch.full((M, N), float("nan"), dtype=torch_dtype, device=a.device)
                p = runner.plan(st, a, b, out)
                p()
                p.synchronize()
                row.ok, row.max_abs_err, row.rel_err, row.error = check_output(out, ref, dtype)
                if row.ok:
                    # one untimed call of each to estimate how many repetitions fit the budget
                    one = bench.time_interleaved([p, cublas], 1)[0][0]
                    n = max(min_reps, min(reps, int(budget_s * 1e3 / max(one, 1e-3))))
                    ours, theirs = bench.time_interleaved([p, cublas], n)
                    row.reps = n
                    row.ms, row.ms_p10, row.ms_p90 = statistics.median(ours), percentile(ours, .1), percentile(ours, .9)
                    row.cublas_ms = statistics.median(theirs)
                    row.cublas_ms_p10, row.cublas_ms_p90 = percentile(theirs, .1), percentile(theirs, .9)
                    flop = 2.0 * M * N * K
                    row.tflops = flop / row.ms / 1e9
                    row.cublas_tflops = flop / row.cublas_ms / 1e9
                    row.ratio_to_cublas = row.cublas_ms / row.ms
                    if st.key == BASELINE:
                        step1_ms = row.ms
                    if step1_ms:
                        row.speedup_over_step1 = step1_ms / row.ms
                    row.gpu = bench.nvml.sample()
            except Exception as e:  # report, don't stop the ladder
                row.ok, row.error = False, f"{type(e).__name__}: {e}"
            result["rows"].append(row.__dict__)
            if progress:
                progress.advance(task)
        del a, b, ref, c_cublas
        torch.cuda.empty_cache()
    result["memory"] = measure_copy(bench)  # the roofline's memory slopes, from this run
    result["gpu_after"] = bench.nvml.sample()
    return result


def write_json(result: dict, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1, default=str))
    return path


def default_json_path(out_dir: Path, result: dict) -> Path:
    stamp = result["date"].replace(":", "").replace("-", "")[:15]
    return Path(out_dir) / f"bench-{stamp}-{result['commit'][:10]}.json"
