"""`gemm-ladder bench --attention`: every attention step against torch SDPA's cuDNN, flash and
efficient backends, interleaved per case in one process.

Cases (attention_report.py): fp16 and bf16, head dims 64/128/256, S = 1k, 4k, 16k, causal and
not; 16k tokens per call (B = 16384 // S) at hidden 2048 (H = 2048 // D); q, k, v (B, H, S, D)
from randn. Steps: A1 (S materialized: by default at S <= 4k only, never past ~8 GB) and every
fused step of gemm_ladder.families.attention present; a step asked for and absent is skipped
with a printed line. Backends: each forced with torch.nn.attention.sdpa_kernel; one that
refuses a case is recorded as null with its reason.
Method: bench.py's: each kernel runs once and its output is checked (finite everywhere; on one
head, at ~1024 query rows spread over S, max |error| against an fp32 reference, held to twice
the best backend's error plus one unit: attention_ref.tolerance); then every kernel that passed
is timed in one loop, called in turn with the order flipping each repetition, the L2 flushed
before each call, CUDA events, medians; NVML sampled on a thread during that loop. A step that
fails its check is reported and not timed.
"""
from __future__ import annotations

import datetime as _dt
import math
import platform
import statistics
import warnings
from pathlib import Path

from . import attention_report as rep
from . import bench
from .gpuinfo import Sampler, record_path

BACKEND_ENUM = {"cudnn": "CUDNN_ATTENTION", "flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION"}


def _backend_fn(torch, name: str, q, k, v, causal: bool):
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = getattr(SDPBackend, BACKEND_ENUM[name])
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def call():
        with sdpa_kernel(backend):
            return sdpa(q, k, v, is_causal=causal)
    return call


def _reason(e: Exception, caught) -> str:
    """The error and the warnings torch gave with it (SDPA says there why a backend refused)."""
    said = "; ".join(dict.fromkeys(str(w.message).splitlines()[0] for w in caught if str(w.message)))
    return (f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}" + (f" ({said})" if said else ""))[:400]


def _timed(b: bench.Bench, fns, reps: int, budget_s: float):
    """(n, per-fn ms lists, NVML summary): n repetitions, as many as the slowest kernel fits in
    budget_s, within [3, reps]."""
    ones = b.time_interleaved(fns, 1)
    n = max(3, min(reps, int(budget_s * 1e3 / max(max(t[0] for t in ones), 1e-3))))
    with Sampler(b.nvml) as s:
        times = b.time_interleaved(fns, n)
    return n, times, s.summary()


def _device(b) -> str:
    return f"cuda:{b.dev}" if isinstance(b.dev, int) else str(b.dev)


def _sync(b) -> None:
    if _device(b).startswith("cuda"):
        b.torch.cuda.synchronize(b.dev)


def _case_inputs(b: bench.Bench, B, H, S, D, dtype):
    return [b.torch.randn((B, H, S, D), device=_device(b), dtype=dtype, generator=b.gen) for _ in range(3)]


def run_case(b: bench.Bench, gl, dtype: str, D: int, S: int, causal: bool, steps: list[str], default: bool, *,
             labels: dict[str, str], reps: int, budget_s: float) -> tuple[dict, list[dict], list[dict]]:
    """(case, step rows, skipped) for one case: checks first, then one interleaved timed loop."""
    from . import attention_ref as ref_mod
    torch = b.torch
    dt = getattr(torch, dtype)
    B, H = rep.case_shape(S, D)
    fl = rep.flops(B, H, S, D, causal)
    case = {"dtype": dtype, "D": D, "S": S, "causal": causal, "B": B, "H": H, "flops": fl}
    q, k, v = _case_inputs(b, B, H, S, D, dt)
    rows_idx = ref_mod.sample_rows(S)
    ref, _, logit_max = ref_mod.reference(q[:1, :1], k[:1, :1], v[:1, :1], causal=causal, rows=rows_idx,
                                          acc=torch.float32)
    ref, ref_max = ref[0, 0], float(ref.abs().max())
    head_err = lambda out: ref_mod.max_abs_err(out[0, 0, rows_idx], ref)  # noqa: E731

    timed, names = [], []
    for name in rep.BACKENDS:
        fn = _backend_fn(torch, name, q, k, v, causal)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                out = fn()
                _sync(b)
                err = head_err(out)
                case[f"{name}_max_abs_err"] = err if math.isfinite(err) else None
                timed.append(fn)
                names.append(name)
                del out
            except Exception as e:  # this backend does not take the case: null, with torch's reason
                case.update({f"{name}_ms": None, f"{name}_tflops": None, f"{name}_max_abs_err": None,
                             f"{name}_error": _reason(e, caught)})
    sdpa_err = next((case[f"{n}_max_abs_err"] for n in rep.BACKENDS if case.get(f"{n}_max_abs_err") is not None),
                    None)

    rows, skipped = [], []
    for st in steps:
        if st == "A1" and (why := rep.a1_skip_reason(B, H, S, default)):
            skipped.append({"step": st, "dtype": dtype, "D": D, "S": S, "causal": causal, "reason": why})
            continue
        row = {"step": st, "label": labels.get(st, st), "dtype": dtype, "D": D, "S": S, "causal": causal, "B": B,
               "H": H, "flops": fl, "ok": False, "error": "", "reps": None, "ms": None, "ms_p10": None, "ms_p90": None,
               "tflops": None, "max_abs_err": None, "tolerance": None, "gpu": {}}
        fn = (lambda st=st: gl.attention(q, k, v, causal=causal, step=rep.step_arg(st)))
        if st == rep.LIBRARY_STEP:  # which build the library chose
            from ..library.attention_runner import choose_key
            row["build"] = choose_key(S, S, D, causal)
        try:
            out, _ = ref_mod.call_poisoned(gl.attention, q, k, v, causal=causal, step=rep.step_arg(st))
            _sync(b)
            finite = bool(torch.isfinite(out).all())
            row["max_abs_err"] = head_err(out) if finite else None  # JSON has no NaN
            row["tolerance"] = ref_mod.tolerance(dt, ref_max, sdpa_err, materializes_s=(st == "A1"),
                                                 logit_max=float(logit_max.max()), v_max=float(v[0, 0].abs().max()))
            row["ok"] = finite and row["max_abs_err"] <= row["tolerance"]
            if not finite:
                row["error"] = "non-finite output (NaN where the output was not written, or overflow)"
            elif not row["ok"]:
                row["error"] = f"max abs error {row['max_abs_err']:.3e} > tolerance {row['tolerance']:.3e}"
            del out
        except Exception as e:  # a step that cannot run says why; the record keeps going
            row["error"] = f"{type(e).__name__}: {e}"[:400]
        if row["ok"]:
            timed.append(fn)
            names.append(st)
        rows.append(row)

    if timed:
        torch.cuda.empty_cache()  # a no-op without CUDA
        n, times, gpu = _timed(b, timed, reps, budget_s)
        med = dict(zip(names, (statistics.median(t) for t in times)))
        spread = dict(zip(names, ((bench.percentile(t, .1), bench.percentile(t, .9)) for t in times)))
        case.update({"reps": n, "gpu": gpu})
        for name in rep.BACKENDS:
            if name in med:
                case.update({f"{name}_ms": med[name], f"{name}_tflops": fl / med[name] / 1e9})
        for row in rows:
            if row["step"] in med:
                ms = med[row["step"]]
                row.update({"reps": n, "ms": ms, "ms_p10": spread[row["step"]][0], "ms_p90": spread[row["step"]][1],
                            "tflops": fl / ms / 1e9, "gpu": gpu})
    for row in rows:
        for name in rep.BACKENDS:
            row[f"{name}_ms"] = case.get(f"{name}_ms")
            row[f"{name}_tflops"] = case.get(f"{name}_tflops")
            row[f"{name}_max_abs_err"] = case.get(f"{name}_max_abs_err")
            if case.get(f"{name}_error"):
                row[f"{name}_error"] = case[f"{name}_error"]
            row[f"ratio_to_{name}"] = (case[f"{name}_ms"] / row["ms"]) if row["ms"] and case.get(f"{name}_ms") else None
    torch.cuda.empty_cache()  # the outputs' blocks (q, k and v go with this frame)
    return case, rows, skipped


def _case_line(case: dict, rows: list[dict]) -> str:
    parts = [f"{r['step']} {r['tflops']:.0f}" if r.get("tflops") else f"{r['step']} FAIL" for r in rows]
    parts += [f"{rep.BACKEND_TITLES[n]} {case[f'{n}_tflops']:.0f}" if case.get(f"{n}_tflops") else
              f"{rep.BACKEND_TITLES[n]} n/a" for n in rep.BACKENDS]
    return f"{rep.case_text(case):<24} TFLOP/s: " + ", ".join(parts)


def run(*, dtypes=rep.DTYPES, head_dims=None, seqlens=rep.SEQLENS, steps: list[str] | None = None, reps: int = 20,
        budget_s: float = 0.3, device_index: int = 0, log=print) -> dict:
    import torch
    import gemm_ladder as gl
    from ..library import runner
    runner.check_device(torch.device(f"cuda:{device_index}"))
    torch.cuda.set_device(device_index)
    b = bench.Bench(device_index)
    present = rep.fused_steps()
    labels = {"A1": rep.A1_LABEL, **present, rep.LIBRARY_STEP: rep.LIBRARY_LABEL}
    run_steps, missing = rep.requested_steps(steps, present)
    if why := rep.family_problem():
        log(f"the attention family does not import ({why}): its fused steps are skipped")
    for m in missing:
        log(f"skipped: {m['reason']}")
    head_dims = tuple(head_dims or rep.head_dims())
    result = {"kind": "gemm-ladder bench --attention", "commit": bench.git_commit(),
              "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), "host": platform.node(),
              "gpu": {"torch_name": torch.cuda.get_device_name(device_index), **b.nvml.static()},
              "torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
              "method": {"timing": "bench.py's: every kernel of a case in one loop, order flipped each repetition, "
                                   "L2 flushed before each call, CUDA events, medians",
                         "gpu": "NVML sampled every 50 ms during each case's timed loop",
                         "cases": f"{rep.TOKENS} tokens per call (B = {rep.TOKENS} // S), hidden {rep.HIDDEN} "
                                  f"(H = {rep.HIDDEN} // D); q, k, v (B, H, S, D) randn",
                         "flops": "4*B*H*S^2*D, halved when causal",
                         "check": "finite everywhere; max abs error on head (0, 0) at ~1024 query rows against an "
                                  "fp32 reference, at most 2x the first backend's that ran (cuDNN, flash, "
                                  "efficient) plus one unit; A1 also the rounding of S to the input dtype",
                         "ratio": "backend ms / ours (> 1: faster than the backend)",
                         "reps": reps, "budget_s_per_kernel": budget_s,
                         "l2_flush_bytes": b.flush_buf.numel() * 4},
              "steps": labels, "requested_steps": steps, "skipped": list(missing)}
    cases, rows, said = [], [], set()
    for dtype in dtypes:
        for D in head_dims:
            for S in seqlens:
                for causal in (False, True):
                    case, case_rows, skipped = run_case(b, gl, dtype, D, S, causal, run_steps, steps is None,
                                                        labels=labels, reps=reps, budget_s=budget_s)
                    for s in skipped:  # once per step, length and reason (the record lists every case)
                        if (s["step"], s["S"], s["reason"]) not in said:
                            said.add((s["step"], s["S"], s["reason"]))
                            log(f"skipped: {s['step']} at S {rep.seqlen_text(s['S'])}: {s['reason']}")
                    log(_case_line(case, case_rows))
                    for r in case_rows:
                        if not r["ok"]:
                            log(f"  {r['step']} failed: {r['error']}")
                    cases.append(case)
                    rows += case_rows
                    result["skipped"] += skipped
    result.update({"cases": cases, "rows": rows, "gpu_after": b.nvml.sample(),
                   "summary": rep.summary(rows, cases, labels)})
    return result


def default_json_path(out_dir: Path, result: dict) -> Path:
    return record_path(out_dir, result, "attention")


def cli_main(args, console, out_dir: Path, json_path: Path | None = None) -> int:
    import json
    import sys
    say = lambda m: console.print(m, markup=False, highlight=False)  # noqa: E731
    dtypes = rep.DTYPES if args.dtype in (None, "both") else (args.dtype,)
    result = run(dtypes=dtypes, head_dims=args.head_dims, seqlens=args.seqlens or rep.SEQLENS, steps=args.attn_steps,
                 reps=min(args.reps, 20), budget_s=min(args.budget, 0.3), log=say)
    result["command"] = " ".join(["gemm-ladder"] + sys.argv[1:])
    path = json_path or default_json_path(out_dir, result)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1))
    g = result["gpu"]
    say(f"\nattention ladder, TFLOP/s — {g.get('torch_name', '?')}, commit {result['commit'][:12]}")
    for line in rep.ladder_table(result["rows"], result["cases"]):
        say(line)
    for line in rep.summary_lines(result["summary"]):
        say(line)
    say(f"results: {path}")
    return 0 if result["summary"]["all_ok"] else 1
