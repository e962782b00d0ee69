"""The library's Python work per call, without a GPU: the fast path on CPU tensors with the
driver stubbed out (tests/fake_gpu.FakeGpu with emulate=False: every launch only counted), so
what is timed is the call's own Python — checks, the configuration lookup, staging decisions,
allocation — and none of the driver's launch or a kernel. For comparing two trees of the
library on one machine (their ratio; the H200 host's per-call figure is `bench --api`'s).

    PYTHONPATH=src:tests python benchmarks/probes/host/python_path.py [--calls 3000] [--profile NAME]
"""
import argparse
import cProfile
import pstats
import time

import torch
from _pytest.monkeypatch import MonkeyPatch

import gemm_ladder
from fake_gpu import FakeGpu


def per_call_us(fn, calls: int) -> float:
    for _ in range(200):
        fn()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls * 1e6


def cases() -> dict:
    h = torch.float16
    a, b = torch.randn(128, 4096, dtype=h), torch.randn(4096, 4096, dtype=h)
    out = torch.empty(128, 4096, dtype=h)
    a2, b2, b2_kn = torch.randn(127, 255, dtype=h), torch.randn(8191, 255, dtype=h), torch.randn(255, 8191, dtype=h)
    a3, b3 = torch.randn(1009, 1019, dtype=h), torch.randn(1019, 1013, dtype=h)
    w_t = b.t()
    return {
        "matmul_nt 128x4096x4096": lambda: gemm_ladder.matmul_nt(a, b),
        "matmul_nt out= 128x4096x4096": lambda: gemm_ladder.matmul_nt(a, b, out),
        "matmul static_b 128x4096x4096": lambda: gemm_ladder.matmul(a, w_t, static_b=True),
        "matmul_nt staged 127x8191x255": lambda: gemm_ladder.matmul_nt(a2, b2),
        "matmul staged 127x8191x255": lambda: gemm_ladder.matmul(a2, b2_kn),
        "matmul staged 1009x1013x1019": lambda: gemm_ladder.matmul(a3, b3),
        "torch.empty 127x8192 (reference)": lambda: torch.empty(127, 8192, dtype=h),
    }


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--calls", type=int, default=3000)
    p.add_argument("--profile", help="a case's name: its cProfile, slowest functions first")
    args = p.parse_args()
    mp = MonkeyPatch()
    FakeGpu(mp, emulate=False)
    try:
        table = cases()
        for name, fn in table.items():
            print(f"{name:34s} {per_call_us(fn, args.calls):6.2f} us/call")
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(args.calls):
                table[args.profile]()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    finally:
        mp.undo()


if __name__ == "__main__":
    main()
