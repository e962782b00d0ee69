"""`gemm-ladder bench --suite NAME`: the kernel the selection picks, on every suite shape,
against cuBLAS, in one process, fp16 and bf16.

Per shape: fresh random inputs; the selection (library/select.py) picks a step; its output
is poisoned (NaN), computed once and checked against an fp32 reference (`ok`); then ours and
cuBLAS are timed with bench.py's machinery (interleaved call by call, L2 flushed before
every call, CUDA events, medians). Ours is a prebuilt launch (`runner.plan`) of the picked
step: no host-side work in the figure. A shape the step takes only padded (N or K not a
multiple of 8) runs on zero-padded copies made before timing, as `gemm_ladder.matmul`
would pad it; cuBLAS runs the unpadded problem. Repetitions scale with the FLOPs
(`reps_for`): big shapes get few, small ones many. The copy bandwidths of the roofline are
measured in the same run.

With `call` "matmul" or "matmul_nt" the figure is the library's instead: every timed call
is `gemm_ladder.matmul(a, b)` with b row-major (K, N), what `a @ b` callers hold (or
`matmul_nt(a, b)` with b (N, K), F.linear's layout) against `torch.matmul` on the same
operands, each allocating its result: the library's own choice of kernel (`kernel`), its
copies of operands it cannot read in place (`staged`) and its padding inside the figure.
Those rows put a GPU spin of CALL_LEAD_US between each flush and the start event (bench.py's
`lead_us`), so that the GPU work queued ahead of a call outlasts its host enqueue (a staged
call's ~28 us, more on a slower host) by a wider margin than the flush alone gives (perf-notes
item 104); the kernel rows keep the flush alone.
"""
from __future__ import annotations

import datetime as _dt
import math
import platform
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..cuda import device as cuda_device
from ..families import cost_model
from ..families.keys import get_step
from ..library import select
from . import suites as suites_mod
from .gpuinfo import record_path
from .bench import Bench, Measured, check_output, git_commit, percentile, tolerance

REPS_FLOP = 5e13  # FLOPs of timed calls per shape and side: 8192^3 gets 46 reps
MIN_REPS, MAX_REPS = 10, 100
DTYPES = {"float16": "fp16", "bfloat16": "bf16"}
CALLS = ("kernel", "matmul", "matmul_nt")  # what is timed (module docstring)
SMALL_M = 16  # decode-like rows: the memory-bound regime, reported against the copy bandwidth
CALL_LEAD_US = 200.0  # library-call rows: GPU spin before each start event (module docstring)


def reps_for(flop: float) -> int:
    return max(MIN_REPS, min(MAX_REPS, math.ceil(REPS_FLOP / flop)))


@dataclass
class SuiteRow(Measured):
    M: int
    N: int
    K: int
    dtype: str
    group: str
    label: str
    kernel: str = ""
    heuristic: str = ""  # the selection model's pick (= kernel unless autotuned)
    autotune_ms: dict = field(default_factory=dict)  # median ms per candidate when autotuned
    autotune_cached: bool = False
    kernel_shape: list = field(default_factory=list)
    padded: bool = False
    selection: str = ""
    model_us: float = math.nan
    predicted_us: float = math.nan  # the model's prediction of the pick's time (cost_model.predict_us)
    gbs: float = math.nan  # (A + B + C once) / time
    cublas_gbs: float = math.nan
    hbm_copy_fraction: float = math.nan  # gbs / measured copy bandwidth
    call: str = "kernel"  # CALLS
    staged: str = ""  # library calls: the operands copied before the kernel ("a", "b", "a,b")


def _pad(t, rows: int, cols: int):
    """t zero-padded to (rows, cols), contiguous."""
    if tuple(t.shape) == (rows, cols):
        return t
    out = t.new_zeros((rows, cols))
    out[: t.shape[0], : t.shape[1]].copy_(t)
    return out


def measure_shape(bench: Bench, shape: suites_mod.Shape, dtype: str, device: cost_model.Device,
                  hbm_gbs: float | None, *, autotune: bool = False, gpu: str = "", call: str = "kernel") -> SuiteRow:
    import torch
    from ..library import runner
    M, N, K = shape.mnk
    row = SuiteRow(M, N, K, dtype, shape.group, shape.label, call=call)
    torch_dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    if call != "kernel":
        return _measure_call(bench, shape, row, torch_dtype, hbm_gbs, device)
    try:
        choice = select.choose(M, N, K, dtype, device=device, b_misaligned=cost_model.contiguous_b_misaligned(N, K))
        row.selection, row.model_us = choice.reason, (choice.pick.score_us if choice.pick else math.nan)
        row.predicted_us = choice.pick.predicted_us if choice.pick else math.nan
        st = choice.step  # raises when nothing takes the shape
        pick = choice.pick
        row.heuristic = st.key
        a, b = bench.inputs(M, N, K, torch_dtype)  # fresh random data for every shape
        ref = torch.matmul(a.float(), b.float().T)
        if autotune:
            from . import autotune as tuner
            key, row.autotune_ms, row.autotune_cached = tuner.choose(bench, choice, a, b, ref, dtype, _pad,
                                                                     gpu=gpu, sms=device.sms)
            if key is None:
                raise RuntimeError(f"autotune: no candidate ran correctly ({row.autotune_ms})")
            pick = next(s for s in choice.scores if s.key == key)
            st = get_step(key)
        row.kernel, row.kernel_shape, row.padded = st.key, list(pick.shape), pick.padded
        _, Np, Kp = pick.shape
        ak, bk = _pad(a, M, Kp), _pad(b, Np, Kp)
        out = torch.full((M, Np), float("nan"), dtype=torch_dtype, device=a.device)
        p = runner.plan(st, ak, bk, out)
        p()
        p.synchronize()
        row.ok, row.max_abs_err, row.rel_err, row.error = check_output(out[:, :N], ref, dtype)
        del ref
        if not row.ok:
            return row
        c_cublas = torch.empty((M, N), dtype=torch_dtype, device=a.device)
        cublas = lambda: torch.matmul(a, b.T, out=c_cublas)  # noqa: E731
        cublas()  # warm-up (handle, heuristics); ours was warmed by the check
        _time(bench, row, p, cublas, reps_for(shape.flop), hbm_gbs)
    except Exception as e:  # report, don't stop the suite
        row.ok, row.error = False, f"{type(e).__name__}: {e}"
    return row


def _measure_call(bench: Bench, shape: suites_mod.Shape, row: SuiteRow, torch_dtype, hbm_gbs,
                  device: cost_model.Device) -> SuiteRow:
    """One shape through the library's call (row.call) against torch.matmul, same operands."""
    import torch
    import gemm_ladder
    from ..library import fastpath
    M, N, K = shape.mnk
    try:
        a, b = bench.inputs(M, N, K, torch_dtype)
        ref = torch.matmul(a.float(), b.float().T)
        row.heuristic = select.choose(M, N, K, row.dtype, device=device).step.key  # before layouts
        if row.call == "matmul":
            b = b.T.contiguous()  # (K, N) row-major
            ours, kind = (lambda: gemm_ladder.matmul(a, b)), "mm"
            theirs = lambda: torch.matmul(a, b)  # noqa: E731
        else:
            ours, kind = (lambda: gemm_ladder.matmul_nt(a, b)), "nt"
            theirs = lambda: torch.matmul(a, b.T)  # noqa: E731
        res = ours()  # the check reads it: ordered after the call on its stream
        row.ok, row.max_abs_err, row.rel_err, row.error = check_output(res, ref, row.dtype)
        del ref, res
        cfg = fastpath.config_for(kind, a, b)
        row.kernel = cfg.step.key if cfg.step is not None else "-"
        row.staged = ",".join(x for x, lay in (("a", cfg.a), ("b", cfg.b)) if not lay.direct)
        row.padded = N % 8 != 0 or K % 8 != 0
        if not row.ok:
            return row
        theirs()  # warm-up
        _time(bench, row, ours, theirs, reps_for(shape.flop), hbm_gbs, lead_us=CALL_LEAD_US)
    except Exception as e:  # report, don't stop the suite
        row.ok, row.error = False, f"{type(e).__name__}: {e}"
    return row


def _time(bench: Bench, row: SuiteRow, ours, theirs, reps: int, hbm_gbs: float | None,
          lead_us: float = 0.0) -> None:
    """ours and theirs (cuBLAS) interleaved, `reps` each (after a GPU spin of lead_us before
    each start event, bench.py): medians, percentiles, rates, GPU state."""
    t_ours, t_theirs = bench.time_interleaved([ours, theirs], reps, lead_us=lead_us)
    row.reps = reps
    row.ms, row.ms_p10, row.ms_p90 = statistics.median(t_ours), percentile(t_ours, .1), percentile(t_ours, .9)
    row.cublas_ms = statistics.median(t_theirs)
    row.cublas_ms_p10, row.cublas_ms_p90 = percentile(t_theirs, .1), percentile(t_theirs, .9)
    fill_rates(row, hbm_gbs)
    row.gpu = bench.nvml.sample()


def fill_rates(row: SuiteRow, hbm_gbs: float | None) -> None:
    """Ratio, TFLOP/s and GB/s from the medians (bytes: A + B + C once, the real shape)."""
    flop = 2.0 * row.M * row.N * row.K
    nbytes = cost_model.compulsory_bytes(row.M, row.N, row.K)
    row.ratio_to_cublas = row.cublas_ms / row.ms
    row.tflops, row.cublas_tflops = flop / row.ms / 1e9, flop / row.cublas_ms / 1e9
    row.gbs, row.cublas_gbs = nbytes / row.ms / 1e6, nbytes / row.cublas_ms / 1e6
    if hbm_gbs:
        row.hbm_copy_fraction = row.gbs / hbm_gbs


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def _shape_name(r: dict) -> str:
    return f"{r['M']}x{r['N']}x{r['K']}"


def summarize(rows: list[dict]) -> dict:
    """Per dtype: shapes, correct, geomean ratio, worst shape, per-group geomeans, and the
    small-M rows' worst ratio and worst fraction of the copy bandwidth."""
    out = {}
    for dtype in dict.fromkeys(r["dtype"] for r in rows):
        rs = [r for r in rows if r["dtype"] == dtype]
        timed = [r for r in rs if r["ok"] and math.isfinite(r["ratio_to_cublas"])]
        s = {"shapes": len(rs), "ok": sum(bool(r["ok"]) for r in rs),
             "failed": [_shape_name(r) for r in rs if not r["ok"]],
             "geomean_ratio": geomean([r["ratio_to_cublas"] for r in timed])}
        if timed:
            w = min(timed, key=lambda r: r["ratio_to_cublas"])
            s["worst"] = {"shape": _shape_name(w), "label": w["label"], "kernel": w["kernel"],
                          "ratio_to_cublas": w["ratio_to_cublas"]}
            s["groups"] = {g: geomean([r["ratio_to_cublas"] for r in timed if r["group"] == g])
                           for g in dict.fromkeys(r["group"] for r in timed)}
            s["kernels"] = {k: sum(r["kernel"] == k for r in timed) for k in dict.fromkeys(r["kernel"] for r in timed)}
            tuned = [r for r in timed if r.get("autotune_ms")]
            if tuned:  # how often the model's pick was the measured fastest
                s["autotune_agrees_with_model"] = sum(r["heuristic"] == r["kernel"] for r in tuned) / len(tuned)
            small = [r for r in timed if r["M"] <= SMALL_M]
            if small:
                s["small_m"] = {"shapes": len(small),
                                "min_ratio": min(r["ratio_to_cublas"] for r in small),
                                "min_hbm_copy_fraction": min((r["hbm_copy_fraction"] for r in small), default=math.nan)}
        out[dtype] = s
    return out


def suite_json_path(out_dir: Path, result: dict) -> Path:
    """benchmarks/results/<date>_<gpu>_suite_<name>_<commit>.json"""
    return record_path(out_dir, result, f"suite_{result['suite']}")


def run_suite(name: str, dtypes: list[str], *, shapes: list | None = None, device_index: int = 0,
              progress=None, autotune: bool = False, checkpoint=None, call: str = "kernel") -> dict:
    """Run suite `name` (or the given shapes) for each dtype; the JSON-able result.
    checkpoint(result), if given, is called after every row (result["complete"] False
    until the end), so a run killed by a timeout still leaves its rows. call: what is timed
    (CALLS, module docstring)."""
    import torch
    from ..library import runner
    if call not in CALLS:
        raise ValueError(f"call must be one of {', '.join(CALLS)}, got {call!r}")
    if autotune and call != "kernel":
        raise ValueError("autotune times kernels: it does not combine with a library call")
    shapes = shapes if shapes is not None else suites_mod.get_suite(name)
    runner.check_device(torch.device(f"cuda:{device_index}"))
    torch.cuda.set_device(device_index)
    bench = Bench(device_index)
    device = cost_model.Device(sms=cuda_device.num_sms(device_index))
    result = {
        "kind": "gemm-ladder suite", "suite": name if call == "kernel" else f"{name}-{call}", "call": call,
        "commit": git_commit(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "gpu": {"torch_name": torch.cuda.get_device_name(device_index), **bench.nvml.static()},
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "method": {"reps": f"clamp(ceil({REPS_FLOP:.0e} / FLOP), {MIN_REPS}, {MAX_REPS}) per side",
                   "l2_flush_bytes": bench.flush_buf.numel() * 4, "interleaved": True,
                   "timer": _timer(call), "lead_us": 0.0 if call == "kernel" else CALL_LEAD_US,
                   "inputs": "randn fp32 -> dtype, fresh per shape",
                   "reference": "fp32 torch.matmul (TF32 off)",
                   "tolerance(max,rel)": {d: tolerance(d) for d in dtypes},
                   "ours": ("runner.plan of the selected step (prebuilt launch); N, K zero-padded to "
                            "multiples of 8 where the step needs it" if call == "kernel" else
                            "gemm_ladder.matmul(A, B) with B row-major (K, N), allocating C" if call == "matmul"
                            else "gemm_ladder.matmul_nt(A, B) with B (N, K), allocating C"),
                   "cublas": ("torch.matmul(A, B.T, out=C)" if call == "kernel" else
                              "torch.matmul(A, B) on the same B, allocating C" if call == "matmul" else
                              "torch.matmul(A, B.T) on the same B, allocating C"),
                   "bytes": "A + B + C once",
                   "selection": {"model": "library/select.py", "device": asdict(device),
                                 "candidates": [str(c) for c in select.candidate_keys()],
                                 "autotune": autotune}},
        "memory": {}, "rows": [], "complete": False,
    }
    task = progress.add_task("suite", total=len(shapes) * len(dtypes)) if progress else None
    for dtype in dtypes:
        for shape in shapes:
            if progress:
                progress.update(task, description=f"{DTYPES[dtype]} {shape.M}x{shape.N}x{shape.K}")
            result["rows"].append(asdict(measure_shape(bench, shape, dtype, device, None, autotune=autotune,
                                                       gpu=result["gpu"]["torch_name"], call=call)))
            torch.cuda.empty_cache()
            if checkpoint:
                result["summary"] = summarize(result["rows"])
                checkpoint(result)
            if progress:
                progress.advance(task)
    # the copies last, as in bench.run: a failed graph capture cannot disturb the GEMMs
    result["memory"] = _memory(bench)
    hbm = result["memory"].get("hbm_copy_gbs")
    for r in result["rows"]:
        if hbm and r["ok"]:
            r["hbm_copy_fraction"] = r["gbs"] / hbm
    result["summary"] = summarize(result["rows"])
    result["gpu_after"] = bench.nvml.sample()
    result["complete"] = True
    return result


def _timer(call: str) -> str:
    """The method's timer: library calls get the GPU spin (CALL_LEAD_US) before each start event."""
    if call == "kernel":
        return "CUDA events per call"
    return (f"CUDA events per call, each start event after a GPU spin of >= {CALL_LEAD_US:g} us "
            "(torch.cuda._sleep) behind the L2 flush")


def _memory(bench) -> dict:
    from .bandwidth import measure_copy
    return measure_copy(bench)


def plan_suite(name: str, dtypes: list[str], device: cost_model.Device = cost_model.Device()) -> list[dict]:
    """What a run would do, without a GPU: per shape and dtype the pick, the reps and the
    model's time per call (an estimate for planning, not a measurement)."""
    out = []
    for dtype in dtypes:
        for s in suites_mod.get_suite(name):
            ch = select.choose(s.M, s.N, s.K, dtype, device=device,
                               b_misaligned=cost_model.contiguous_b_misaligned(s.N, s.K))
            out.append({"M": s.M, "N": s.N, "K": s.K, "dtype": dtype, "group": s.group, "label": s.label,
                        "kernel": ch.pick.key if ch.pick else None,
                        "padded": bool(ch.pick and ch.pick.padded), "reps": reps_for(s.flop),
                        "model_us": ch.pick.score_us if ch.pick else math.nan})
    return out
