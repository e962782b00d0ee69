"""Which kernel costs the time: old/new main kernel x old/new reduction, same split."""
import ctypes, statistics
import torch
from gemm_ladder.measure.bench import Bench
from gemm_ladder.measure.accuracy import check_product
from gemm_ladder.runtime import driver, jit, launch, smallm

bench = Bench(0)
SHAPES = [(16, 4096, 4096, 8), (64, 4096, 4096, 8), (1, 4096, 4096, 8), (64, 14336, 4096, 2), (16, 8192, 8192, 4)]
fam = smallm.FAMILIES["smallm"]
d = fam.kernel_defines()
old_defs = {k: v for k, v in d.items() if k != "GL_CONSUMERS"}
om = driver.load(jit.compile_kernel("smallm_old.cu", "gemm_smallm_splitk", old_defs), 0, fam.dynamic_smem)
orr = om.sibling("gemm_smallm_reduce")
nm = launch.prepare(fam, 0, bf16=False).kernel
nr = nm.sibling("gemm_smallm_reduce")
for (M, N, K, s) in SHAPES:
    a, b = bench.inputs(M, N, K, torch.float16)
    kt = fam.k_tiles(K); per = kt // s
    mt, nt = fam.tiles(M, N)
    ws = torch.empty((s, M, N), dtype=torch.float32, device="cuda")
    c = torch.full((M, N), float("nan"), dtype=torch.float16, device="cuda")
    st = torch.cuda.current_stream().cuda_stream
    maps = lambda: [driver.TensorMap(a.data_ptr(), M, K, K, 64, 64, False), driver.TensorMap(b.data_ptr(), N, K, K, 256, 64, False)]
    W, C = ctypes.c_uint64(ws.data_ptr()), ctypes.c_uint64(c.data_ptr())
    OM = driver.PreparedLaunch(om, (nt, mt, s), (256, 1, 1), maps() + [W, C, M, N, K, per], stream=st, dynamic_smem=fam.dynamic_smem)
    NM = driver.PreparedLaunch(nm, (nt * mt * s, 1, 1), (256, 1, 1), maps() + [W, C, M, N, K, per], stream=st, dynamic_smem=fam.dynamic_smem)
    OR = driver.PreparedLaunch(orr, (-(-M * N // 4 // 128), 1, 1), (128, 1, 1), [W, C, M, N, s], stream=st, pdl=True)
    NR = driver.PreparedLaunch(nr, (-(-N // 4 // 128), M, 1), (128, 1, 1), [W, C, M, N, K, per], stream=st, pdl=True)
    OR0 = driver.PreparedLaunch(orr, (-(-M * N // 4 // 128), 1, 1), (128, 1, 1), [W, C, M, N, s], stream=st, pdl=False)
    NR0 = driver.PreparedLaunch(nr, (-(-N // 4 // 128), M, 1), (128, 1, 1), [W, C, M, N, K, per], stream=st, pdl=False)
    combos = {"oM+oR": lambda: (OM(), OR()), "nM+nR": lambda: (NM(), NR()), "oM+nR": lambda: (OM(), NR()),
              "nM+oR": lambda: (NM(), OR()), "oM+oR0": lambda: (OM(), OR0()), "nM+nR0": lambda: (NM(), NR0()),
              "oM": OM, "nM": NM, "cublas": lambda: torch.matmul(a, b.T)}
    oks = []
    for k, f in combos.items():
        if k in ("oM", "nM", "cublas"):
            continue
        c.fill_(float("nan")); f(); torch.cuda.synchronize(); oks.append(check_product(c, a, b)[0])
    times = bench.time_interleaved(list(combos.values()), 200)
    print(f"{M:4} {N:6} {K:6} s={s} ok={all(oks)} " + " ".join(f"{k} {statistics.median(t)*1e3:.2f}" for k, t in zip(combos, times)), flush=True)
