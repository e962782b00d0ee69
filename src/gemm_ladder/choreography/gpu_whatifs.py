"""The course's what-ifs, run for real on the GPU with bounded mbarrier waits.

Each what-if compiles a debug build of a step with one ablation and runs it in a child
process (a trapped kernel leaves its CUDA context unusable). The child reports, as JSON,
whether the kernel deadlocked (and where), finished with a wrong result, or finished fine.

    python -m gemm_ladder.choreography.gpu_whatifs 7 both-phase-0

The what-ifs and their ablation defines: whatifs.WHAT_IFS (those with an ablation).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from .whatifs import get_what_if


def run_whatif(step_key: str, what_if: str, size: int = 2048) -> dict:
    """Run the debug build of `step_key` with the what-if's ablation, in this process."""
    import torch
    from ..measure.accuracy import check_product
    from ..runtime import launch
    from ..runtime.steps import get_step
    st = get_step(step_key)
    defines = get_what_if(what_if).ablation
    if not defines:
        raise ValueError(f"what-if {what_if!r} has no kernel ablation: only the simulator models it")
    gen = torch.Generator(device="cuda").manual_seed(7)
    a = torch.randn((size, size), device="cuda", generator=gen).half()
    b = torch.randn((size, size), device="cuda", generator=gen).half()
    out = torch.full((size, size), float("nan"), dtype=torch.float16, device="cuda")
    t0 = time.perf_counter()
    try:
        launch.run_step(st, a, b, out, debug=True, extra_defines=defines)
    except launch.PipelineDeadlock as e:
        return {"outcome": "deadlock", "message": str(e), "seconds": time.perf_counter() - t0}
    except Exception as e:
        return {"outcome": "error", "message": f"{type(e).__name__}: {e}", "seconds": time.perf_counter() - t0}
    ok, mx, rel, msg = check_product(out, a, b)
    return {"outcome": "finished-correct" if ok else "finished-wrong", "message": msg or "output matches the reference",
            "rel_err": rel, "seconds": time.perf_counter() - t0}


def run_whatif_subprocess(step_key: str, what_if: str, timeout_s: float = 60.0) -> dict:
    """Run one what-if in a child process; never hangs longer than timeout_s."""
    cmd = [sys.executable, "-m", "gemm_ladder.choreography.gpu_whatifs", str(step_key), what_if]
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        return {"outcome": "hung", "detected": False, "seconds": timeout_s,
                "summary": f"step {step_key} / {what_if}: the child process did not finish in {timeout_s:.0f} s"}
    line = next((ln for ln in reversed(p.stdout.splitlines()) if ln.startswith("{")), None)
    res = json.loads(line) if line else {"outcome": "error", "message": (p.stderr or p.stdout)[-2000:]}
    res["wall_seconds"] = time.perf_counter() - t0
    res["detected"] = res["outcome"] in ("deadlock", "finished-wrong")
    res["why"] = get_what_if(what_if).why
    res["summary"] = (f"step {step_key} / {what_if}: {res['outcome']} after {res['wall_seconds']:.1f} s — "
                      f"{res['message']}\n  why: {res['why']}")
    return res


if __name__ == "__main__":
    print(json.dumps(run_whatif(sys.argv[1], sys.argv[2])), flush=True)
