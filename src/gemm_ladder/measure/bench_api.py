"""`gemm-ladder bench --api`: the library as a caller sees it, beside the kernel, against
torch.matmul in the same process.

Two measurements (method: bench.py's, reused — interleaved calls, L2 flush before each,
CUDA events, medians, NVML clocks):
- host time per call: 2,000 back-to-back calls at 128³ with no synchronization in between,
  wall clock divided by the calls; rounds alternate ours and torch's, the median round counts.
  The headline (`host_us_per_call`) is the row-major-b form; `host_us_max_over_calls` is the
  worst form, so the headline cannot hide one;
- device time per call at each size and dtype: a kernel-level row (runner.plan, the ladder
  benchmark's measurement, K-major operands) of each step the calls run (the library chooses
  per shape and layout: select.step_for), interleaved with torch.matmul, as the ladder JSON
  has it; then each call form (`matmul_nt` with out=, `matmul` with a row-major b, `matmul`
  with a transposed-view b) interleaved three ways in one run — [the call, the kernel-level
  launch of the same step, torch.matmul of the same layout] — so the API/kernel gap
  (`api_vs_kernel` = kernel ms / call ms, i.e. the call's ratio to cuBLAS over the kernel's
  in that same run) is free of the clock drift between separately timed rows (the H200
  under its power cap drifts ~5 % at 8192³ over a run).
"""
from __future__ import annotations

import datetime as _dt
import platform
import statistics
import time
from pathlib import Path

from ..library import api, fastpath, runner
from . import bench
from .gpuinfo import record_path

CALLS = ("matmul_nt(a, b_nk, out=c)", "matmul(a, b_kn)", "matmul(a, b_nk.T)")
HEADLINE_CALL = "matmul(a, b_kn)"  # b row-major (K, N): the layout most callers have
DEFAULT_SIZES = [(4096, 4096, 4096), (8192, 8192, 8192)]


def _call_pairs(torch, gl, a, b_nk, b_kn, c_ours, c_torch):
    """call form -> (ours, torch.matmul with the same operands)."""
    b_view = b_nk.T
    return {
        "matmul_nt(a, b_nk, out=c)": (lambda: gl.matmul_nt(a, b_nk, out=c_ours),
                                      lambda: torch.matmul(a, b_view, out=c_torch)),
        "matmul(a, b_kn)": (lambda: gl.matmul(a, b_kn), lambda: torch.matmul(a, b_kn)),
        "matmul(a, b_nk.T)": (lambda: gl.matmul(a, b_view), lambda: torch.matmul(a, b_view)),
    }


def host_overhead(torch_dtype, *, calls: int = 2000, rounds: int = 5, size: int = 128, device_index: int = 0,
                  device: str | None = None) -> dict:
    """Host µs per call, ours and torch's, for each call form at size³."""
    import torch
    import gemm_ladder as gl
    dev = device or f"cuda:{device_index}"
    a = torch.randn(size, size, device=dev).to(torch_dtype)
    b_nk = torch.randn(size, size, device=dev).to(torch_dtype)
    b_kn = b_nk.T.contiguous()
    c1, c2 = (torch.empty(size, size, device=dev, dtype=torch_dtype) for _ in range(2))
    pairs = _call_pairs(torch, gl, a, b_nk, b_kn, c1, c2)

    def per_call_us(fn) -> float:
        torch.cuda.synchronize(device_index)
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize(device_index)
        return (t1 - t0) / calls * 1e6

    out = {}
    for name, (ours, theirs) in pairs.items():
        for fn in (ours, theirs):  # warm: compile, configurations, cuBLAS handles
            fn()
        samples = ([], [])
        for r in range(rounds):
            order = (0, 1) if r % 2 == 0 else (1, 0)
            for i in order:
                samples[i].append(per_call_us((ours, theirs)[i]))
        out[name] = {"us": statistics.median(samples[0]), "torch_us": statistics.median(samples[1]),
                     "rounds_us": [round(x, 3) for x in samples[0]],
                     "torch_rounds_us": [round(x, 3) for x in samples[1]]}
    return out


def _timed_row(b: bench.Bench, ours, theirs, *, kernel=None, reps: int, min_reps: int, budget_s: float) -> dict:
    """ours against theirs (cuBLAS), interleaved; with `kernel` (the kernel-level launch of
    the step ours runs) a three-way interleave, whose kernel timing is the same run's."""
    fns = [ours, theirs] if kernel is None else [ours, kernel, theirs]
    one = b.time_interleaved(fns, 1)[0][0]
    n = max(min_reps, min(reps, int(budget_s * 1e3 / max(one, 1e-3))))
    times = b.time_interleaved(fns, n)
    mine, cublas = times[0], times[-1]
    ms, cms = statistics.median(mine), statistics.median(cublas)
    row = {"reps": n, "ms": ms, "ms_p10": bench.percentile(mine, .1), "ms_p90": bench.percentile(mine, .9),
           "cublas_ms": cms, "cublas_ms_p10": bench.percentile(cublas, .1),
           "cublas_ms_p90": bench.percentile(cublas, .9), "ratio_to_cublas": cms / ms}
    if kernel is not None:
        kms = statistics.median(times[1])
        row.update({"kernel_ms": kms, "kernel_ms_p10": bench.percentile(times[1], .1),
                    "kernel_ms_p90": bench.percentile(times[1], .9), "kernel_ratio_to_cublas": cms / kms,
                    "api_vs_kernel": kms / ms, "within_3pct_of_kernel": kms / ms >= 0.97})
    return row


def _call_config(call: str, a, b_nk, b_kn, c):
    """The fast path's configuration of a call form (built, and its kernel loaded, once)."""
    if call.startswith("matmul_nt"):
        return fastpath.config_for("nt", a, b_nk, c)
    return fastpath.config_for("mm", a, b_kn if "b_kn" in call else b_nk.T)


def _layouts(cfg) -> str:
    staged = [n for n, op in (("a", cfg.a), ("b", cfg.b)) if not op.direct]
    return "in place" if not staged else "copies " + ", ".join(f"{n} ({getattr(cfg, n).why})" for n in staged)


def _kernel_row(bn, st, a, b_nk, ref, c_kernel, c_torch, base: dict, dtype: str, **timing) -> tuple[dict, object]:
    """The ladder benchmark's measurement of step `st` (runner.plan, K-major operands), and
    the checked launch (None if it failed), which the call rows time beside theirs."""
    import torch
    row = {**base, "step": st.key, "call": "kernel (launch.plan)", "ok": False, "error": ""}
    p = None
    try:
        c_kernel.fill_(float("nan"))
        p = runner.plan(st, a, b_nk, c_kernel)
        p()
        p.synchronize()
        row["ok"], row["max_abs_err"], row["rel_err"], row["error"] = bench.check_output(c_kernel, ref, dtype)
        if row["ok"]:
            row.update(_timed_row(bn, p, lambda: torch.matmul(a, b_nk.T, out=c_torch), **timing))
            row["gpu"] = bn.nvml.sample()
    except Exception as e:  # report, don't stop the run
        row["ok"], row["error"] = False, f"{type(e).__name__}: {e}"
    return row, (p if row["ok"] else None)


def device_rows(sizes, dtype: str, *, reps: int = 50, min_reps: int = 3, budget_s: float = 2.0,
                device_index: int = 0, log=print) -> list[dict]:
    import torch
    import gemm_ladder as gl
    torch_dtype = {"float16": torch.float16, "bfloat16": torch.bfloat16}[dtype]
    bn = bench.Bench(device_index)
    timing = dict(reps=reps, min_reps=min_reps, budget_s=budget_s)
    rows = []
    for (M, N, K) in sizes:
        a, b_nk = bn.inputs(M, N, K, torch_dtype)
        b_kn = b_nk.T.contiguous()
        ref = torch.matmul(a.float(), b_nk.float().T)
        c_ours, c_kernel, c_torch = (torch.empty((M, N), dtype=torch_dtype, device=a.device) for _ in range(3))
        base = {"M": M, "N": N, "K": K, "dtype": dtype}
        pairs = _call_pairs(torch, gl, a, b_nk, b_kn, c_ours, c_torch)
        configs = {call: _call_config(call, a, b_nk, b_kn, c_ours) for call in pairs}
        kernels = {}  # step key -> (its kernel row, its checked launch)
        for st in {cfg.step.key: cfg.step for cfg in configs.values()}.values():
            row, plan = _kernel_row(bn, st, a, b_nk, ref, c_kernel, c_torch, base, dtype, **timing)
            rows.append(row)
            kernels[st.key] = (row, plan)
            log(f"{M}x{N}x{K} {dtype} kernel {st.key}: x{row.get('ratio_to_cublas', float('nan')):.3f} cuBLAS")
        for call, (ours, theirs) in pairs.items():
            cfg = configs[call]
            row = {**base, "step": cfg.step.key, "call": call, "operands": _layouts(cfg), "ok": False, "error": ""}
            try:
                c_ours.fill_(float("nan"))
                res = ours()
                torch.cuda.synchronize(device_index)
                row["ok"], row["max_abs_err"], row["rel_err"], row["error"] = bench.check_output(res, ref, dtype)
                del res
                if row["ok"]:
                    krow, plan = kernels[cfg.step.key]
                    # the 3 % judgement uses the kernel timed in this run (kernel=plan), not krow
                    row.update(_timed_row(bn, ours, theirs, kernel=plan, **timing))
                    row["gpu"] = bn.nvml.sample()
                    if krow.get("ratio_to_cublas"):
                        row["kernel_row_ratio_to_cublas"] = krow["ratio_to_cublas"]
            except Exception as e:
                row["ok"], row["error"] = False, f"{type(e).__name__}: {e}"
            rows.append(row)
            gap = row.get("api_vs_kernel")
            log(f"  {call} ({cfg.step.key}): x{row.get('ratio_to_cublas', float('nan')):.3f} cuBLAS"
                + (f", kernel x{row['kernel_ratio_to_cublas']:.3f} in the same run, API/kernel {gap:.3f}"
                   if gap is not None else "") + f" ({row['operands']})")
        del a, b_nk, b_kn, ref, c_ours, c_kernel, c_torch, configs, kernels
        torch.cuda.empty_cache()
    return rows


def run(sizes=None, dtypes=("float16", "bfloat16"), *, reps: int = 50, budget_s: float = 2.0,
        host_calls: int = 2000, device_index: int = 0, log=print) -> dict:
    import torch
    runner.check_device(torch.device(f"cuda:{device_index}"))
    torch.cuda.set_device(device_index)
    torch.backends.cuda.matmul.allow_tf32 = False
    nvml = bench.Nvml(device_index)
    result = {
        "kind": "gemm-ladder bench --api",
        "commit": bench.git_commit(),
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "host": platform.node(),
        "gpu": {"torch_name": torch.cuda.get_device_name(device_index), **nvml.static()},
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "method": {"host": f"{host_calls} back-to-back calls at 128^3 fp16, no sync in between, wall clock / calls; "
                           "5 rounds alternating ours and torch.matmul, median round",
                   "device": "bench.py's: interleaved with torch.matmul of the same layout, L2 flushed before each "
                             "call, CUDA events, medians", "reps": reps, "budget_s_per_row": budget_s,
                   "ratio": "cuBLAS ms / ours (> 1: faster than cuBLAS)",
                   "kernel row": "launch.plan (prepared launch, operands already K-major), as `gemm-ladder bench`, "
                                 "of each step the calls run (select.step_for: per shape and layout)",
                   "call row": "interleaved three ways in one run: [the call, the kernel row's launch of the same "
                               "step, torch.matmul]; kernel_ms / kernel_ratio_to_cublas / api_vs_kernel "
                               "(= kernel_ms / ms) / within_3pct_of_kernel come from that same run"},
    }
    log(f"host time per call, {host_calls} calls at 128^3 fp16 ...")
    host = host_overhead(torch.float16, calls=host_calls, device_index=device_index)
    result["host_us_per_call"] = host[HEADLINE_CALL]["us"]
    result["torch_host_us_per_call"] = host[HEADLINE_CALL]["torch_us"]
    result["host_call"] = HEADLINE_CALL
    worst = max(host, key=lambda c: host[c]["us"])  # the headline form must not hide a slower one
    result["host_us_max_over_calls"] = host[worst]["us"]
    result["host_call_max"] = worst
    result["host_us_by_call"] = host
    for call, h in host.items():
        log(f"  {call}: {h['us']:.2f} us (torch.matmul {h['torch_us']:.2f} us)")
    result["rows"] = []
    for dtype in dtypes:
        result["rows"] += device_rows(sizes or DEFAULT_SIZES, dtype, reps=reps, budget_s=budget_s,
                                      device_index=device_index, log=log)
    result["cache"] = api.cache_info()
    result["gpu_after"] = nvml.sample()
    return result


def default_json_path(out_dir: Path, result: dict) -> Path:
    """benchmarks/results/<date>_<gpu>_api_<commit>.json, like the other records."""
    return record_path(out_dir, result, "api")


def print_api(result: dict, console) -> None:
    from rich.table import Table
    h = result["host_us_by_call"]
    t = Table(title=f"host time per call, 128³ fp16, {result['gpu']['torch_name']}, commit {result['commit'][:12]}")
    for col in ("call", "ours µs", "torch.matmul µs"):
        t.add_column(col, justify="left" if col == "call" else "right")
    for call, v in h.items():
        t.add_row(call, f"{v['us']:.2f}", f"{v['torch_us']:.2f}")
    console.print(t)
    if "host_us_max_over_calls" in result:
        console.print(f"headline {result['host_call']}: {result['host_us_per_call']:.2f} us; "
                      f"worst form {result['host_call_max']}: {result['host_us_max_over_calls']:.2f} us")
    t = Table(title="API-level vs kernel-level ratio to cuBLAS (cuBLAS ms / ours); call rows: kernel timed in "
                    "the same interleaved run")
    numeric = ("ms", "kernel ms", "cuBLAS ms", "x cuBLAS", "kernel x cuBLAS", "API/kernel")
    for col in ("size", "dtype", "call", "step", *numeric, "operands"):
        t.add_column(col, justify="right" if col in numeric else "left")
    for r in result["rows"]:
        size = f"{r['M']}x{r['N']}x{r['K']}"
        if not r["ok"]:
            t.add_row(size, r["dtype"], r["call"], r.get("step", "-"), *["-"] * 6, f"[red]{r['error'][:60]}")
            continue
        gap, kms = r.get("api_vs_kernel"), r.get("kernel_ms")
        color = "green" if gap is None or gap >= 0.97 else "yellow"
        t.add_row(size, r["dtype"], r["call"], r.get("step", "-"), f"{r['ms']:.4f}",
                  "-" if kms is None else f"{kms:.4f}", f"{r['cublas_ms']:.4f}", f"{r['ratio_to_cublas']:.3f}",
                  f"{r.get('kernel_ratio_to_cublas', r['ratio_to_cublas']):.3f}",
                  "-" if gap is None else f"[{color}]{gap:.3f}", r.get("operands", ""))
    console.print(t)


def cli_main(args, console, out_dir: Path, json_path: Path | None = None) -> int:
    """The `bench --api` command (wired from cli/commands.py's cmd_bench, which checked the
    flags and the GPU): the JSON goes to json_path, else a dated name under out_dir."""
    import sys
    from rich.markup import escape
    dtypes = ("float16", "bfloat16") if args.dtype in (None, "both") else (args.dtype,)
    result = run(args.sizes or DEFAULT_SIZES, dtypes, reps=args.reps, budget_s=args.budget,
                 log=lambda m: console.print(escape(m)))
    result["command"] = " ".join(["gemm-ladder"] + sys.argv[1:])
    print_api(result, console)
    path = bench.write_json(result, json_path or default_json_path(out_dir, result))
    console.print(f"results: {path}")
    return 0 if all(r["ok"] for r in result["rows"]) else 1
