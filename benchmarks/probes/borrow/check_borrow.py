"""Correctness of the borrowed-stage epilogue (Step.borrow_stage, `b1`): every key on edge
shapes (K below, at and past the ring depth; odd M and N; the cluster's odd tile rows),
K-major and N-major B, fp16 and bf16, outputs poisoned, checked against fp32 and then over
repeated runs (bit-identical, each run re-poisoned).

    PYTHONPATH=src python benchmarks/probes/borrow/check_borrow.py [--repeats 20]
"""
import argparse
import torch
import gemm_ladder
from gemm_ladder.measure.accuracy import check_product

ap = argparse.ArgumentParser()
ap.add_argument("--keys", default="9:b1,9:c1b1,9:n232b1,9:n176b1,9:n192b1")
ap.add_argument("--shapes", default="300x520x64,300x520x192,300x520x256,300x520x264,"
                                    "1000x1000x1000,384x768x4096,2000x2056x1024,129x256x520")
ap.add_argument("--repeats", type=int, default=20)
args = ap.parse_args()
bad = 0
for dt in (torch.float16, torch.bfloat16):
    for spec in args.shapes.split(","):
        M, N, K = map(int, spec.split("x"))
        g = torch.Generator(device="cuda").manual_seed(M * 7 + N * 3 + K)
        a = torch.randn(M, K, device="cuda", dtype=dt, generator=g)
        b_nk = torch.randn(N, K, device="cuda", dtype=dt, generator=g)
        b_kn = b_nk.T.contiguous()
        for key in args.keys.split(","):
            for lay in ("nt", "mm"):
                out = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
                fn = ((lambda: gemm_ladder.matmul_nt(a, b_nk, out, step=key)) if lay == "nt"
                      else (lambda: gemm_ladder.matmul(a, b_kn, out, step=key)))
                try:
                    fn(); torch.cuda.synchronize()
                except Exception as e:
                    print(f"{spec} {dt} {key} {lay}: skipped ({type(e).__name__}: {str(e)[:100]})")
                    continue
                ok = bool(check_product(out, a, b_nk)[0])
                first = out.clone()
                same = True
                for _ in range(args.repeats):
                    out.fill_(float("nan")); fn(); torch.cuda.synchronize()
                    same &= torch.equal(first, out)
                bad += (not ok) or (not same)
                print(f"{spec} {str(dt)[6:]} {key} {lay}: {'ok' if ok else 'WRONG'} "
                      f"{'stable' if same else 'MOVING'}", flush=True)
print(f"check_borrow: {bad} bad")
