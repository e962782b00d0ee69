"""The JIT cache: hit, miss after a header change, corrupt entry rebuilt, concurrent
compiles, cold/warm timing recorded (not asserted as a speed limit beyond sanity)."""
import multiprocessing as mp
import shutil

import pytest

from gemm_ladder.cuda import jit


def _defines(key: str) -> dict:
    """A step's compile-time configuration, as its Step passes it (kernels have no defaults)."""
    from gemm_ladder.families.keys import get_step
    return get_step(key).kernel_defines()


@pytest.fixture
def kdir(tmp_path, monkeypatch):
    monkeypatch.setenv(jit.CACHE_ENV, str(tmp_path / "cache"))
    d = tmp_path / "kernels"
    shutil.copytree(jit.KERNEL_DIR, d)
    return d


def test_hit_after_miss(kdir):
    a = jit.compile_kernel("ladder/step4_tma.cu", "gemm_step4_tma", _defines("4"), kernel_dir=kdir)
    b = jit.compile_kernel("ladder/step4_tma.cu", "gemm_step4_tma", _defines("4"), kernel_dir=kdir)
    assert not a.from_cache and b.from_cache
    assert a.key == b.key and a.cubin == b.cubin
    assert b.report.registers == a.report.registers  # report survives the cache


def test_header_change_misses(kdir):
    a = jit.compile_kernel("ladder/step4_tma.cu", "gemm_step4_tma", _defines("4"), kernel_dir=kdir)
    hdr = kdir / "common" / "gl_tma.cuh"  # included by step 4, two levels of includes deep is covered too
    hdr.write_text(hdr.read_text() + "\n// a change\n")
    b = jit.compile_kernel("ladder/step4_tma.cu", "gemm_step4_tma", _defines("4"), kernel_dir=kdir)
    assert a.key != b.key and not b.from_cache
    deep = kdir / "common" / "gl_roles.cuh"  # included only through gl_pipeline.cuh -> gl_mbarrier.cuh
    deep.write_text(deep.read_text() + "\n// deeper change\n")
    c = jit.compile_kernel("ladder/step4_tma.cu", "gemm_step4_tma", _defines("4"), kernel_dir=kdir)
    assert c.key != b.key and not c.from_cache


def test_options_change_misses(kdir):
    a = jit.compile_kernel("ladder/step5_pipeline.cu", "gemm_step5_pipeline", _defines("5:d4"), kernel_dir=kdir)
    b = jit.compile_kernel("ladder/step5_pipeline.cu", "gemm_step5_pipeline", _defines("5:d3"), kernel_dir=kdir)
    assert a.key != b.key and not b.from_cache


@pytest.mark.parametrize("damage", ["truncate", "garbage-meta", "delete-cubin"])
def test_corrupt_entry_rebuilt(kdir, damage):
    a = jit.compile_kernel("ladder/step4_tma.cu", "gemm_step4_tma", _defines("4"), kernel_dir=kdir)
    cubin, meta = jit.cache_dir() / f"{a.key}.cubin", jit.cache_dir() / f"{a.key}.json"
    if damage == "truncate":
        cubin.write_bytes(cubin.read_bytes()[:100])
    elif damage == "garbage-meta":
        meta.write_text("{not json")
    else:
        cubin.unlink()
    b = jit.compile_kernel("ladder/step4_tma.cu", "gemm_step4_tma", _defines("4"), kernel_dir=kdir)
    assert not b.from_cache and b.cubin == a.cubin
    c = jit.compile_kernel("ladder/step4_tma.cu", "gemm_step4_tma", _defines("4"), kernel_dir=kdir)
    assert c.from_cache and c.cubin == a.cubin


def _compile_in_child(args):
    kernel_dir, cache = args
    import os
    os.environ[jit.CACHE_ENV] = cache
    from pathlib import Path
    k = jit.compile_kernel("ladder/step7_warp_specialized.cu", "gemm_step7_warp_specialized", _defines("7"),
                           kernel_dir=Path(kernel_dir))
    return k.key, len(k.cubin)


def test_concurrent_compiles(kdir, tmp_path):
    cache = str(tmp_path / "shared-cache")
    ctx = mp.get_context("spawn")
    with ctx.Pool(4) as pool:
        res = pool.map(_compile_in_child, [(str(kdir), cache)] * 4)
    assert len({r[0] for r in res}) == 1 and all(r[1] > 0 for r in res)
    import os
    entries = [f for f in os.listdir(cache) if not f.endswith(".tmp")]
    assert sorted(f.rsplit(".", 1)[1] for f in entries) == ["cubin", "json"]
    assert not [f for f in os.listdir(cache) if ".tmp" in f], "temporary files left behind"


def test_cache_dir_env(kdir, tmp_path):
    k = jit.compile_kernel("ladder/step1_naive.cu", "gemm_step1_naive", kernel_dir=kdir)
    assert (tmp_path / "cache" / f"{k.key}.cubin").is_file()
