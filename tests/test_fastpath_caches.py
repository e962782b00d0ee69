"""The library's fast path without a GPU, continued (test_fastpath.py has layouts and the
emulated calls): the caches (validate once, encode once, stream per call), errors, the
bench --api and host-profile plumbing, reusable launches, and the per-stream scratch."""
from types import SimpleNamespace

import pytest
import torch

import gemm_ladder
from fake_gpu import FakeGpu, assert_product, is_small_m, last_splitk, misaligned, rnd
from gemm_ladder.families import smallm
from gemm_ladder.families.keys import get_step
from gemm_ladder.library import api, fastconfig, fastpath, select, staging


# ---- caches: validate once, encode once, stream per call ---------------------------------

def test_second_call_only_launches(gpu):
    a, w = rnd(64, 32), rnd(48, 32, seed=1)
    out = torch.empty(64, 48).half()
    gemm_ladder.matmul_nt(a, w, out=out)
    built = api.cache_info()
    for _ in range(3):
        gemm_ladder.matmul_nt(a, w, out=out)
    assert gpu.validations == 1 and len(gpu.prepared) == 1
    assert api.cache_info() == built  # nothing validated, prepared or encoded again
    assert len(gpu.launches) == 4


def test_new_pointer_encodes_one_map(gpu):
    w = rnd(48, 40, seed=1)  # M = 192, K = 40: a ladder step (three maps)
    first = (rnd(192, 40), torch.empty(192, 48).half())  # kept alive: the next ones get new memory
    gemm_ladder.matmul_nt(first[0], w, out=first[1])
    before = api.cache_info()
    gemm_ladder.matmul_nt(rnd(192, 40, seed=3), w, out=torch.empty(192, 48).half())
    after = api.cache_info()
    assert after["configs_built"] == before["configs_built"]
    assert after["tensor_maps_encoded"] - before["tensor_maps_encoded"] == 2  # new a, new out; w known


def test_tensor_map_cache_is_bounded(gpu, monkeypatch):
    monkeypatch.setattr(fastconfig, "TENSOR_MAPS", fastconfig.LRU(4))
    w = rnd(16, 32, seed=1)
    keep = [(rnd(8, 32, seed=i), torch.empty(8, 16).half()) for i in range(10)]
    for a, out in keep:
        gemm_ladder.matmul_nt(a, w, out=out)
        assert_product(out, a, w.T)
    assert len(fastconfig.TENSOR_MAPS) == 4


def test_config_cache_is_bounded(gpu, monkeypatch):
    monkeypatch.setattr(fastpath, "CONFIGS", fastpath.LRU(3))
    for n in range(8, 80, 8):
        gemm_ladder.matmul(rnd(16, 32), rnd(32, n, seed=n))
    assert len(fastpath.CONFIGS) == 3


def test_stream_is_read_per_call(gpu):
    """A cached launch never keeps a stale stream (CUDA graphs capture on a side stream)."""
    a, w = rnd(16, 32), rnd(16, 32, seed=1)
    for s in (7, 9, 7, 11):
        gpu.stream = s
        gemm_ladder.matmul_nt(a, w)
    assert [r.stream for r in gpu.launches] == [7, 9, 7, 11]
    assert api.cache_info()["configs_built"] == 1


def test_cache_keys_on_layout_dtype_and_alignment(gpu):
    a, b = rnd(32, 32), rnd(32, 32, seed=1)
    gemm_ladder.matmul(a, b)
    gemm_ladder.matmul(a, b.T.contiguous().T)  # same shape, other strides
    gemm_ladder.matmul(a.bfloat16(), b.bfloat16())
    gemm_ladder.matmul(misaligned(32, 32, 2), b)
    gemm_ladder.matmul(a, b, step="7")
    assert api.cache_info()["configs_built"] == 5


# ---- errors ------------------------------------------------------------------------------

@pytest.mark.parametrize("call,exc,match", [
    (lambda: gemm_ladder.matmul(rnd(4, 4).float(), rnd(4, 4).float()), TypeError, "float16 or torch.bfloat16"),
    (lambda: gemm_ladder.matmul(rnd(4, 4), rnd(4, 4).bfloat16()), TypeError, "same dtype"),
    (lambda: gemm_ladder.matmul(rnd(4, 8), rnd(4, 8)), ValueError, "inner dimensions differ"),
    (lambda: gemm_ladder.matmul_nt(rnd(4, 8), rnd(4, 6)), ValueError, "needs equal K"),
    (lambda: gemm_ladder.matmul(rnd(8), rnd(8, 4)), ValueError, ">= 2 dims"),
    (lambda: gemm_ladder.matmul(rnd(4, 8), rnd(8, 4), out=rnd(4, 5)), ValueError, "out must be a"),
    (lambda: gemm_ladder.matmul(rnd(4, 8), rnd(8, 4)), ValueError, "both must be CUDA tensors"),
    (lambda: gemm_ladder.matmul(None, rnd(4, 4)), TypeError, "torch.Tensor"),
])
def test_errors_are_one_clear_exception(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_mixed_devices_error():
    dev = SimpleNamespace
    with pytest.raises(ValueError, match="different devices"):
        fastpath._check_devices("matmul", dev(device=torch.device("cuda:0")), dev(device=torch.device("cuda:1")), None)
    with pytest.raises(ValueError, match="out is on cuda:1"):
        fastpath._check_devices("matmul", dev(device=torch.device("cuda:0")), dev(device=torch.device("cuda:0")),
                                dev(device=torch.device("cuda:1")))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without a GPU")
def test_cpu_tensors_without_gpu_say_so():
    with pytest.raises(ValueError, match="no CUDA GPU is available"):
        gemm_ladder.matmul(rnd(4, 8), rnd(8, 4))


def test_unknown_step(gpu):
    with pytest.raises(KeyError, match="unknown step"):
        gemm_ladder.matmul(rnd(4, 8), rnd(8, 4), step="12")


def test_invalid_call_is_not_cached(gpu):
    with pytest.raises(ValueError):
        gemm_ladder.matmul(rnd(4, 8), rnd(4, 8))
    with pytest.raises(ValueError):
        gemm_ladder.matmul(rnd(4, 8), rnd(4, 8))
    assert gpu.validations == 2 and api.cache_info()["configs"] == 0


# ---- bench --api, its plumbing on the emulated driver (the numbers come from the GPU) ------

def test_bench_api_plumbing(gpu, monkeypatch):
    from gemm_ladder.cli import commands as cli
    from gemm_ladder.measure import bench_api

    class FakeBench:
        calls: list = []

        def __init__(self, device_index):
            self.nvml = SimpleNamespace(sample=lambda: {"sm_clock_mhz": 1980})

        def inputs(self, M, N, K, dtype):
            return rnd(M, K, dtype=dtype), rnd(N, K, dtype=dtype, seed=1)

        def time_interleaved(self, fns, reps):
            self.calls.append(len(fns))
            for f in fns:
                f()
            # [ours, (the kernel of the same step,) torch.matmul]
            return [[1.0] * reps] + [[0.98] * reps] * (len(fns) - 2) + [[0.9] * reps]

    class FakePlan:
        def __init__(self, st, a, b, out):
            self.a, self.b, self.out = a, b, out

        def __call__(self):
            self.out.copy_(self.a.float() @ self.b.float().T)

        def synchronize(self):
            pass

    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(bench_api.bench, "Bench", FakeBench)
    monkeypatch.setattr(bench_api.runner, "plan", FakePlan)
    rows = bench_api.device_rows([(1024, 3152, 40)], "bfloat16", log=lambda m: None)
    # a kernel row per step the calls run: K-major b -> gemm:128x232, row-major b -> gemm:128x256
    # (mn_major; the 232-wide tiles start off 32-byte sectors in an N-major B, api rule 5)
    assert [(r["call"], r["step"]) for r in rows] == [
        ("kernel (launch.plan)", "gemm:128x232"), ("kernel (launch.plan)", "gemm:128x256"),
        (bench_api.CALLS[0], "gemm:128x232"), (bench_api.CALLS[1], "gemm:128x256"),
        (bench_api.CALLS[2], "gemm:128x232")]
    assert all(r["ok"] and r["ratio_to_cublas"] == pytest.approx(0.9) for r in rows), rows
    # call rows: three-way interleave, the kernel's time from that same run
    assert FakeBench.calls == [2, 2] * 2 + [3, 3] * 3
    for r in rows[2:]:
        assert r["kernel_ms"] == pytest.approx(0.98) and r["kernel_ratio_to_cublas"] == pytest.approx(0.9 / 0.98)
        assert r["api_vs_kernel"] == pytest.approx(0.98) and r["within_3pct_of_kernel"]
        assert r["kernel_row_ratio_to_cublas"] == pytest.approx(0.9)
    assert all(k in r for r in rows for k in ("M", "N", "K", "dtype", "ms", "cublas_ms", "ratio_to_cublas", "ok",
                                               "call"))
    assert all(r["operands"] == "in place" for r in rows[2:])  # row-major b: read N-major, no copy
    host = bench_api.host_overhead(torch.float16, calls=3, rounds=2, size=16, device="cpu")
    assert set(host) == set(bench_api.CALLS) and all(v["us"] > 0 and v["torch_us"] > 0 for v in host.values())
    result = {"date": "2026-11-30T10:00:00+00:00", "commit": "0123456789abcdef", "rows": rows,
              "host_us_by_call": host, "gpu": {"torch_name": "NVIDIA H200"}, "host_call": bench_api.HEADLINE_CALL,
              "host_us_per_call": 1.0, "host_call_max": "matmul(a, b_nk.T)", "host_us_max_over_calls": 2.0}
    assert str(bench_api.default_json_path("benchmarks/results", result)) == \
        "benchmarks/results/2026-11-30_h200_api_0123456.json"
    from rich.console import Console
    console = Console(record=True, width=200)
    bench_api.print_api(result, console)
    text = console.export_text()
    assert "matmul(a, b_nk.T)" in text and "worst form matmul(a, b_nk.T): 2.00 us" in text and "0.9800" in text
    args = cli.build_parser().parse_args(["bench", "--api"])
    assert args.api and args.sizes is None and args.dtype is None and args.steps is None


def test_calls_and_config_for_share_one_key(gpu):
    """The per-call path (fastpath._call) and config_for find a configuration by one key."""
    x, b = rnd(8, 32), rnd(32, 16, seed=1)
    gemm_ladder.matmul(x, b)
    gemm_ladder.matmul_nt(x, b.T.contiguous(), out=torch.empty(8, 16).half())
    assert fastpath._key("mm", x, b, None, None, x.data_ptr(), b.data_ptr()) in fastpath.CONFIGS.entries
    assert fastpath.config_for("mm", x, b) is fastpath.CONFIGS.entries[next(iter(fastpath.CONFIGS.entries))]
    assert api.cache_info()["configs_built"] == 2


def test_host_profile_plumbing(gpu, monkeypatch):
    """scripts/host_profile.py on the emulated driver (its numbers come from the GPU)."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "scripts" / "host_profile.py"
    spec = importlib.util.spec_from_file_location("host_profile", path)
    hp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hp)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    res = hp.profile(size=16, calls=3, rounds=2, device="cpu")
    us = res["us_per_call"]
    for form in ("matmul_nt(a, b_nk, out=c)", "matmul(a, b_nk.T)", "matmul(a, b_kn)"):
        assert us[f"full: {form}"] > 0 and us[f"torch.matmul: {form}"] > 0 and us[f"{form}: fastpath._key"] > 0
        assert any(k.startswith(f"{form}: ReusableLaunch call") for k in us), us
    assert res["steps"]["matmul(a, b_kn)"] == select.step_for(16, 16, 16, b_mn=True).key
    assert api.cache_info()["configs_built"] == 3  # the profile's lookups found the calls' entries
    # the report (main): its summary line names every field it reads
    monkeypatch.setattr(hp, "profile", lambda size, calls, rounds: res)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    from gemm_ladder.library import runner as launch_mod
    monkeypatch.setattr(launch_mod, "check_device", lambda d: None)
    assert hp.main(["--calls", "3", "--rounds", "2", "--size", "16"]) == 0


def test_reusable_launch_sets_stream_maps_and_pointers(monkeypatch):
    """ReusableLaunch hands the driver the stream, the map addresses and the pointer values
    of the call, and the launch config's other fields (read from the CUlaunchConfig bytes)."""
    import ctypes
    from gemm_ladder.cuda import driver
    seen = []
    config_bytes, hstream_offset = 56, 32  # sizeof(CUlaunchConfig); offset of hStream

    def fake(config_ptr, fn, args_ptr, extra):
        raw = ctypes.string_at(config_ptr, config_bytes)
        dims = ctypes.cast(config_ptr, ctypes.POINTER(ctypes.c_uint32))[:7]
        stream = ctypes.c_void_p.from_address(config_ptr + hstream_offset).value or 0
        slots = (ctypes.c_void_p * 5).from_address(args_ptr)
        ptrs = [ctypes.c_uint64.from_address(slots[i]).value for i in (2, 3)]
        seen.append((dims, stream, fn, slots[0], slots[1], ptrs, ctypes.c_int32.from_address(slots[4]).value,
                     int.from_bytes(raw[48:52], "little")))
        return 1 if stream == 0xbad else 0

    kernel = SimpleNamespace(function=0x777, device_index=0, compiled=SimpleNamespace(name="k"))
    cu = driver._cu()

    class Cu:  # no libcuda here: the launch and the error names are stand-ins
        def __getattr__(self, name):
            return getattr(cu, name)

        @staticmethod
        def cuLaunchKernelEx(config, function, args_ptr, extra):
            return (cu.CUresult(fake(config.getPtr(), function, args_ptr, extra)),)

        @staticmethod
        def cuGetErrorName(err):
            return cu.CUresult.CUDA_SUCCESS, err.name.encode()

        @staticmethod
        def cuGetErrorString(err):
            return cu.CUresult.CUDA_SUCCESS, b"stand-in"
    monkeypatch.setattr(driver, "_cu", lambda: Cu())
    args = [driver.MapSlot(), driver.MapSlot(), ctypes.c_uint64(0), ctypes.c_uint64(0), 5]
    L = driver.ReusableLaunch(kernel, (3, 4, 5), (128, 1, 1), args, dynamic_smem=1000, cluster=(2, 1, 1), pdl=True)
    L(0x1234, (11, 22), (33, 44))
    L(0x1234, (55, 66), (77, 88))
    L(0, (55, 66), (77, 88))
    assert [s[:2] for s in seen] == [([3, 4, 5, 128, 1, 1, 1000], 0x1234)] * 2 + [([3, 4, 5, 128, 1, 1, 1000], 0)]
    assert seen[0][3:] == (11, 22, [33, 44], 5, 2) and seen[1][3:] == (55, 66, [77, 88], 5, 2)
    with pytest.raises(driver.CudaError, match="cuLaunchKernelEx.*CUDA_ERROR_INVALID_VALUE"):
        L(0xbad, (1, 2), (3, 4))


def test_misaligned_b_rows_choose_the_multicast_cluster(monkeypatch):
    """A row-major b whose rows are not whole 32-byte sectors (N = 5000: 10000-byte rows) is
    read in place by gemm:128x256c2, whose cluster multicasts B (cost_model.MISALIGNED_B_COST); the same
    problem with aligned rows, or with only a's rows so, keeps the selection's pick."""
    gpu = FakeGpu(monkeypatch, emulate=False)  # the choice only: no product computed
    a, b = torch.zeros(3000, 4000, dtype=torch.float16), torch.zeros(4000, 5000, dtype=torch.float16)
    a_op, b_op = fastconfig.operand_layouts("mm", a, b, (True, True), 3000, 5000, 4000)
    assert fastpath.b_rows_misaligned(b_op) and not fastpath.b_rows_misaligned(a_op)
    gemm_ladder.matmul(a, b)
    assert gpu.prepared[-1][0] == "gemm:128x256c2" == select.step_for(3000, 5000, 4000, b_mn=True,
                                                                       b_misaligned=True).key
    assert gpu.prepared[-1][3] == {"GL_B_MN": 1} and gpu.launches_counted == 1  # b read N-major, in place
    b16 = torch.zeros(4000, 5008, dtype=torch.float16)[:, :5000]  # the same values' shape in aligned rows
    gemm_ladder.matmul(a, b16)
    assert gpu.prepared[-1][0] == select.step_for(3000, 5000, 4000, b_mn=True).key != "gemm:128x256c2"
    bt = torch.zeros(5000, 4008, dtype=torch.float16)[:, :4000]  # b.T K-major in rows of 4008: misaligned too
    _, bt_op = fastconfig.operand_layouts("nt", a, bt, (True, True), 3000, 5000, 4000)
    assert bt_op.major == "K" and fastpath.b_rows_misaligned(bt_op)
    one = fastconfig.operand_layouts("nt", a, torch.zeros(1, 4000, dtype=torch.float16), (True, True), 3000, 1, 4000)[1]
    assert not fastpath.b_rows_misaligned(one)  # a single row has no stride
    a2 = torch.zeros(3000, 3008, dtype=torch.float16)
    odd = fastconfig.operand_layouts("nt", a2, torch.zeros(40, 4000, dtype=torch.float16)[:, 1:3009], (True, True),
                                     3000, 40, 3008)[1]  # a 2-byte offset: copied, into rows of 3008 (whole sectors)
    assert not odd.direct and not fastpath.b_rows_misaligned(odd)
    odd = fastconfig.operand_layouts("nt", a2[:, :3000], torch.zeros(40, 4000, dtype=torch.float16)[:, 1:3001],
                                     (True, True), 3000, 40, 3000)[1]  # copied into rows of 3000: not whole sectors
    assert not odd.direct and fastpath.b_rows_misaligned(odd)


def test_scratch_is_kept_per_stream_and_fresh_while_capturing(gpu, monkeypatch):
    """Staging copies and the small-M partials live in per-stream scratch of the configuration:
    a second call on the stream reuses them (no allocation, no new tensor map); another stream
    gets its own; a CUDA graph capture gets fresh ones; sets over the size limit are per call."""
    x, b = rnd(127, 255), rnd(255, 199, seed=3)  # both staged (rows of 510 and 398 bytes)
    assert_product(gemm_ladder.matmul(x, b), x, b)
    cfg = fastpath.config_for("mm", x, b)
    assert set(cfg.scratch.shapes) >= {"a", "b"} and cfg.scratch.shapes["b"][0] == (255, 200)
    kept = cfg.scratch._sets[gpu.stream]
    encoded = fastconfig.TENSOR_MAPS.misses
    assert_product(gemm_ladder.matmul(x, b), x, b)
    rec = last_splitk(gpu)
    assert rec.maps[0].ptr == kept["a"].data_ptr() and rec.maps[1].ptr == kept["b"].data_ptr()
    # A's and B's maps found again (C's is new when the result lands at a new address)
    assert fastconfig.TENSOR_MAPS.misses <= encoded + 1 and cfg.scratch._sets[gpu.stream] is kept
    if "ws" in cfg.scratch.shapes:
        assert rec.ws == kept["ws"].data_ptr()
    gpu.stream = 9  # another stream: its own set
    assert_product(gemm_ladder.matmul(x, b), x, b)
    assert last_splitk(gpu).maps[0].ptr != kept["a"].data_ptr() and set(cfg.scratch._sets) == {7, 9}
    monkeypatch.setattr(fastconfig, "_capturing", lambda: True)  # capture: fresh, not kept
    assert_product(gemm_ladder.matmul(x, b), x, b)
    assert last_splitk(gpu).maps[0].ptr not in {s["a"].data_ptr() for s in cfg.scratch._sets.values()}
    assert set(cfg.scratch._sets) == {7, 9}
    monkeypatch.setattr(fastconfig, "_capturing", lambda: False)
    monkeypatch.setattr(staging, "MAX_SCRATCH_BYTES", 1024)  # too big to keep: per call
    gpu.stream = 11
    assert_product(gemm_ladder.matmul(x, b), x, b)
    assert set(cfg.scratch._sets) == {7, 9}


def test_split_k_partials_are_kept_per_stream(gpu):
    x, w = rnd(16, 14336), rnd(4096, 14336, seed=1)  # a long K: split, through the workspace on n128
    res = gemm_ladder.matmul_nt(x, w, step="smallm:n128")
    cfg = fastpath.config_for("nt", x, w, step="smallm:n128")
    assert is_small_m(cfg.step) and cfg.deal.planes > 1 and cfg.scratch.shapes == {
        "ws": ((cfg.deal.planes, 16, 4096), torch.float32)}
    assert last_splitk(gpu).ws == cfg.scratch._sets[gpu.stream]["ws"].data_ptr()
    assert_product(res, x, w.T)


def test_unaligned_rows_above_128_rows_go_to_the_multicast_pairs_or_an_n_major_b(gpu):
    """smallm.ALIGNED_K keeps the family's single CTAs off K-major rows that are not whole
    32-byte sectors above 128 rows (gemm:128x128 is faster there); the multicast pairs take them, each
    CTA fetching half of B (MULTICAST_NICHE, docs/perf-notes.md item 51). With a row-major b
    the alternative is the gemm family's 192-wide tile, which the family beats on such rows
    (item 42)."""
    fam, pairs = smallm.FAMILIES["smallm:n128"], smallm.FAMILIES["smallm:n128m2"]
    assert not fam.accepts(1000, 1000, 1000) and fam.accepts(1000, 1000, 1000, b_mn=True)
    assert pairs.accepts(1000, 1000, 1000) and not pairs.accepts(1024, 1024, 1024)
    assert select.step_for(1000, 1000, 1000).key == "smallm:n128m2"
    assert is_small_m(select.step_for(1000, 1000, 1000, b_mn=True).key)
    x, b = rnd(200, 1000), rnd(1000, 264, seed=5)  # K = 1000: 2000-byte rows; M = 200 > 128
    assert is_small_m(select.step_for(200, 264, 1000, b_mn=True).key)
    assert select.step_for(200, 264, 1000).key == "smallm:n128m2"
    assert_product(gemm_ladder.matmul(x, b), x, b)
    rec = last_splitk(gpu)
    assert rec.defines == {"GL_B_MN": 1} and rec.maps[1].ptr == b.data_ptr()  # in place, N-major
    w = b.T.contiguous()  # the same B K-major: the pairs, B's box half a tile tall
    assert_product(gemm_ladder.matmul_nt(x, w), x, w.T)
    rec = last_splitk(gpu)
    assert rec.cluster == (2, 1, 1) and rec.maps[1].box == (64, 64) and rec.maps[1].ptr == w.data_ptr()


def test_static_b_prepares_the_b_early_build_as_its_own_configuration(gpu):
    x, w = rnd(4, 4096), rnd(1024, 4096, seed=3)
    c0 = gemm_ladder.matmul(x, w.T)
    plain = get_step(gpu.prepared[-1][0])
    c1 = gemm_ladder.matmul(x, w.T, static_b=True)
    assert_product(c1, x, w.T)
    assert torch.equal(c0, c1)
    assert len(gpu.prepared) == 2 and gpu.prepared[-1][0] == plain.key + "~b_early"  # its own build
    cfg = fastpath.config_for("mm", x, w.T, static_b=True)
    assert cfg.step.key == plain.key + "~b_early" and cfg.step.b_early and not plain.b_early
    gemm_ladder.matmul(x, w.T, static_b=True)
    assert len(gpu.prepared) == 2
    lin = gemm_ladder.Linear(4096, 1024, dtype=torch.float16, static_weight=True)
    assert "static_weight=True" in repr(lin) and lin.static_weight
    assert not gemm_ladder.Linear.from_linear(torch.nn.Linear(8, 8)).static_weight


def test_config_cache_keeps_a_hot_entry_near_eviction(gpu, monkeypatch):
    """Hits move an entry to the recent end once the cache is more than half full: a
    configuration called between new ones survives them."""
    monkeypatch.setattr(fastpath, "CONFIGS", fastpath.LRU(4))
    hot_a, hot_w = rnd(16, 32), rnd(32, 8, seed=1)
    gemm_ladder.matmul(hot_a, hot_w)
    hot_key = next(iter(fastpath.CONFIGS.entries))
    for n in range(16, 120, 8):
        gemm_ladder.matmul(rnd(16, 32), rnd(32, n, seed=n))
        gemm_ladder.matmul(hot_a, hot_w)
    assert hot_key in fastpath.CONFIGS.entries and len(fastpath.CONFIGS) == 4
