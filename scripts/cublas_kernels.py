"""Which kernel cuBLAS runs (through torch.matmul) at given shapes: its name tells the tile,
cluster and scheduling (e.g. "...tilesize128x256x64_cluster2x1x1...", "stream-k" or "splitK").

    PYTHONPATH=src python scripts/cublas_kernels.py [--shapes 4096x4096x4096,...] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import sys


def kernels_of(fn, reps: int = 3) -> list[str]:
    import torch
    from torch.profiler import ProfilerActivity, profile
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    return sorted({e.key for e in prof.key_averages() if e.device_type.name == "CUDA"})


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192,2048x2048x2048,16x4096x4096,"
                                        "128x4096x4096,3000x5000x4000")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    import torch
    if not torch.cuda.is_available():
        print("cublas_kernels: no CUDA GPU here", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False
    rows = []
    for spec in args.shapes.split(","):
        M, N, K = (int(x) for x in spec.lower().split("x"))
        for dt in (torch.float16, torch.bfloat16):
            a = torch.randn(M, K, device="cuda").to(dt)
            b = torch.randn(N, K, device="cuda").to(dt)
            for layout, bb in (("a @ b_nk.T", b.T), ("a @ b_kn", b.T.contiguous())):
                names = kernels_of(lambda: torch.matmul(a, bb))
                rows.append({"M": M, "N": N, "K": K, "dtype": str(dt).split(".")[-1], "call": layout,
                             "kernels": names})
                print(f"{M}x{N}x{K} {rows[-1]['dtype']} {layout}: {' | '.join(names)}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
