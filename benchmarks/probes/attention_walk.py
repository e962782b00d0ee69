"""How a CTA walks the attention tiles: the ladder's grid of every tile (A5), a persistent CTA
per SM on a fixed walk (A5:p) and on a counter (A5:d; A5:c3* at head dim 64), against SDPA's
cuDNN, interleaved, L2 flushed, medians; SM clock and power sampled during the timed loop.
16k tokens per call at hidden 2048, as `bench --attention`. Each build's output is compared
with cuDNN's first (max |diff|). Builds the tree lacks are skipped (so an older tree runs it: the tile
overlap's builds, ":...t", are in 3d7e4a4).
Usage: PYTHONPATH=src python benchmarks/probes/attention_walk.py [--json F] [--reps N]
       [--seqlens 1024,4096] [--head-dims 64,128] [--dtype bf16] [--noncausal] [--sections 1,4]
--sections: each counter build also run with that many (batch, head) pairs per section instead
of the library's (L2-sized) choice, as "<build>@s<n>"."""
import argparse
import json
import subprocess

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from gemm_ladder.families import attention as family
from gemm_ladder.library import attention_runner
from gemm_ladder.library.attention_runner import run_attention
from gemm_ladder.measure import bench
from attention_timing import time_against_cudnn

ap = argparse.ArgumentParser()
ap.add_argument("--json")
ap.add_argument("--reps", type=int, default=20)
ap.add_argument("--seqlens", default="1024,2048,4096,8192,16384")
ap.add_argument("--head-dims", default="64,128,256")
ap.add_argument("--dtype", default="fp16")
ap.add_argument("--noncausal", action="store_true", help="also the non-causal cases")
ap.add_argument("--only-noncausal", action="store_true", help="the non-causal cases only")
ap.add_argument("--builds", help="only these builds, e.g. A5:p,A5:pt")
ap.add_argument("--sections", default="", help="the counter builds also at these sections, e.g. 1,4")
args = ap.parse_args()
dtype = torch.float16 if args.dtype == "fp16" else torch.bfloat16
known = {**family.STEPS, **family.LIBRARY}
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
rows = []
b = bench.Bench()
for D in map(int, args.head_dims.split(",")):
    want = (["A5:c3", "A5:c3p", "A5:c3pt", "A5:c3d", "A5:c3dt"] if D == 64 else []) + ["A5", "A5:p", "A5:pt", "A5:d",
                                                                                       "A5:dt"]
    want = [k for k in want if not args.builds or k in args.builds.split(",")]
    builds = [k for k in want if k in known and D in dict(known[k].blocks)]
    for S in map(int, args.seqlens.split(",")):
        for causal in ((False,) if args.only_noncausal else (True, False) if args.noncausal else (True,)):
            B, H = 16384 // S, 2048 // D
            g = torch.Generator(device="cuda").manual_seed(S + D)
            q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=dtype, generator=g) for _ in range(3))
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            fns, names, diffs = [], [], {}
            for key in builds:
                o, _ = run_attention(q, k, v, causal=causal, scale=D ** -0.5, return_lse=False, step=key)
                diffs[key] = float((o.float() - ref.float()).abs().max())
                fns.append(lambda key=key: run_attention(q, k, v, causal=causal, scale=D ** -0.5, return_lse=False,
                                                         step=key))
                names.append(key)
                for sec in (map(int, args.sections.split(",")) if args.sections and known[key].dynamic else ()):
                    go = attention_runner._Launch(family.get(key, D), causal, "bf16" if args.dtype == "bf16" else "f16",
                                                  B, H, H, S, S, torch.cuda.current_device())
                    go.section = sec  # the library's call with another section: the same counter per call

                    def call(go=go):
                        o = torch.empty_like(q)
                        counter = torch.zeros(1, dtype=torch.int32, device="cuda")
                        go(torch.cuda.current_stream().cuda_stream, q, k, v, o.data_ptr(), 0, D ** -0.5,
                           counter.data_ptr())
                        return o
                    diffs[f"{key}@s{sec}"] = float((call().float() - ref.float()).abs().max())
                    fns.append(call)
                    names.append(f"{key}@s{sec}")

            fl = 4 * B * H * S * S * D / (2 if causal else 1)
            tf, gpu = time_against_cudnn(b, fns, names, q, k, v, causal, fl, args.reps)
            for n in names:
                rows.append({"D": D, "S": S, "causal": causal, "build": n, "tflops": tf[n], "cudnn_tflops": tf["cudnn"],
                             "ratio_to_cudnn": tf[n] / tf["cudnn"], "max_diff_to_cudnn": diffs[n], "gpu": gpu})
            print(f"D{D} S{S:5d} {'causal' if causal else 'full  '}: " +
                  "  ".join(f"{n} {tf[n]:4.0f} ({tf[n] / tf['cudnn']:.3f})" for n in names) +
                  f"  cudnn {tf['cudnn']:4.0f} | diff {max(diffs.values()):.1e} | {gpu.get('sm_clock_mhz')} MHz "
                  f"{gpu.get('power_w')} W", flush=True)
            del q, k, v, ref
if args.json:
    with open(args.json, "w") as f:
        json.dump({"commit": commit, "dtype": args.dtype, "reps": args.reps, "method":
                   "interleaved with cuDNN, L2 flushed, medians; gpu sampled during the timed loop", "rows": rows}, f,
                  indent=1)
