"""The library on the GPU: no-copy layouts (allocation accounting), every layout and
alignment against an fp32 reference, CUDA graphs, torch.compile, autograd, streams, devices."""
import gc

import pytest

import gemm_ladder
from gemm_ladder.families.common import reads_mn
from gemm_ladder.library import api, fastpath, layout
from gpu_util import has_hopper, needs_gpu
from gemm_ladder.library import select

pytestmark = [needs_gpu, pytest.mark.gpu]


def _torch():
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    return torch


def rnd(*shape, dtype=None, seed=0):
    torch = _torch()
    g = torch.Generator(device="cuda").manual_seed(seed * 7919 + sum(shape))
    return torch.randn(*shape, device="cuda", generator=g).to(dtype or torch.float16)


def check(c, a, b):
    """c == a @ b against an fp32 reference; NaN left in c (unwritten) fails."""
    from gemm_ladder.measure.accuracy import check_output
    ref = a.float() @ b.float()
    assert c.shape == ref.shape
    ok, mx, rel, msg = check_output(c, ref, "bfloat16" if c.dtype == _torch().bfloat16 else "float16")
    assert ok, msg


def poison_next_alloc(nbytes: int) -> None:
    """Leave NaN in the block the caching allocator will hand out next for this size, so an
    element the kernel does not write shows up as NaN."""
    torch = _torch()
    torch.empty(max(nbytes // 2, 1), dtype=torch.float16, device="cuda").fill_(float("nan"))


def _strided(rows, cols, row_stride, dtype, seed):
    return rnd(rows, row_stride, dtype=dtype, seed=seed)[:, :cols]


def _misaligned(rows, cols, dtype, seed):
    return rnd(rows * cols + 1, dtype=dtype, seed=seed)[1:].view(rows, cols)


A_LAYOUTS = {
    "row-major": lambda M, K, dt: rnd(M, K, dtype=dt, seed=1),
    "row-strided slice": lambda M, K, dt: _strided(M, K, layout.round_up(K, 8) + 24, dt, 2),
    "transposed view": lambda M, K, dt: rnd(K, M, dtype=dt, seed=3).T,
    "misaligned": lambda M, K, dt: _misaligned(M, K, dt, 4),
    "column-strided": lambda M, K, dt: rnd(M, 2 * K, dtype=dt, seed=5)[:, ::2],
}
B_LAYOUTS = {  # b is (K, N)
    "row-major": lambda K, N, dt: rnd(K, N, dtype=dt, seed=6),
    "transposed view": lambda K, N, dt: rnd(N, K, dtype=dt, seed=7).T,
    "strided transposed view": lambda K, N, dt: _strided(N, K, layout.round_up(K, 8) + 16, dt, 8).T,
    "misaligned": lambda K, N, dt: _misaligned(K, N, dt, 9),
}
SHAPES = [(256, 384, 192), (129, 131, 77), (1, 520, 264), (1000, 8, 13), (300, 1, 40),
          (16, 1024, 2048), (100, 264, 1000),  # these two: the small-M family (split K)
          (127, 8191, 255), (3, 2049, 4103)]  # rows of several staging-copy chunks (2048 columns), ragged


@pytest.mark.parametrize("M,N,K", SHAPES)
@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_every_layout_and_alignment(M, N, K, dtype_name):
    torch = _torch()
    dt = getattr(torch, dtype_name)
    for a_kind, make_a in A_LAYOUTS.items():
        for b_kind, make_b in B_LAYOUTS.items():
            a, b = make_a(M, K, dt), make_b(K, N, dt)
            poison_next_alloc(M * layout.round_up(N, 8) * 2)
            c = gemm_ladder.matmul(a, b)
            torch.cuda.synchronize()
            check(c, a, b)
            assert c.stride() == layout.result_strides((M,), N)[1], (a_kind, b_kind)


@pytest.mark.parametrize("out_kind", ["contiguous", "padded rows", "column-major", "misaligned", "batched"])
@pytest.mark.parametrize("N", [256, 131])
def test_out_every_layout(out_kind, N):
    torch = _torch()
    M, K = 192, 136
    a, w = rnd(M, K), rnd(N, K, seed=1)
    out = {"contiguous": lambda: torch.empty((M, N), dtype=torch.float16, device="cuda"),
           "padded rows": lambda: torch.empty((M, N + 13), dtype=torch.float16, device="cuda")[:, :N],
           "column-major": lambda: torch.empty((N, M), dtype=torch.float16, device="cuda").T,
           "misaligned": lambda: _misaligned(M, N, torch.float16, 3),
           "batched": lambda: torch.empty((M, N), dtype=torch.float16, device="cuda")}[out_kind]()
    base = out if out_kind != "padded rows" else out.as_strided((M, N + 13), (N + 13, 1))
    base.fill_(float("nan"))
    if out_kind == "batched":
        res = gemm_ladder.matmul(a.view(4, 48, K), w.T, out=out.view(4, 48, N))
        assert res.data_ptr() == out.data_ptr()
    else:
        assert gemm_ladder.matmul(a, w.T, out=out) is out
    torch.cuda.synchronize()
    check(out, a, w.T)
    if out_kind == "padded rows":  # the row padding is the caller's: never written (fuzz regression)
        assert torch.isnan(base[:, N:]).all()


# ---- no copies: allocation accounting ----------------------------------------------------

def _peak_extra(fn):
    """Bytes allocated by fn at its peak, beyond what was allocated before (result included)."""
    torch = _torch()
    fn()  # first call: compile, load, build the configuration
    torch.cuda.synchronize()
    # earlier tests' tensors held in reference cycles would otherwise be freed by a collection
    # that happens to run inside the measured call (seen once: the peak came out 128 KB under
    # the result)
    gc.collect()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    res = fn()
    torch.cuda.synchronize()
    return torch.cuda.max_memory_allocated() - before, res


def _block(nbytes: int) -> int:
    return layout.round_up(nbytes, 512)  # the caching allocator's granularity


@pytest.mark.parametrize("case", ["row-major a, transposed-view b", "row-strided slices", "K=13 in 16-wide rows",
                                  "N=1155 (padded result)", "batched a", "row-major b (K, N)", "transposed-view a"])
def test_allocations_are_the_output_and_only_needed_copies(case):
    torch = _torch()
    M, N, K = 2048, 1152, 256  # 144 tiles of 128 x 128: a ladder step (the small-M family is for fewer)
    if case == "row-major a, transposed-view b":
        a, b = rnd(M, K), rnd(N, K).T
    elif case == "row-strided slices":
        a, b = rnd(M, K + 64)[:, :K], rnd(N, K + 32)[:, :K].T
    elif case == "K=13 in 16-wide rows":
        K = 13
        a, b = rnd(M, 16)[:, :K], rnd(N, 16)[:, :K].T
    elif case == "N=1155 (padded result)":
        N = 1155  # 160 tiles: a ladder step
        a, b = rnd(M, K), rnd(N, K).T
    elif case == "batched a":
        a, b = rnd(4, M // 4, K), rnd(N, K).T
    elif case == "row-major b (K, N)":
        a, b = rnd(M, K), rnd(K, N)
    else:
        a, b = rnd(K, M).T, rnd(N, K).T
    api.cache_clear()  # a new configuration may evict an old one and free its scratch mid-call
    extra, res = _peak_extra(lambda: gemm_ladder.matmul(a, b))
    check(res.reshape(-1, N), a.reshape(-1, K), b)
    cfg = fastpath.config_for("mm", a, b)
    # every case reads its operands in place: MN-major ones (row-major b, transposed-view a)
    # on the best step with mn_major (select.step_for with the layout), the others on the pick
    assert cfg.a.direct and cfg.b.direct, (cfg.a.why, cfg.b.why)
    assert extra == _block(M * layout.round_up(N, 8) * 2)  # the result, nothing else
    mn = case in ("row-major b (K, N)", "transposed-view a")
    a_mn, b_mn = case == "transposed-view a", case == "row-major b (K, N)"
    assert cfg.step.key == select.step_for(M, N, K, a_mn=a_mn, b_mn=b_mn).key and (not mn or any(reads_mn(cfg.step)))
    flag = "GL_B_MN" if "b (K, N)" in case else "GL_A_MN"  # Step.layout_defines, compiled in
    assert (flag in cfg.defines, any(flag in o for o in cfg.launch.kernel.compiled.options)) == (mn, mn)


def _small_m(st) -> bool:
    """The small-M split-K family ('smallm', 'smallm:n128'): not a ladder Step."""
    from gemm_ladder.families.ladder_step import Step
    return not isinstance(st, Step)


def test_small_m_reads_b_in_place_and_copies_an_m_major_a():
    """Decode-like shapes run the small-M family: a transposed-view b and a row-major b are
    both read in place (the latter by its GL_B_MN build); a transposed-view a (M-major, which
    the family reads K-major only) is copied when the model prices the copy below gemm:128x256."""
    torch = _torch()
    M, N, K = 16, 1024, 8192  # a long K: split (at 2048 a K-major b runs smallm:n32's whole tiles)
    a, w = rnd(M, K), rnd(N, K, seed=1)
    extra, res = _peak_extra(lambda: gemm_ladder.matmul(a, w.T))
    check(res, a, w.T)
    cfg = fastpath.config_for("mm", a, w.T)
    assert _small_m(cfg.step) and cfg.a.direct and cfg.b.direct and cfg.deal.splits > 1
    # per call only the result: the fp32 partials (and any staging copy) are the configuration's
    # scratch for this stream, allocated by the first call and kept
    assert extra == _block(M * N * 2)
    assert cfg.scratch.shapes.get("ws") == (((cfg.planes, M, N), torch.float32) if cfg.planes else None)
    b_kn = w.T.contiguous()
    extra, res = _peak_extra(lambda: gemm_ladder.matmul(a, b_kn))
    check(res, a, b_kn)
    cfg = fastpath.config_for("mm", a, b_kn)
    assert _small_m(cfg.step) and cfg.b.direct and cfg.defines == {"GL_B_MN": 1}
    assert extra == _block(M * N * 2) and "b" not in cfg.scratch.shapes  # no copy of b
    a_t = a.T.contiguous().T  # M-major a
    extra, res = _peak_extra(lambda: gemm_ladder.matmul(a_t, b_kn))
    check(res, a_t, b_kn)
    cfg = fastpath.config_for("mm", a_t, b_kn)
    assert _small_m(cfg.step) and not cfg.a.direct and cfg.b.direct
    assert extra == _block(M * N * 2) and cfg.scratch.shapes["a"] == ((M, K), torch.float16)  # a's K-major copy


def test_out_in_place_allocates_nothing():
    torch = _torch()
    a, w = rnd(2048, 256), rnd(1152, 256)  # a ladder step: it writes C through a tensor map, any row stride
    for out in (torch.empty(2048, 1152, dtype=torch.float16, device="cuda"),
                torch.empty(2048, 1168, dtype=torch.float16, device="cuda")[:, :1152]):
        extra, res = _peak_extra(lambda: gemm_ladder.matmul_nt(a, w, out=out))
        assert extra == 0 and res is out
        check(out, a, w.T)


# ---- CUDA graphs -------------------------------------------------------------------------

def test_cuda_graph_capture_and_replay_with_new_inputs():
    torch = _torch()
    gemm_ladder.warmup(dtypes=(torch.float16,))
    M, N, K = 384, 200, 136
    a, w, b_kn = rnd(M, K), rnd(N, K, seed=1), rnd(K, N, seed=2)
    x3 = rnd(2, 96, K, seed=3)
    out = torch.empty((M, N + 8), dtype=torch.float16, device="cuda")[:, :N]
    calls = lambda: (gemm_ladder.matmul(a, w.T), gemm_ladder.matmul(a, b_kn),  # noqa: E731
                     gemm_ladder.matmul_nt(a, w, out=out), gemm_ladder.linear(x3, w))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm up on a side stream, as torch's graph docs do
        for _ in range(2):
            calls()
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        c1, c2, c3, c4 = calls()
    for i in range(3):
        for t in (a, w, b_kn, x3):
            t.copy_(rnd(*t.shape, seed=100 + i))
        for t in (c1, c2, c3, c4):
            t.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        check(c1, a, w.T)
        check(c2, a, b_kn)
        check(out, a, w.T)
        assert c3 is out
        check(c4.reshape(-1, N), x3.reshape(-1, K), w.T)


@pytest.mark.parametrize("N,step,dsmem", [(1000, "smallm:n128", False), (512, "smallm:dsmem", True), (1000, None, True)],
                         ids=["workspace", "cluster", "pick"])
def test_cuda_graph_of_the_small_m_family(N, step, dsmem):
    """Split-K kernel + programmatic reduction, workspace from the graph's pool; or one
    launch of clusters that sum the pieces on chip (smallm:dsmem, and the pick here:
    smallm:n64 in clusters of 4)."""
    torch = _torch()
    gemm_ladder.warmup(dtypes=(torch.bfloat16,), mn_major=False)
    a, w = rnd(8, 2048, dtype=torch.bfloat16), rnd(N, 2048, dtype=torch.bfloat16, seed=1)
    cfg = fastpath.config_for("nt", a, w, step=step)
    assert _small_m(cfg.step) and cfg.deal.dsmem == dsmem and (cfg.planes > 1 or dsmem)
    assert step is not None or cfg.step.key == "smallm:n64"
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        gemm_ladder.matmul_nt(a, w, step=step)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        c = gemm_ladder.matmul_nt(a, w, step=step)
    for i in range(3):
        a.copy_(rnd(8, 2048, dtype=torch.bfloat16, seed=50 + i))
        c.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        check(c, a, w.T)


def test_first_call_inside_capture_compiles_without_breaking_it():
    """A configuration never seen before, of a kernel never loaded, first called while a
    graph is captured: the JIT compile and module load happen inside the capture."""
    torch = _torch()
    a, w = rnd(256, 128, dtype=torch.bfloat16), rnd(192, 128, dtype=torch.bfloat16)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        c = gemm_ladder.matmul(a, w.T, step="5:d3")
    a.copy_(rnd(256, 128, dtype=torch.bfloat16, seed=5))
    g.replay()
    torch.cuda.synchronize()
    check(c, a, w.T)


# ---- torch.compile, autograd, opcheck ----------------------------------------------------

class TwoLayer:
    @staticmethod
    def make(d=256, h=512, dtype=None):
        torch = _torch()

        class Model(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.up = gemm_ladder.Linear(d, h, device="cuda", dtype=dtype)
                self.down = gemm_ladder.Linear(h, d, device="cuda", dtype=dtype)

            def forward(self, x):
                return self.down(torch.relu(self.up(x)))
        return Model()


@pytest.mark.parametrize("mode", ["default", "reduce-overhead"])
def test_torch_compile_fullgraph_matches_eager(mode):
    torch = _torch()
    torch.manual_seed(0)
    model = TwoLayer.make(dtype=torch.float16)
    compiled = torch.compile(model, fullgraph=True, mode=mode)
    with torch.no_grad():
        for i in range(3):  # reduce-overhead records a CUDA graph on a later call
            x = rnd(4, 33, 256, seed=i)
            eager = model(x)
            got = compiled(x)
            torch.cuda.synchronize()
            torch.testing.assert_close(got, eager)


def test_autograd_matches_torch():
    torch = _torch()
    torch.manual_seed(0)
    layer = gemm_ladder.Linear(192, 136, device="cuda", dtype=torch.bfloat16)
    x = rnd(3, 50, 192, dtype=torch.bfloat16).requires_grad_()
    layer(x).float().square().mean().backward()
    xr = x.detach().float().requires_grad_()
    wr = layer.weight.detach().float().requires_grad_()
    (xr @ wr.T).square().mean().backward()
    for got, ref in ((x.grad, xr.grad), (layer.weight.grad, wr.grad)):
        err = (got.float() - ref).norm() / ref.norm()
        assert err < 2e-2, err


def test_opcheck_on_gpu():
    torch = _torch()
    a, w = rnd(64, 136).requires_grad_(), rnd(72, 136, seed=1).requires_grad_()
    torch.library.opcheck(torch.ops.gemm_ladder.matmul.default, (a, w.T, None))
    torch.library.opcheck(torch.ops.gemm_ladder.matmul.default, (rnd(2, 9, 40), rnd(40, 33), None))


# ---- streams and devices -----------------------------------------------------------------

def test_runs_on_the_current_stream():
    torch = _torch()
    a, w = rnd(2048, 1024), rnd(1024, 1024, seed=1)
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for i in range(3):  # each product is ordered after the write before it, on s
            a.copy_(rnd(2048, 1024, seed=10 + i))
            c = gemm_ladder.matmul(a, w.T)
    s.synchronize()
    check(c, a, w.T)


def _gpus() -> int:
    try:
        return _torch().cuda.device_count() if has_hopper() else 0
    except Exception:
        return 0


@pytest.mark.skipif(_gpus() < 2, reason="needs two GPUs")
def test_second_device_by_index():
    torch = _torch()
    with torch.cuda.device(1):
        a, w = rnd(256, 128), rnd(64, 128, seed=1)
    c = gemm_ladder.matmul(a, w.T)  # current device is 0, tensors on 1
    assert c.device == a.device
    torch.cuda.synchronize(1)
    check(c, a, w.T)
    with pytest.raises(ValueError, match="different devices"):
        gemm_ladder.matmul(a, w.T.to("cuda:0"))
