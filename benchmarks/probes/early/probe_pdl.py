"""Probe: programmatic dependent launch of the GEMM itself. Built with -DGL_PDL=1 (every thread
waits with griddepcontrol.wait right after the set-up: barrier init, cluster barrier) and
launched with the programmatic-serialization attribute, the kernel may be scheduled while the
kernel before it on the stream (here the L2 flush) ends, so its launch and set-up overlap that
kernel's tail. Against the same kernel launched the ordinary way, interleaved with cuBLAS after
the zeroing and the read flush. Correctness first: a copy kernel rewrites A right before each
programmatic launch (so a read before the wait would see a half-written A), 20 times from two
alternating sources, every output poisoned and checked against fp32.

    PYTHONPATH=src python benchmarks/probes/early/probe_pdl.py [--json F] [--keys 8,9,9:c1]
        [--shapes ...] [--small ...] [--dtypes float16,bfloat16] [--reps 40]
"""
import argparse, json
import torch
from gemm_ladder.measure import probe
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.measure.bench import Bench, git_commit
from gemm_ladder.runtime import driver, launch, select, steps

ap = argparse.ArgumentParser()
ap.add_argument("--keys", default="8,9,9:c1")
ap.add_argument("--shapes", default="2048x2048x2048,4096x4096x4096,1024x1024x1024")
ap.add_argument("--small", default="16x8192x8192,16x4096x4096,1x4096x4096,64x4096x4096,16x4096x14336,512x512x512,"
                "1000x1000x1000,128x4096x4096")
ap.add_argument("--reps", type=int, default=40)
ap.add_argument("--dtypes", default="float16,bfloat16")
ap.add_argument("--json", default=None)
args = ap.parse_args()
bench = Bench(0)
sms = launch.num_sms(0)
PDL = {"GL_PDL": 1}


def programmatic(plan):
    """The plan's (first) kernel launched with the programmatic-serialization attribute."""
    L = plan.launcher
    first = L.launches[0] if hasattr(L, "launches") else L
    cfg = first._config
    cluster = None
    for a in cfg.attrs[:cfg.numAttrs]:
        if a.id == driver._cu().CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
            cluster = (a.value.clusterDim.x, a.value.clusterDim.y, a.value.clusterDim.z)
    first._config = driver.launch_config((cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ),
                                         (cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ), cfg.sharedMemBytes,
                                         torch.cuda.current_stream().cuda_stream, cluster, pdl=True)
    first._keep = cfg
    return plan


def make(c, a, b, out):
    p = launch.plan(c[0], a, b, out, extra_defines=c[1])
    return programmatic(p) if c[1] else p


def race_check(c, a, b):
    """A copy kernel rewrites A just before each launch: every output must match its source."""
    srcs = [torch.randn_like(a, dtype=torch.float32).to(a.dtype) for _ in range(2)]
    out = torch.full((a.shape[0], b.shape[0]), float("nan"), dtype=a.dtype, device=a.device)
    p = make(c, a, b, out)
    bad = 0
    for i in range(20):
        out.fill_(float("nan"))
        a.copy_(srcs[i % 2])
        p()
        torch.cuda.synchronize()
        bad += not bool(check_product(out, srcs[i % 2], b)[0])
    return bad


rows, race = [], []
for dt in args.dtypes.split(","):
    dtype = getattr(torch, dt)
    for shape in (args.shapes + "," + args.small).split(","):
        M, N, K = map(int, shape.split("x"))
        a, b = bench.inputs(M, N, K, dtype)
        keys = args.keys.split(",") if shape in args.shapes.split(",") else [select.pick(M, N, K, dt, sms)]
        cands = {}
        for k in keys:
            cands[k] = (steps.get_step(k), {})
            cands[f"{k}+pdl"] = (steps.get_step(k), PDL)
        for k in keys:
            bad = race_check(cands[f"{k}+pdl"], a, b)
            race.append(dict(M=M, N=N, K=K, dtype=dt, kernel=f"{k}+pdl", wrong_of_20=bad))
            print(f"race {shape} {dt} {k}+pdl: {bad} of 20 wrong", flush=True)
        checked = probe.checked_plans(cands, a, b, make, f"{shape} {dt}", repeats=3)
        rows += probe.time_against_cublas(bench, checked, a, b, args.reps, f"{shape} {dt}",
                                          dict(M=M, N=N, K=K, dtype=dt))
if args.json:
    json.dump(dict(commit=git_commit(), rows=rows, race=race), open(args.json, "w"), indent=1)
