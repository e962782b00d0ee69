"""One process, two trees: this tree's A5 builds (grid and persistent) beside the same builds
compiled from another tree's kernels (--old-kernels DIR, e.g. an older checkout's
src/gemm_ladder/kernels, launched with that tree's arguments: no tile counter), and SDPA's
cuDNN; interleaved, L2 flushed, medians, clock and power sampled during the timed loop. For an
A/B of a kernel change that ratios taken in separate processes cannot resolve.
Counter builds (A5:d, A5:c3d) take a zeroed counter per call and the library's section on both
sides (the other tree must take them: --old-takes-walk).
Usage: PYTHONPATH=src python benchmarks/probes/attention_ab.py --old-kernels DIR [--json F] [--reps N]
       [--keys A5:d] [--cases 128x16384c,256x4096c]   (DxS, c: causal)"""
import argparse
import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from gemm_ladder.cuda import device as cuda_device
from gemm_ladder.cuda import driver, jit
from gemm_ladder.families.attention import get, make_maps
from gemm_ladder.library.attention_runner import run_attention
from gemm_ladder.measure import bench
from attention_timing import time_against_cudnn

ap = argparse.ArgumentParser()
ap.add_argument("--old-kernels", required=True)
ap.add_argument("--json")
ap.add_argument("--reps", type=int, default=30)
ap.add_argument("--old-takes-walk", action="store_true", help="the other tree's kernels take this tree's arguments "
                "(a tile counter, here 0, and a section, here 1)")
ap.add_argument("--keys", help="these builds at every head dim instead of A5/A5:p (A5:c3/A5:c3p at D64)")
ap.add_argument("--cases", help="DxS[c] list, e.g. 128x16384c,256x4096c (c: causal)")
args = ap.parse_args()
old_dir = Path(args.old_kernels)
CASES = [(128, 1024, False), (128, 1024, True), (128, 4096, False), (128, 4096, True), (128, 16384, False),
         (128, 16384, True), (64, 4096, False), (64, 16384, True), (256, 4096, False), (256, 16384, True)]
if args.cases:
    CASES = [(int(c.split("x")[0]), int(c.split("x")[1].rstrip("c")), c.endswith("c")) for c in args.cases.split(",")]
rows = []
b = bench.Bench()
dev = torch.cuda.current_device()
for D, S, causal in CASES:
    B, H = 16384 // S, 2048 // D
    g = torch.Generator(device="cuda").manual_seed(S + D)
    q, k, v = (torch.randn(B, H, S, D, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    keys = args.keys.split(",") if args.keys else ["A5:c3", "A5:c3p"] if D == 64 else ["A5", "A5:p"]
    fns, names, diffs = [], [], {}
    for key in keys:
        st = get(key, D)
        fns.append(lambda key=key: run_attention(q, k, v, causal=causal, scale=D ** -0.5, return_lse=False, step=key))
        names.append(key + " new")
        defines = {**st.kernel_defines(), "GL_ATTN_CAUSAL": int(causal)}
        kern = driver.load(jit.compile_kernel(st.source, st.entry, defines, kernel_dir=old_dir), dev, st.dynamic_smem)
        out = torch.empty_like(q)
        specs = st.map_specs(q.shape, q.stride(), k.shape, k.stride(), v.stride())
        maps = make_maps(specs, (q.data_ptr(), k.data_ptr(), v.data_ptr()), "f16")
        grid = st.grid(S, H, B, cuda_device.num_sms(dev))
        if st.dynamic:  # a zeroed counter per call (as the library's), the library's section
            section = st.section(S, 1, H * B, cuda_device.l2_bytes(dev))

            def launch(st=st, kern=kern, maps=maps, out=out, grid=grid, section=section):
                counter = torch.zeros(1, dtype=torch.int32, device="cuda")
                kargs = st.kernel_args(maps, out.data_ptr(), 0, S, S, H, 1, st.tiles(S, H, B), 1 / math.sqrt(D),
                                       counter.data_ptr(), section)
                driver.PreparedLaunch(kern, grid, (st.threads, 1, 1), kargs, stream=torch.cuda.current_stream().cuda_stream,
                                      dynamic_smem=st.dynamic_smem)()
        else:
            kargs = st.kernel_args(maps, out.data_ptr(), 0, S, S, H, 1, st.tiles(S, H, B), 1 / math.sqrt(D))
            kargs = kargs if args.old_takes_walk else kargs[:-2]
            launch = driver.PreparedLaunch(kern, grid, (st.threads, 1, 1), kargs,
                                           stream=torch.cuda.current_stream().cuda_stream, dynamic_smem=st.dynamic_smem)
        launch()
        torch.cuda.synchronize()
        diffs[key + " old"] = float((out.float() - ref.float()).abs().max())
        fns.append(launch)
        names.append(key + " old")

    fl = 4 * B * H * S * S * D / (2 if causal else 1)
    tf, gpu = time_against_cudnn(b, fns, names, q, k, v, causal, fl, args.reps)
    for n in names:
        rows.append({"D": D, "S": S, "causal": causal, "build": n, "tflops": tf[n], "ratio_to_cudnn": tf[n] / tf["cudnn"],
                     "gpu": gpu})
    print(f"D{D} S{S:5d} {'causal' if causal else 'full  '}: " + "  ".join(
        f"{n} {tf[n]:4.0f} ({tf[n] / tf['cudnn']:.3f})" for n in names) + f"  cudnn {tf['cudnn']:4.0f} | old diff "
        f"{max(diffs.values()):.1e} | {gpu.get('sm_clock_mhz')} MHz {gpu.get('power_w')} W", flush=True)
    del q, k, v, ref
if args.json:
    with open(args.json, "w") as f:
        json.dump({"old_kernels": str(old_dir), "reps": args.reps, "rows": rows}, f, indent=1)
