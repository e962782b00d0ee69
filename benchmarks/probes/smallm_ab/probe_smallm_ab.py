"""A/B: the small-M kernel before the stream-K deal (c2c12e5) against the current one, same
split, same process, interleaved with cuBLAS; plus per-kernel device times (torch profiler)."""
import ctypes, statistics, sys
import torch
from gemm_ladder.measure.bench import Bench
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.runtime import driver, jit, launch, smallm

bench = Bench(0)
dev = 0
SHAPES = [(16, 4096, 4096, 8), (64, 4096, 4096, 8), (1, 4096, 4096, 8), (16, 8192, 8192, 4), (64, 14336, 4096, 2), (128, 4096, 4096, 4),
          (16, 4096, 14336, 8)]
# how many clusters of P CTAs fit at once (the deal's cost model assumes GPCs of 16 SMs)
for key in ("smallm", "smallm:n128", "smallm:c2", "smallm:c2n128"):
    fam = smallm.FAMILIES[key]
    prep = launch.prepare(fam, 0, bf16=False)
    print(key, {p: driver.max_active_clusters(prep.kernel, (fam.threads, 1, 1), fam.dynamic_smem, (p, 1, 1)) for p in (1, 2, 4, 8)})

for fam in (smallm.FAMILIES["smallm"], smallm.FAMILIES["smallm:n128"]):
  for bf16 in (False,):
    d = fam.kernel_defines()
    old_defs = {k: v for k, v in d.items() if k != "GL_CONSUMERS"}
    ck = jit.compile_kernel("smallm_old.cu", "gemm_smallm_splitk", old_defs)
    old_main = driver.load(ck, dev, fam.dynamic_smem)
    old_red = old_main.sibling("gemm_smallm_reduce")
    for (M, N, K, s) in SHAPES:
        a, b = bench.inputs(M, N, K, torch.float16)
        kt = fam.k_tiles(K)
        per = -(-kt // min(s, kt)); s = -(-kt // per)
        mt, nt = fam.tiles(M, N)
        ws = torch.empty((s, M, N), dtype=torch.float32, device="cuda")
        c_old = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
        stream = torch.cuda.current_stream().cuda_stream
        args = [driver.TensorMap(a.data_ptr(), M, K, K, fam.bm, 64, bf16), driver.TensorMap(b.data_ptr(), N, K, K, fam.bn, 64, bf16),
                ctypes.c_uint64(ws.data_ptr()), ctypes.c_uint64(c_old.data_ptr()), M, N, K, per]
        l1 = driver.PreparedLaunch(old_main, (nt, mt, s), (256, 1, 1), args, stream=stream, dynamic_smem=fam.dynamic_smem)
        l2 = driver.PreparedLaunch(old_red, (-(-M * N // 4 // 128), 1, 1), (128, 1, 1),
                                   [ctypes.c_uint64(ws.data_ptr()), ctypes.c_uint64(c_old.data_ptr()), M, N, s], stream=stream, pdl=True)
        old = lambda: (l1(), l2())
        c_new = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
        p = fam.plan(a, b, c_new, splits=s)
        old(); p(); torch.cuda.synchronize()
        ok1 = check_product(c_old, a, b)[0]; ok2 = check_product(c_new, a, b)[0]
        same = torch.equal(c_old.view(torch.int16), c_new.view(torch.int16))
        cub = lambda: torch.matmul(a, b.T)
        to, tn, tc = bench.time_interleaved([old, p, cub], 200)
        mo, mn, mc = (statistics.median(x) * 1e3 for x in (to, tn, tc))
        # per-kernel device time
        from torch.profiler import profile, ProfilerActivity
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(30):
                old(); p()
            torch.cuda.synchronize()
        ev = sorted((e.time_range.start, e.name, e.time_range.elapsed_us()) for e in prof.events()
                    if e.device_type.name == "CUDA" and "smallm" in e.name)
        cyc = [x for x in ev]
        olds = {"main": [], "reduce": []}; news = {"main": [], "reduce": []}
        for i in range(0, len(cyc) - 3, 4):
            o1, o2, n1, n2 = cyc[i:i + 4]
            olds["main"].append(o1[2]); olds["reduce"].append(o2[2]); news["main"].append(n1[2]); news["reduce"].append(n2[2])
        summary = {k: (statistics.median(olds[k]), statistics.median(news[k])) for k in olds if olds[k]}
        print(f"{fam.key:12} {M:4} {N:6} {K:6} s={s} units={p.deal.units} planes={p.deal.planes} "
              f"cluster={p.deal.cluster[0]} ok={ok1},{ok2} bitsame={same} old {mo:.2f} new {mn:.2f} cublas {mc:.2f} us",
              flush=True)

