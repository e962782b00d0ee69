"""Host time per `gemm_ladder.matmul` call on a machine without a GPU: the Python side of
the fast path with the driver replaced by tests/fake_gpu.py (launches recorded, not run).

On the GPU, add the driver's own launch cost (cuLaunchKernelEx) and the caching
allocator's; `gemm-ladder bench --api` measures the real thing. Usage:
    PYTHONPATH=src python tools/host_overhead_cpu.py [calls]
"""
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import pytest  # noqa: E402
import torch  # noqa: E402

import gemm_ladder  # noqa: E402
from fake_gpu import FakeGpu  # noqa: E402
from gemm_ladder.library import fastpath# noqa: E402


def per_call_us(fn, calls: int, rounds: int = 7) -> float:
    fn()
    best = []
    for _ in range(rounds):
        t0 = time.thread_time()  # CPU time of this thread: other processes' load does not count
        for _ in range(calls):
            fn()
        best.append((time.thread_time() - t0) / calls * 1e6)
    return min(best)


def _how(kind, a, b, out=None, step=None) -> str:
    """The step a call runs and whether it copies an operand (the configuration's layouts)."""
    cfg = fastpath.config_for(kind, a, b, out, step)
    copies = [n for n in ("a", "b") if not getattr(cfg, n).direct]
    return f"{cfg.step.key}, " + (f"copies {' and '.join(copies)}" if copies else "in place")


def main(calls: int = 2000) -> None:
    mp = pytest.MonkeyPatch()
    FakeGpu(mp, emulate=False)
    a = torch.randn(128, 128).half()
    w = torch.randn(128, 128).half()  # (N, K)
    b_kn = w.T.contiguous()
    c = torch.empty(128, 128).half()
    cases = {
        f"matmul_nt(a, w, out=c)  [{_how('nt', a, w, c)}]": lambda: gemm_ladder.matmul_nt(a, w, out=c),
        f"matmul(a, w.T)  [{_how('mm', a, w.T)}]": lambda: gemm_ladder.matmul(a, w.T),
        f"matmul(a, b)    [row-major b: {_how('mm', a, b_kn)}]": lambda: gemm_ladder.matmul(a, b_kn),
        "linear(a, w)": lambda: gemm_ladder.linear(a, w),
        f"matmul(a, b, step='9:c1')  [row-major b: {_how('mm', a, b_kn, step='9:c1')}]":
            lambda: gemm_ladder.matmul(a, b_kn, step="9:c1"),
        "torch.empty_strided alone (the result's allocation)": lambda: torch.empty_strided((128, 128), (128, 1), dtype=torch.float16),
        "torch.matmul(a, b) on the CPU (not comparable: computes)": lambda: torch.matmul(a, b_kn),
    }
    print(f"thread CPU time per call, best of 7 rounds of {calls} calls, torch {torch.__version__}, "
          "CPU tensors, driver faked")
    for name, fn in cases.items():
        print(f"  {per_call_us(fn, calls):7.2f} us  {name}")
    mp.undo()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
