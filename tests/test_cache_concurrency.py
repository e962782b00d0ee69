"""The JIT cache under pressure (CPU only): two processes compiling one kernel into one
cache at the same moment, damaged entries of every kind rebuilt, and a cache directory
that cannot be written (missing parent, read-only, full) falling back to an in-memory
compile with exactly one warning."""
import errno
import hashlib
import json
import multiprocessing as mp
import os
import shutil
import warnings
from pathlib import Path

import pytest

from gemm_ladder.cuda import jit

SOURCE, ENTRY = "ladder/step1_naive.cu", "gemm_step1_naive"
DEFINES: dict = {}  # step 1 has no tile: nothing to configure


def _defines(key: str) -> dict:
    """A step's compile-time configuration, as its Step passes it (kernels have no defaults)."""
    from gemm_ladder.families.keys import get_step
    return get_step(key).kernel_defines()


@pytest.fixture
def kdir(tmp_path, monkeypatch):
    monkeypatch.setenv(jit.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(jit, "_MEMORY", {}, raising=False)
    monkeypatch.setattr(jit, "_WARNED", set(), raising=False)
    d = tmp_path / "kernels"
    shutil.copytree(jit.KERNEL_DIR, d)
    return d


def _entries(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir())


def _valid_entry(cache: Path, key: str) -> bool:
    meta = json.loads((cache / f"{key}.json").read_text())
    cubin = (cache / f"{key}.cubin").read_bytes()
    return meta["cubin_sha256"] == hashlib.sha256(cubin).hexdigest() and len(cubin) > 0


# ---- two processes, one kernel, one cache, the same moment ---------------------------------
def _compile_after_barrier(kernel_dir, cache, barrier, results):
    os.environ[jit.CACHE_ENV] = cache
    barrier.wait()  # both processes start compiling together
    try:
        k = jit.compile_kernel("ladder/step5_pipeline.cu", "gemm_step5_pipeline", _defines("5:d3"),
                               kernel_dir=Path(kernel_dir))
        results.put(("ok", k.key, hashlib.sha256(k.cubin).hexdigest(), k.from_cache))
    except BaseException as e:  # reported to the parent, which fails the test with it
        results.put(("error", repr(e), "", False))


def test_two_processes_compile_the_same_kernel_at_once(kdir, tmp_path):
    cache = tmp_path / "shared-cache"
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_compile_after_barrier, args=(str(kdir), str(cache), barrier, results))
             for _ in range(2)]
    for p in procs:
        p.start()
    got = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert all(r[0] == "ok" for r in got), got
    assert all(p.exitcode == 0 for p in procs)
    keys, shas = {r[1] for r in got}, {r[2] for r in got}
    assert len(keys) == 1 and len(shas) == 1, got
    key = keys.pop()
    assert _entries(cache) == [f"{key}.cubin", f"{key}.json"], "exactly one entry, no temporary files"
    assert _valid_entry(cache, key)
    os.environ[jit.CACHE_ENV] = str(cache)
    again = jit.compile_kernel("ladder/step5_pipeline.cu", "gemm_step5_pipeline", _defines("5:d3"), kernel_dir=kdir)
    assert again.from_cache and hashlib.sha256(again.cubin).hexdigest() in shas


# ---- damaged entries ------------------------------------------------------------------------
DAMAGE = {
    "meta-is-a-list": lambda cubin, meta: meta.write_text("[]"),
    "meta-is-null": lambda cubin, meta: meta.write_text("null"),
    "meta-without-log": lambda cubin, meta: meta.write_text(
        json.dumps({k: v for k, v in json.loads(meta.read_text()).items() if k != "log"})),
    "meta-truncated": lambda cubin, meta: meta.write_bytes(meta.read_bytes()[:len(meta.read_bytes()) // 2]),
    "meta-empty": lambda cubin, meta: meta.write_bytes(b""),
    "cubin-empty": lambda cubin, meta: cubin.write_bytes(b""),
    "cubin-same-length-garbage": lambda cubin, meta: cubin.write_bytes(bytes(len(cubin.read_bytes()))),
    "cubin-one-bit-flipped": lambda cubin, meta: cubin.write_bytes(
        (lambda b: b[:200] + bytes([b[200] ^ 1]) + b[201:])(cubin.read_bytes())),
    "wrong-format-version": lambda cubin, meta: meta.write_text(
        json.dumps({**json.loads(meta.read_text()), "format": -1})),
}


@pytest.mark.parametrize("damage", sorted(DAMAGE))
def test_damaged_entry_is_rebuilt(kdir, damage):
    a = jit.compile_kernel(SOURCE, ENTRY, DEFINES, kernel_dir=kdir)
    cache = jit.cache_dir()
    DAMAGE[damage](cache / f"{a.key}.cubin", cache / f"{a.key}.json")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a damaged entry is rebuilt silently, not warned about
        b = jit.compile_kernel(SOURCE, ENTRY, DEFINES, kernel_dir=kdir)
    assert not b.from_cache and b.cubin == a.cubin and b.report.registers == a.report.registers
    assert _valid_entry(cache, a.key)
    c = jit.compile_kernel(SOURCE, ENTRY, DEFINES, kernel_dir=kdir)
    assert c.from_cache and c.cubin == a.cubin


# ---- a cache that cannot be written ------------------------------------------------------------
def _compile_twice_collecting_warnings(kdir):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = jit.compile_kernel(SOURCE, ENTRY, DEFINES, kernel_dir=kdir)
        other = jit.compile_kernel("ladder/step4_tma.cu", "gemm_step4_tma", _defines("4"), kernel_dir=kdir)
        again = jit.compile_kernel(SOURCE, ENTRY, DEFINES, kernel_dir=kdir)
    ours = [w for w in caught if "JIT cache" in str(w.message)]
    return first, other, again, ours


def test_cache_path_blocked_by_a_file_falls_back_with_one_warning(kdir, tmp_path, monkeypatch):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache directory should be")
    monkeypatch.setenv(jit.CACHE_ENV, str(blocker / "cache"))
    first, other, again, ours = _compile_twice_collecting_warnings(kdir)
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert issubclass(ours[0].category, RuntimeWarning) and jit.CACHE_ENV in str(ours[0].message)
    assert not first.from_cache and len(first.cubin) > 0 and len(other.cubin) > 0
    assert again.from_cache and again.cubin == first.cubin  # kept in memory: not compiled twice
    assert blocker.read_text().startswith("a file")


@pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() == 0, reason="root ignores directory permissions")
def test_read_only_cache_dir_falls_back_with_one_warning(kdir, tmp_path, monkeypatch):
    ro = tmp_path / "ro-cache"
    ro.mkdir()
    ro.chmod(0o555)
    monkeypatch.setenv(jit.CACHE_ENV, str(ro))
    try:
        first, other, again, ours = _compile_twice_collecting_warnings(kdir)
    finally:
        ro.chmod(0o755)
    assert len(ours) == 1 and not first.from_cache and again.from_cache
    assert _entries(ro) == []


def test_full_disk_falls_back_with_one_warning_and_leaves_no_temporary_file(kdir, monkeypatch):
    def no_space(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    jit.cache_dir()  # the directory exists; writing into it fails like a full disk
    monkeypatch.setattr(jit.os, "fsync", no_space)
    first, other, again, ours = _compile_twice_collecting_warnings(kdir)
    assert len(ours) == 1 and "No space left" in str(ours[0].message)
    assert not first.from_cache and again.from_cache and again.cubin == first.cubin
    assert _entries(jit.cache_dir()) == [], "a failed write leaves nothing behind"


def test_unwritable_cache_still_serves_existing_entries_without_warning(kdir, monkeypatch):
    a = jit.compile_kernel(SOURCE, ENTRY, DEFINES, kernel_dir=kdir)

    def no_space(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(jit.os, "fsync", no_space)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = jit.compile_kernel(SOURCE, ENTRY, DEFINES, kernel_dir=kdir)
    assert b.from_cache and b.cubin == a.cubin
