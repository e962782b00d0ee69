"""The course's what-ifs, run for real on the GPU with bounded mbarrier waits.

Each what-if compiles a debug build of a step with one ablation and runs it in a child
process (a trapped kernel leaves its CUDA context unusable). The child runs it a few times
(a race may be lost in one run and won in the next), each on a NaN-poisoned output, stops
at the first run that does not finish correct, and reports, as JSON, what happened: a
deadlock (and where), a CUDA error, a wrong result, or only correct runs.

    python -m gemm_ladder.choreography.gpu_whatifs 8 local-empty 5

The what-ifs and their ablation defines: whatifs.WHAT_IFS (those with an ablation).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from .whatifs import WHAT_IFS, get_what_if


def what_if_entry(name: str):
    """A what-if of either table: the GEMM's (whatifs.WHAT_IFS) or attention's (sim.attn_params)."""
    from .sim.attn_params import ATTN_WHAT_IFS
    return WHAT_IFS.get(name) or ATTN_WHAT_IFS.get(name) or get_what_if(name)  # the last raises, naming both


def attention_gpu_what_ifs() -> list[str]:
    from .sim.attn_params import ATTN_WHAT_IFS
    return [name for name, w in ATTN_WHAT_IFS.items() if w.ablation]

OUTCOMES = ("deadlock", "error", "finished-wrong", "finished-correct")


def run_whatif(step_key: str, what_if: str, size: int = 2048, repeats: int = 1) -> dict:
    """Run the debug build of `step_key` with the what-if's ablation, in this process, up to
    `repeats` times (until a run does not finish correct)."""
    import torch
    from ..families.keys import get_step
    from ..library import runner
    from ..measure.accuracy import check_product
    defines = what_if_entry(what_if).ablation
    if not defines:
        raise ValueError(f"what-if {what_if!r} has no kernel ablation: only the simulator models it")
    if is_attention(step_key):
        return run_attention_whatif(step_key, defines, repeats)
    st = get_step(step_key)
    gen = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn((size, size), device="cuda", generator=gen).half()
    b = torch.randn((size, size), device="cuda", generator=gen).half()
    out = torch.full((size, size), float("nan"), dtype=torch.float16, device="cuda")
    t0 = time.perf_counter()
    try:
        plan = runner.plan(st, a, b, out, debug=True, extra_defines=defines)
    except Exception as e:  # not the what-if's outcome: the build or launch set-up failed
        return {"outcome": "build-error", "message": f"{type(e).__name__}: {e}", "runs": 0,
                "seconds": time.perf_counter() - t0}
    res: dict = {}
    for run in range(1, repeats + 1):
        out.fill_(float("nan"))
        try:
            plan()
        except runner.PipelineDeadlock as e:
            res = {"outcome": "deadlock", "message": str(e)}
        except Exception as e:
            res = {"outcome": "error", "message": f"{type(e).__name__}: {str(e).splitlines()[0]}"}
        else:
            ok, _, rel, msg = check_product(out, a, b)
            res = {"outcome": "finished-correct" if ok else "finished-wrong",
                   "message": msg or "output matches the reference", "rel_err": rel}
        if res["outcome"] != "finished-correct":
            break
    res.update(runs=run, repeats=repeats, seconds=time.perf_counter() - t0)
    return res


def is_attention(step_key: str) -> bool:
    from ..families import attention
    return step_key in attention.STEPS or step_key in attention.LIBRARY


def run_attention_whatif(step_key: str, defines: dict, repeats: int = 1, S: int = 1024) -> dict:
    """An attention step's debug build with the what-if's ablation, on (1, 4, S, 128) fp16 inputs,
    up to `repeats` times; each output NaN-poisoned and compared with an fp32 reference."""
    import math

    import torch
    from ..library.attention_debug import run_debug
    from ..library.runner import PipelineDeadlock
    from ..measure.attention_ref import reference
    g = torch.Generator(device="cuda").manual_seed(7)
    q, k, v = (torch.randn((1, 4, S, 128), device="cuda", generator=g).half() for _ in range(3))
    ref = reference(q, k, v, causal=False, scale=1 / math.sqrt(128))[0]
    t0 = time.perf_counter()
    res: dict = {}
    for run in range(1, repeats + 1):
        try:
            o = run_debug(q, k, v, step=step_key, causal=False, extra_defines=defines)
        except PipelineDeadlock as e:
            res = {"outcome": "deadlock", "message": str(e)}
        except Exception as e:
            res = {"outcome": "error", "message": f"{type(e).__name__}: {str(e).splitlines()[0]}"}
        else:
            err = float((o.float() - ref.float()).abs().max()) if bool(torch.isfinite(o).all()) else math.inf
            ok = err <= 1e-2  # fp16 attention against fp32: a few 1e-4 when correct
            res = {"outcome": "finished-correct" if ok else "finished-wrong",
                   "message": f"max |o - ref| = {err:.3g}" + ("" if ok else " (over 1e-2)"), "max_abs_err": err}
        if res["outcome"] != "finished-correct":
            break
    res.update(runs=run, repeats=repeats, seconds=time.perf_counter() - t0)
    return res


def run_whatif_subprocess(step_key: str, what_if: str, timeout_s: float = 60.0, repeats: int = 1) -> dict:
    """Run one what-if in a child process; never hangs longer than timeout_s."""
    cmd = [sys.executable, "-m", "gemm_ladder.choreography.gpu_whatifs", str(step_key), what_if, str(repeats)]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        return {"outcome": "hung", "detected": False, "seconds": timeout_s,
                "summary": f"step {step_key} / {what_if}: the child process did not finish in {timeout_s:.0f} s"}
    line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("{")), None)
    res = json.loads(line) if line else {"outcome": "error", "message": (p.stderr or p.stdout)[-2000:], "runs": 0}
    res["wall_seconds"] = time.perf_counter() - t0
    res["detected"] = res["outcome"] in ("deadlock", "finished-wrong", "error")
    res["why"] = what_if_entry(what_if).why
    res["summary"] = summary_text(step_key, what_if, res)
    return res


def summary_text(step_key: str, what_if: str, res: dict) -> str:
    """Which outcome happened, in how many runs, and why the what-if breaks the kernel."""
    runs, repeats = res.get("runs", 0), res.get("repeats", 1)
    if res["outcome"] == "finished-correct":
        when = f"all {runs} runs finished correct (a race not lost in {runs} runs)" if runs > 1 else \
            "the run finished correct"
    elif res["outcome"] == "build-error":
        when = "the ablated build did not run"
    else:
        when = f"{res['outcome']} in run {runs} of {repeats}" + (f" ({runs - 1} correct before)" if runs > 1 else "")
    return (f"step {step_key} / {what_if}: {when} after {res['wall_seconds']:.1f} s — {res['message']}\n"
            f"  why: {res['why']}")


if __name__ == "__main__":
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    print(json.dumps(run_whatif(sys.argv[1], sys.argv[2], repeats=n)), flush=True)
