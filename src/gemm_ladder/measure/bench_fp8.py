"""`gemm-ladder bench --fp8`: the fp8 family against torch._scaled_mm, interleaved in one process.

Rows, per shape (squares and LLM projection shapes), each with its reference call:
- promoted (the library's default) per-tensor and row-wise scales against _scaled_mm with the
  same scales (use_fast_accum=False); block-wise scales against _scaled_mm per-tensor (torch
  has no block-wise path);
- fast accumulation (the sum in the tensor core) per-tensor and row-wise against _scaled_mm
  with use_fast_accum=True;
- at the squares, the ladder's step 11 against _scaled_mm per-tensor fast and against our own
  fp16 step 9 (ladder row: 'vs_step9').
Method: bench.py's (inputs quantized from random normal data, outputs checked against an fp32
reference of the dequantized inputs before timing, calls interleaved, L2 flushed before each,
CUDA events, medians), each call captured in a CUDA graph and replayed, so the figure is the
kernels' and the host's cost per eager call is measured apart (host_overhead); NVML sampled on
a thread during each row's timed loop. Accuracy: the
relative error per K with and without promotion, ours and torch's.
"""
from __future__ import annotations

import datetime as _dt
import platform
import statistics
from pathlib import Path

from ..library import fp8_api, fp8_runner
from . import bench
from .gpuinfo import Sampler, record_path

SQUARES = [(n, n, n) for n in (1024, 2048, 4096, 8192)]
PROJECTIONS = [(m, n, k) for m in (64, 128, 512, 2048, 8192) for n, k in ((7168, 2048), (28672, 4096), (4096, 7168))]
ACCURACY_K = (512, 1024, 2048, 4096, 8192, 16384)
# (row mode, fast_accum, torch's scales for the reference call)
MODES = (("tensor", False, "tensor"), ("row", False, "row"), ("block", False, "tensor"),
         ("tensor", True, "tensor"), ("row", True, "row"))


def _rel_err(out, ref) -> float:
    return float((out.float() - ref).abs().max() / ref.abs().max().clamp_min(1e-30))


def _quantized(torch, b: bench.Bench, M, N, K, mode):
    x = torch.randn((M, K), device=f"cuda:{b.dev}", generator=b.gen)
    w = torch.randn((N, K), device=f"cuda:{b.dev}", generator=b.gen)
    qa, sa = fp8_api.quantize_fp8(x, mode, operand="a")
    qb, sb = fp8_api.quantize_fp8(w, mode, operand="b")
    ref = fp8_api.dequantize_fp8(qa, sa, mode, "a") @ fp8_api.dequantize_fp8(qb, sb, mode, "b").t()
    return qa, sa, qb, sb, ref


def _timed(b: bench.Bench, fns, reps: int, budget_s: float):
    """Each call captured in a CUDA graph and the graphs replayed, interleaved, L2 flushed before
    each: the kernels' time, not the host's (host_overhead measures that apart)."""
    graphs = [bench.graphed(f) for f in fns]
    replays = [g.replay for g in graphs]
    one = b.time_interleaved(replays, 1)[0][0]
    n = max(3, min(reps, int(budget_s * 1e3 / max(one, 1e-3))))
    with Sampler(b.nvml) as s:
        times = b.time_interleaved(replays, n)
    return n, [statistics.median(t) for t in times], s.summary()


def shape_rows(b: bench.Bench, M: int, N: int, K: int, *, reps: int, budget_s: float, step11: bool) -> list[dict]:
    torch = b.torch
    flops = 2.0 * M * N * K
    rows = []
    cache = {}
    for mode, fast, ref_mode in MODES:
        if mode not in cache:
            cache[mode] = _quantized(torch, b, M, N, K, mode)
        qa, sa, qb, sb, ref = cache[mode]
        if ref_mode not in cache:
            cache[ref_mode] = _quantized(torch, b, M, N, K, ref_mode)
        ta, tsa, tb, tsb, _ = cache[ref_mode]
        row = {"mode": mode, "fast_accum": fast, "M": M, "N": N, "K": K, "dtype": "e4m3", "out": "bfloat16",
               "entry": fp8_runner.choose_key(M, N, K, mode, fast), "reference": f"_scaled_mm {ref_mode}"
                                                                               f"{' fast' if fast else ''}"}
        ours = lambda: fp8_api.scaled_mm(qa, qb.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=fast)  # noqa
        theirs = lambda: torch._scaled_mm(ta, tb.t(), tsa, tsb, out_dtype=torch.bfloat16, use_fast_accum=fast)  # noqa
        try:
            out = ours()
            row["rel_err"] = _rel_err(out, ref)
            row["ok"] = bool(torch.isfinite(out).all()) and row["rel_err"] < 2e-2
            row["torch_rel_err"] = _rel_err(theirs(), cache[ref_mode][4])
            n, (ms, tms), gpu = _timed(b, [ours, theirs], reps, budget_s)
            row.update({"reps": n, "ms": ms, "scaled_mm_ms": tms, "tflops": flops / ms / 1e9,
                        "scaled_mm_tflops": flops / tms / 1e9, "ratio_to_scaled_mm": tms / ms, "gpu": gpu})
        except Exception as e:  # a row that cannot run says why; the record keeps going
            row.update({"ok": False, "error": f"{type(e).__name__}: {e}"})
        rows.append(row)
    if step11:
        rows.append(_step11_row(b, M, N, K, cache["tensor"], reps=reps, budget_s=budget_s))
    return rows


def _step11_row(b: bench.Bench, M, N, K, quantized, *, reps: int, budget_s: float) -> dict:
    from ..library import runner
    torch = b.torch
    qa, sa, qb, sb, ref = quantized
    a16, b16 = b.inputs(M, N, K, torch.float16)
    c16 = torch.empty((M, N), device=a16.device, dtype=torch.float16)
    row = {"mode": "tensor", "fast_accum": True, "M": M, "N": N, "K": K, "dtype": "e4m3", "out": "bfloat16",
           "entry": "11", "step": "11", "reference": "_scaled_mm tensor fast; vs_step9: our fp16 step 9"}
    try:
        sa1, sb1 = sa.reshape(1), sb.reshape(1)
        qbt = qb.contiguous()
        ours = lambda: fp8_runner.run_fp8(qa, qbt, sa1, sb1, mode="tensor", out_dtype=torch.bfloat16,  # noqa
                                          entry="11")
        theirs = lambda: torch._scaled_mm(qa, qb.t(), sa, sb, out_dtype=torch.bfloat16, use_fast_accum=True)  # noqa
        runner.plan("9", a16, b16, c16)()  # built and loaded once, outside any capture
        step9 = lambda: runner.run_step("9", a16, b16, c16)  # noqa: E731 - planned per call: on the capturing stream
        out = ours()
        row["rel_err"] = _rel_err(out, ref)
        row["ok"] = bool(torch.isfinite(out).all()) and row["rel_err"] < 2e-2
        n, (ms, tms, s9ms), gpu = _timed(b, [ours, theirs, step9], reps, budget_s)
        flops = 2.0 * M * N * K
        row.update({"reps": n, "ms": ms, "scaled_mm_ms": tms, "step9_fp16_ms": s9ms, "tflops": flops / ms / 1e9,
                    "scaled_mm_tflops": flops / tms / 1e9, "ratio_to_scaled_mm": tms / ms, "vs_step9": s9ms / ms,
                    "gpu": gpu})
    except Exception as e:
        row.update({"ok": False, "error": f"{type(e).__name__}: {e}"})
    return row


def accuracy(b: bench.Bench, M: int = 1024, N: int = 1024, ks=ACCURACY_K) -> list[dict]:
    """Relative error (max |C - ref| / max |ref|) per K, per-tensor scales, with and without
    promotion, ours and torch's; the reference in fp64 from the dequantized inputs."""
    torch = b.torch
    out = []
    for K in ks:
        x = torch.rand((M, K), device=f"cuda:{b.dev}", generator=b.gen)  # positive: the sum grows with K
        w = torch.rand((N, K), device=f"cuda:{b.dev}", generator=b.gen)
        qa, sa = fp8_api.quantize_fp8(x, "tensor", operand="a")
        qb, sb = fp8_api.quantize_fp8(w, "tensor", operand="b")
        ref = (fp8_api.dequantize_fp8(qa, sa, "tensor", "a").double()
               @ fp8_api.dequantize_fp8(qb, sb, "tensor", "b").double().t())
        r = {"M": M, "N": N, "K": K}
        for fast in (False, True):
            tag = "fast" if fast else "promoted"
            ours = fp8_api.scaled_mm(qa, qb.t(), sa, sb, out_dtype=torch.float32, use_fast_accum=fast)
            theirs = torch._scaled_mm(qa, qb.t(), sa, sb, out_dtype=torch.float32, use_fast_accum=fast)
            r[f"ours_{tag}"] = float(((ours.double() - ref).abs().max() / ref.abs().max()))
            r[f"torch_{tag}"] = float(((theirs.double() - ref).abs().max() / ref.abs().max()))
        out.append(r)
    return out


def _build(job) -> str:
    key, mode, out = job
    try:
        fp8_runner.get(key).compile(variant=fp8_runner.Variant(mode, out))
        return ""
    except Exception as e:  # noqa: BLE001 - the row that needs it reports it
        return f"{key} {mode}: {type(e).__name__}: {e}"


def warm_builds(shapes, log=print) -> None:
    """Compile the builds the rows will load, side by side in worker processes (NVRTC needs no
    GPU; the JIT's disk cache hands them to this process), instead of one at a time."""
    import concurrent.futures as cf
    import multiprocessing
    import os
    jobs = {(fp8_runner.choose_key(M, N, K, mode, fast), mode, "bfloat16") for M, N, K in shapes
            for mode, fast, _ in MODES}
    jobs |= {("11", "tensor", "bfloat16") for M, N, K in shapes if M == N == K}
    with cf.ProcessPoolExecutor(min(len(jobs), os.cpu_count() or 1, 16),
                                mp_context=multiprocessing.get_context("spawn")) as pool:
        failed = [e for e in pool.map(_build, sorted(jobs)) if e]
    log(f"{len(jobs)} builds compiled" + (f"; failed: {failed}" if failed else ""))


def host_overhead(b: bench.Bench, size: int = 256, calls: int = 2000, rounds: int = 5) -> dict:
    """Host µs per eager call at size³ (per-tensor scales, promoted; small enough that the
    kernels finish before the next call is issued), back to back with no synchronize, wall
    clock / calls; rounds alternate ours and torch._scaled_mm, the median round counts."""
    import time
    torch = b.torch
    qa, sa, qb, sb, _ = _quantized(torch, b, size, size, size, "tensor")
    fns = (lambda: fp8_api.scaled_mm(qa, qb.t(), sa, sb, out_dtype=torch.bfloat16),  # noqa
           lambda: torch._scaled_mm(qa, qb.t(), sa, sb, out_dtype=torch.bfloat16))  # noqa
    samples = ([], [])
    for f in fns:
        f()
    for r in range(rounds):
        for i in ((0, 1) if r % 2 == 0 else (1, 0)):
            torch.cuda.synchronize(b.dev)
            t0 = time.perf_counter()
            for _ in range(calls):
                fns[i]()
            samples[i].append((time.perf_counter() - t0) / calls * 1e6)
            torch.cuda.synchronize(b.dev)
    return {"size": size, "us": statistics.median(samples[0]), "scaled_mm_us": statistics.median(samples[1])}


def run(shapes=None, *, reps: int = 30, budget_s: float = 0.6, device_index: int = 0, log=print) -> dict:
    import torch
    from ..library import runner
    runner.check_device(torch.device(f"cuda:{device_index}"))
    torch.cuda.set_device(device_index)
    b = bench.Bench(device_index)
    result = {"kind": "gemm-ladder bench --fp8", "commit": bench.git_commit(),
              "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "host": platform.node(),
              "gpu": {"torch_name": torch.cuda.get_device_name(device_index), **b.nvml.static()},
              "torch": torch.__version__, "cuda": torch.version.cuda,
              "method": {"timing": "each call captured once in a CUDA graph and replayed, interleaved with the "
                                   "reference call's graph, L2 flushed before each replay, CUDA events, medians "
                                   "(the kernels' time; the eager door's host cost per call is `host`)",
                         "gpu": "NVML sampled every 50 ms during the timed loop",
                         "ratio": "reference ms / ours (> 1: faster than _scaled_mm)",
                         "inputs": "random normal fp32 quantized to e4m3 with each mode's scales (fp8_api."
                                   "quantize_fp8); output bf16", "reps": reps, "budget_s_per_row": budget_s}}
    warm_builds(shapes or (SQUARES + PROJECTIONS), log)
    result["host"] = host_overhead(b)
    h = result["host"]
    log(f"host us per eager call at {h['size']}^3: {h['us']:.1f} (torch._scaled_mm {h['scaled_mm_us']:.1f})")
    rows = []
    for M, N, K in shapes or (SQUARES + PROJECTIONS):
        log(f"fp8 {M}x{N}x{K} ...")
        rows += shape_rows(b, M, N, K, reps=reps, budget_s=budget_s, step11=(M == N == K))
        for r in rows[-len(MODES) - (M == N == K):]:
            log(f"  {r['entry']:>14} {r['mode']:>6}{' fast' if r['fast_accum'] else '     '} "
                + (f"{r.get('tflops', float('nan')):7.0f} TF  x{r.get('ratio_to_scaled_mm', float('nan')):.3f}"
                   f"  err {r.get('rel_err', float('nan')):.1e}" if 'ms' in r else r.get('error', '')))
    result["rows"] = rows
    log("accuracy per K ...")
    result["accuracy"] = accuracy(b)
    for a in result["accuracy"]:
        log(f"  K={a['K']:>6}: promoted {a['ours_promoted']:.1e} (torch {a['torch_promoted']:.1e}), "
            f"fast {a['ours_fast']:.1e} (torch {a['torch_fast']:.1e})")
    result["summary"] = summary(rows)
    return result


def summary(rows: list[dict]) -> dict:
    """Geomean and worst ratio per (mode, fast) over the rows that ran, and M <= 128's."""
    import math
    out = {}
    for mode, fast, _ in MODES:
        rs = [r["ratio_to_scaled_mm"] for r in rows if r.get("mode") == mode and r.get("fast_accum") == fast
              and r.get("entry") != "11" and "ratio_to_scaled_mm" in r]
        small = [r["ratio_to_scaled_mm"] for r in rows if r.get("mode") == mode and r.get("fast_accum") == fast
                 and r.get("entry") != "11" and "ratio_to_scaled_mm" in r and r["M"] <= 128]
        if rs:
            out[f"{mode}{'_fast' if fast else ''}"] = {
                "geomean": math.exp(sum(map(math.log, rs)) / len(rs)), "worst": min(rs), "rows": len(rs),
                "small_m_geomean": math.exp(sum(map(math.log, small)) / len(small)) if small else None}
    out["all_ok"] = all(r.get("ok") for r in rows)
    return out


def default_json_path(out_dir: Path, result: dict) -> Path:
    return record_path(out_dir, result, "fp8")


def cli_main(args, console, out_dir: Path, json_path: Path | None = None) -> int:
    import json
    import sys
    shapes = args.sizes or None
    result = run(shapes, reps=min(args.reps, 30), budget_s=min(args.budget, 0.6),
                 log=lambda m: console.print(m, markup=False, highlight=False))
    result["command"] = " ".join(["gemm-ladder"] + sys.argv[1:])
    path = json_path or default_json_path(out_dir, result)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    from .plots_fp8 import write_fp8_roofline
    console.print(f"roofline: {write_fp8_roofline(result, path.with_name(path.stem + '_roofline.png'))}",
                  markup=False, highlight=False)
    for key, s in result["summary"].items():
        if isinstance(s, dict):
            console.print(f"{key:>12}: geomean x{s['geomean']:.3f}, worst x{s['worst']:.3f} over {s['rows']} shapes",
                          markup=False, highlight=False)
    console.print(f"results: {path}", markup=False, highlight=False)
    return 0 if result["summary"]["all_ok"] else 1
