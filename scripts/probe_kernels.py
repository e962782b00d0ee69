"""Probe kernels on the GPU straight from their defines, without the step registry: debug-build
correctness in child processes (a deadlock becomes an error), poisoned-output checks at edge
shapes, repeated runs (a moving result is a race), then timing interleaved with cuBLAS.

    PYTHONPATH=src python scripts/probe_kernels.py [--keys 7:d4,8,9,gemm:128x256] [--json out.json]

Used to bring up a new kernel before its Step entry exists; each configuration below names
its file, entry, threads, defines and cluster.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def _smem(depth, bm, bn, bk, staging, barriers):
    bn_smem = -(-bn // 64) * 64  # a stage keeps whole 64-wide blocks of B (the family's stage_bytes)
    return 1024 + depth * (bm + bn_smem) * bk * 2 + staging + 8 * barriers


def _cfg(src, entry, threads, bm, bn, depth, cluster, consumers, epi, pingpong=False, extra=None, group=16,
         family=None):
    """One kernel's defines. family: the gemm family's own switches (stream-K, borrowed stage,
    early loads), which its kernels require and the ladder's do not take."""
    slots = max(1, epi) * (consumers if pingpong else 1)  # ping-pong: an epilogue ring per consumer
    staging = slots * bm * (bn if epi == 0 else 64) * 2
    barriers = 2 * depth + 2 * slots + (consumers if pingpong else 0)  # ping-pong: a turn barrier each
    fam = dict(family or {})
    if "GL_EPI_BORROW" in fam:  # the borrowed stage's barriers: one per lent chunk, at least one
        barriers += max(1, fam["GL_EPI_LENT"])
    # Every switch a kernel requires, at its plain setting (one wgmma group in flight);
    # GL_EXP_* / `extra` override them.
    d = dict(GL_BM=bm, GL_BN=bn, GL_BK=64, GL_DEPTH=depth, GL_GROUP_M=group, GL_CLUSTER_M=cluster,
             GL_CONSUMERS=consumers, GL_EPI_STAGES=epi, GL_MMA_LAG=1, **fam,
             GL_DYNAMIC_SMEM=_smem(depth, bm, bn, 64, staging, barriers))
    d.update(extra or {})  # experiment switches (GL_EXP_*)
    return dict(src=src, entry=entry, threads=threads, defines=d, cluster=cluster, bm=bm, bn=bn)


_S7 = ("ladder/step7_warp_specialized.cu", "gemm_step7_warp_specialized", 256, 128, 128)
_S8 = ("ladder/step8_cluster.cu", "gemm_step8_cluster", 256, 128, 128)
_S9 = ("ladder/step9_multi_consumer.cu", "gemm_step9_multi_consumer", 384, 128, 256)
_S10 = ("ladder/step10_pingpong.cu", "gemm_step10_pingpong", 384, 64, 256)
_G2 = ("gemm/gemm_two_consumers.cu", "gemm_two_consumers", 384, 128, 256)
_G1 = ("gemm/gemm_one_consumer.cu", "gemm_one_consumer", 256, 128, 128)


def _two_consumers(cluster, lent=3):
    """The gemm family's two-consumer switches: the borrowed stage (lent chunks; 0: none), early
    loads without a cluster, no stream-K."""
    return dict(GL_STREAM_K=0, GL_EPI_BORROW=int(lent > 0), GL_EPI_LENT=lent, GL_EARLY_LOADS=int(cluster == 1))


CONFIGS = {
    # the ladder's kernels at the course's configurations, and their cluster-free ablations
    "7:d4": _cfg(*_S7, 4, 1, 1, 0, group=8),
    "8": _cfg(*_S8, 4, 2, 1, 0),
    "8:c1": _cfg(*_S8, 4, 1, 1, 0),
    "9": _cfg(*_S9, 4, 2, 2, 2),
    "9:c1": _cfg(*_S9, 4, 1, 2, 2),
    "10": _cfg(*_S10, 4, 2, 2, 2, True),
    "10:c1": _cfg(*_S10, 4, 1, 2, 2, True),
    # the library's kernels (families/gemm.py) at their entries' configurations
    "gemm:128x256": _cfg(*_G2, 4, 1, 2, 2, family=_two_consumers(1)),
    "gemm:128x256c2": _cfg(*_G2, 4, 2, 2, 2, family=_two_consumers(2)),
    "gemm:128x128": _cfg(*_G1, 5, 1, 1, 0, family={"GL_EARLY_LOADS": 1}),
    # ring depths
    "8:d6": _cfg(*_S8, 6, 2, 1, 0),
    "8:d5": _cfg(*_S8, 5, 2, 1, 0),
    "gemm:128x128d6": _cfg(*_G1, 6, 1, 1, 0, family={"GL_EARLY_LOADS": 1}),
    "10:d5": _cfg(*_S10, 5, 2, 2, 2, True),
    "10:c1d5": _cfg(*_S10, 5, 1, 2, 2, True),
}
# Experiments at commit 3893c19 (kernel switches since removed, the outcome was neutral:
# benchmarks/results/experiments/*_probe_release_scale0_3893c19.*): one release arrive per
# consumer warpgroup (GL_EXP_RELEASE_WG) and a first wgmma with scale-d 0 (GL_EXP_SCALE0).
# Tile-order group heights (g: tile rows per group) and full-tile staging at depth 3 (d3e4:
# four chunk slots, no borrowed stage) on the library's two-consumer kernel.
CONFIGS.update({
    "gemm:128x256c2g4": _cfg(*_G2, 4, 2, 2, 2, group=4, family=_two_consumers(2)),
    "gemm:128x256c2g8": _cfg(*_G2, 4, 2, 2, 2, group=8, family=_two_consumers(2)),
    "gemm:128x256g4": _cfg(*_G2, 4, 1, 2, 2, group=4, family=_two_consumers(1)),
    "gemm:128x256g8": _cfg(*_G2, 4, 1, 2, 2, group=8, family=_two_consumers(1)),
    "gemm:128x256c2d3e4": _cfg(*_G2, 3, 2, 2, 4, family=_two_consumers(2, lent=0)),
    "gemm:128x256d3e4": _cfg(*_G2, 3, 1, 2, 4, family=_two_consumers(1, lent=0)),
    "8:d5g8": _cfg(*_S8, 5, 2, 1, 0, group=8),
})
# The exit-wait experiment of perf-notes item 34 (GL_EXP_EXIT_WAIT_ALL) ran at 5a65efa, since removed.
# The epilogue experiments of perf-notes item 31 (direct stores, no-epilogue bounds, stores
# through the load/store unit, L2 hints, whole-tile staging) ran with switches in step 9's
# source at commits d157a87..ce2510e, since removed.


class Kernel:
    def __init__(self, key, bf16, extra=None):
        import torch
        from gemm_ladder.cuda import driver, jit
        c = CONFIGS[key]
        self.c, self.key, self.bf16 = c, key, bf16
        d = dict(c["defines"], GL_BF16=int(bf16), **(extra or {}))
        self.compiled = jit.compile_kernel(c["src"], c["entry"], d)
        self.smem = d["GL_DYNAMIC_SMEM"]
        self.kernel = driver.load(self.compiled, torch.cuda.current_device(), self.smem)
        cl = c["cluster"]
        self.max_clusters = driver.max_active_clusters(self.kernel, (c["threads"], 1, 1), self.smem, (cl, 1, 1))

    def plan(self, a, b, out):
        import torch
        from gemm_ladder.cuda import driver
        c = self.c
        M, K = a.shape
        N = b.shape[0]
        cl = c["cluster"]
        tiles = -(-M // (c["bm"] * cl)) * -(-N // c["bn"])
        grid = min(self.max_clusters, tiles) * cl
        args = [driver.TensorMap(a.data_ptr(), M, K, K, c["bm"], 64, self.bf16),
                driver.TensorMap(b.data_ptr(), N, K, K, c["bn"] // cl, 64, self.bf16),
                driver.TensorMap(out.data_ptr(), M, N, N, c["bm"], 64, self.bf16), M, N, K]
        return driver.PreparedLaunch(self.kernel, (grid, 1, 1), (c["threads"], 1, 1), args,
                                     stream=torch.cuda.current_stream().cuda_stream,
                                     dynamic_smem=self.smem, cluster=(cl, 1, 1)), grid


SHAPES = [(256, 384, 192), (384, 256, 320), (129, 264, 72), (1000, 1000, 1000), (640, 768, 64),
          (3 * 128, 2 * 256, 4096), (4096, 4096, 4096)]


def correctness(key, bf16, shapes, repeats=0, extra=None):
    import torch
    from gemm_ladder.measure.bench import check_output
    dt = torch.bfloat16 if bf16 else torch.float16
    k = Kernel(key, bf16, extra)
    lines, ok_all = [], True
    for (M, N, K) in shapes:
        a = torch.randn(M, K, device="cuda").to(dt)
        b = torch.randn(N, K, device="cuda").to(dt)
        ref = a.float() @ b.float().T
        out = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
        p, grid = k.plan(a, b, out)
        p()
        torch.cuda.synchronize()
        ok, mx, rel, err = check_output(out, ref, "bfloat16" if bf16 else "float16")
        first = out.clone()
        moved = 0
        for _ in range(repeats):
            out.fill_(float("nan"))
            p()
            torch.cuda.synchronize()
            moved += int(not torch.equal(out, first))
        ok_all &= ok and moved == 0
        lines.append(f"{key} {'bf16' if bf16 else 'fp16'} {M}x{N}x{K} grid={grid} ok={ok} rel={rel:.2e} "
                     f"{err} repeats={repeats} moved={moved}")
    return ok_all, lines


def layouts(step_key="gemm:128x256c2", sizes=(4096,), reps=40):
    """MN-major operands through the registry step: correctness (poisoned, fresh data) at edge
    shapes, then time K-major vs N-major B vs M-major A, interleaved with cuBLAS on the same
    storage (torch.matmul reads a row-major (K, N) b natively)."""
    import torch
    from gemm_ladder.cuda import device as cuda_device
    from gemm_ladder.cuda import driver
    from gemm_ladder.families.keys import get_step
    from gemm_ladder.library import runner
    from gemm_ladder.measure.bench import Bench, check_output
    st = get_step(step_key)
    dev = torch.cuda.current_device()

    def make(a_mn, b_mn, M, N, K, dt):
        a_store = torch.randn((K, M) if a_mn else (M, K), device="cuda").to(dt)
        b_store = torch.randn((K, N) if b_mn else (N, K), device="cuda").to(dt)
        a = a_store.T if a_mn else a_store          # (M, K) logical
        b_nk = b_store.T if b_mn else b_store       # (N, K) logical
        out = torch.full((M, N), float("nan"), dtype=dt, device="cuda")
        prep = runner.prepare(st, dev, bf16=dt == torch.bfloat16,
                              extra_defines=st.layout_defines(bool(a_mn), bool(b_mn)))
        mc = driver.max_active_clusters(prep.kernel, (st.threads, 1, 1), st.dynamic_smem, st.cluster)
        args = st.kernel_args(a_store.data_ptr(), b_store.data_ptr(), out.data_ptr(), M, N, K,
                              bf16=dt == torch.bfloat16, a_mn=bool(a_mn), b_mn=bool(b_mn))
        p = driver.PreparedLaunch(prep.kernel, st.grid(M, N, cuda_device.num_sms(dev), mc), (st.threads, 1, 1), args,
                                  stream=torch.cuda.current_stream().cuda_stream, dynamic_smem=st.dynamic_smem,
                                  cluster=st.cluster)
        return a, b_nk, a_store, b_store, out, p

    lines, rows = [], []
    for dt in (torch.float16, torch.bfloat16):
        name = "float16" if dt == torch.float16 else "bfloat16"
        for a_mn, b_mn in ((0, 1), (1, 0), (1, 1)):
            for (M, N, K) in ((256, 384, 192), (1000, 1000, 1000), (136, 264, 72), (384, 512, 4096), (2048, 2048, 2048)):
                a, b_nk, _, _, out, p = make(a_mn, b_mn, M, N, K, dt)
                p()
                torch.cuda.synchronize()
                ok, mx, rel, err = check_output(out, a.float() @ b_nk.float().T, name)
                first = out.clone()
                moved = 0
                for _ in range(10):
                    out.fill_(float("nan"))
                    p()
                    torch.cuda.synchronize()
                    moved += int(not torch.equal(out, first))
                lines.append(f"layout step {step_key} {name} a_mn={a_mn} b_mn={b_mn} {M}x{N}x{K} ok={ok} "
                             f"rel={rel:.2e} {err} moved={moved}")
                rows.append({"dtype": name, "a_mn": a_mn, "b_mn": b_mn, "M": M, "N": N, "K": K, "ok": ok and not moved})
    print("\n".join(lines), flush=True)
    bench = Bench(0)
    for size in sizes:
        for dt in (torch.float16, torch.bfloat16):
            fns, names = [], []
            for a_mn, b_mn in ((0, 0), (0, 1), (1, 0)):
                a, b_nk, a_store, b_store, out, p = make(a_mn, b_mn, size, size, size, dt)
                c2 = torch.empty_like(out)
                b_kn = b_nk.T  # what a user of torch.matmul(a, b) holds
                fns += [p, (lambda a=a, b_kn=b_kn, c2=c2: torch.matmul(a, b_kn, out=c2))]
                names += [f"ours a_mn={a_mn} b_mn={b_mn}", f"cublas a_mn={a_mn} b_mn={b_mn}"]
            times = bench.time_interleaved(fns, reps)
            med = [statistics.median(t) for t in times]
            for i in range(0, len(fns), 2):
                r = med[i + 1] / med[i]
                print(f"LAYOUT {size} {dt} {names[i]}: {med[i]:.4f} ms, cuBLAS {med[i + 1]:.4f} ms, ratio {r:.3f}",
                      flush=True)
                rows.append({"size": size, "dtype": str(dt), "call": names[i], "ms": med[i], "cublas_ms": med[i + 1],
                             "ratio_to_cublas": r})
    return rows


def child(args):
    ok, lines = correctness(args.child, args.bf16, SHAPES[:4], extra={"GL_DEBUG_WAITS": 1})
    print("\n".join(lines), flush=True)
    sys.exit(0 if ok else 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", default="7:d4,8,9,gemm:128x128,gemm:128x256")
    ap.add_argument("--json", default=None)
    ap.add_argument("--debug-keys", default=None, help="keys checked with debug builds (default: --keys)")
    ap.add_argument("--child", default=None)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--sizes", default="4096,8192,2048")
    ap.add_argument("--repeats", type=int, default=100)
    ap.add_argument("--layouts", action="store_true", help="only the MN-major operand checks of gemm:128x256c2")
    args = ap.parse_args()
    if args.child:
        return child(args)
    if args.layouts:
        rows = layouts()
        if args.json:
            with open(args.json, "w") as f:
                json.dump(rows, f, indent=1, default=str)
        return
    import torch
    from gemm_ladder.measure.bench import Bench
    from gemm_ladder.measure.gpuinfo import Nvml
    keys = args.keys.split(",")
    report = {"correct": [], "timing": []}
    # 1. debug builds in children: a hang is an error after the bounded wait
    for key in (args.debug_keys or args.keys).split(","):
        for bf in (0, 1):
            cmd = [sys.executable, __file__, "--child", key] + (["--bf16"] if bf else [])
            t = time.time()
            try:
                r = subprocess.run(cmd, capture_output=True, text=True, timeout=90)
                out, rc = r.stdout + r.stderr[-2000:], r.returncode
            except subprocess.TimeoutExpired:
                out, rc = "TIMEOUT", -1
            print(f"[debug] {key} bf16={bf} rc={rc} {time.time() - t:.1f}s\n{out}", flush=True)
            report["correct"].append({"key": key, "bf16": bf, "debug": True, "rc": rc, "log": out})
    # 2. normal builds: edge shapes + repeated runs on poisoned outputs
    for key in keys:
        for bf in (0, 1):
            try:
                ok, lines = correctness(key, bool(bf), SHAPES, repeats=0)
                ok2, lines2 = correctness(key, bool(bf), [(1024, 1024, 1024), (384, 512, 2048)],
                                          repeats=args.repeats if bf == 0 else 20)
                ok &= ok2
                lines += lines2
            except Exception as e:  # keep probing the others
                ok, lines = False, [f"{key} bf16={bf} ERROR {type(e).__name__}: {e}"]
            print("\n".join(lines), flush=True)
            report["correct"].append({"key": key, "bf16": bf, "ok": ok, "lines": lines})
    # 3. timing, interleaved with cuBLAS
    bench = Bench(0)
    nvml = Nvml(0)
    for size in [int(s) for s in args.sizes.split(",")]:
        for bf in ((0, 1) if size == 4096 else (0,)):
            dt = torch.bfloat16 if bf else torch.float16
            M = N = K = size
            a, b = bench.inputs(M, N, K, dt)
            cout = torch.empty(M, N, dtype=dt, device="cuda")
            cublas = lambda: torch.matmul(a, b.T, out=cout)  # noqa: E731
            fns, names = [cublas], ["cublas"]
            for key in keys:
                try:
                    k = Kernel(key, bool(bf))
                    out = torch.empty(M, N, dtype=dt, device="cuda")
                    p, grid = k.plan(a, b, out)
                    fns.append(p)
                    names.append(key)
                except Exception as e:
                    print(f"timing {key}: {type(e).__name__}: {e}", flush=True)
            n = 60 if size <= 4096 else 25
            times = bench.time_interleaved(fns, n)
            med = {nm: statistics.median(t) for nm, t in zip(names, times)}
            g = nvml.sample()
            for nm in names[1:]:
                row = {"key": nm, "size": size, "dtype": "bf16" if bf else "fp16", "ms": med[nm],
                       "cublas_ms": med["cublas"], "ratio": med["cublas"] / med[nm],
                       "tflops": 2 * M * N * K / med[nm] / 1e9, "gpu": g}
                report["timing"].append(row)
                print(f"TIME {nm:6s} {size} {row['dtype']} {med[nm]:.4f} ms  cublas {med['cublas']:.4f}  "
                      f"ratio {row['ratio']:.3f}  {row['tflops']:.0f} TFLOP/s  sm={g.get('sm_clock_mhz')} "
                      f"W={g.get('power_w')}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=str)


if __name__ == "__main__":
    main()
