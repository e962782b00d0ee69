"""SASS inspection: disassemble a cubin with cuobjdump and count instruction classes.

cuobjdump and nvdisasm come from the `nvidia-cuda-cuobjdump` / `nvidia-cuda-nvdisasm`
wheels (or a CUDA toolkit on PATH); they run on the CPU. Disassembly takes ~0.6 s per
kernel, so its text is cached next to the JIT cache (`<cache>/sass/`), keyed by the
cubin's hash and the tool's identity.
"""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path


class SassUnavailable(RuntimeError):
    pass


def _candidate_dirs() -> list[Path]:
    dirs = []
    for p in map(Path, sys.path):
        for sub in ("nvidia/cu13/bin", "nvidia/cuda_cuobjdump/bin", "nvidia/cuda_nvdisasm/bin"):
            if (p / sub).is_dir():
                dirs.append(p / sub)
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            dirs.append(Path(os.environ[env]) / "bin")
    dirs.append(Path("/usr/local/cuda/bin"))
    return dirs


def find_tool(name: str) -> str | None:
    for d in _candidate_dirs():
        if (d / name).is_file() and os.access(d / name, os.X_OK):
            return str(d / name)
    return shutil.which(name)


def disassemble(cubin: bytes, use_cache: bool = True) -> str:
    cuobjdump = find_tool("cuobjdump")
    nvdisasm = find_tool("nvdisasm")
    if cuobjdump is None or nvdisasm is None:
        raise SassUnavailable("cuobjdump/nvdisasm not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm")
    path = _cache_path(cubin, cuobjdump, nvdisasm) if use_cache else None
    text = _read_cached(path) if path else None
    if text is None:
        text = _run_cuobjdump(cubin, cuobjdump, nvdisasm)
        if path:
            _write_cached(path, text)
    return text


_CACHE_HEADER = "// gemm-ladder sass cache sha256="


def _cache_path(cubin: bytes, *tools: str) -> Path | None:
    from ..cuda import jit
    h = hashlib.sha256(cubin)
    for tool in tools:  # another tool version may print other text
        st = os.stat(tool)
        h.update(f"{tool}:{st.st_size}:{st.st_mtime_ns}".encode())
    try:
        d = jit.cache_dir() / "sass"
        d.mkdir(exist_ok=True)
    except OSError:  # no writable cache: disassemble every time
        return None
    return d / f"{h.hexdigest()}.sass"


def _read_cached(path: Path) -> str | None:
    """The cached text, or None when absent or not intact (then it is rebuilt)."""
    try:
        head, _, text = path.read_text().partition("\n")
    except (OSError, UnicodeDecodeError):
        return None
    if head != _CACHE_HEADER + hashlib.sha256(text.encode()).hexdigest():
        return None
    return text


def _write_cached(path: Path, text: str) -> None:
    from ..cuda import jit
    data = f"{_CACHE_HEADER}{hashlib.sha256(text.encode()).hexdigest()}\n{text}"
    try:
        jit.atomic_write(path, data.encode())
    except OSError:  # a read-only or full cache only costs speed
        pass


def _run_cuobjdump(cubin: bytes, cuobjdump: str, nvdisasm: str) -> str:
    env = dict(os.environ)
    env["PATH"] = os.path.dirname(nvdisasm) + os.pathsep + env.get("PATH", "")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "k.cubin")
        with open(path, "wb") as f:
            f.write(cubin)
        res = subprocess.run([cuobjdump, "--dump-sass", path], capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise SassUnavailable(f"cuobjdump failed: {res.stderr.strip()}")
    return res.stdout


_INSTR_RE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)")


def opcodes(sass: str) -> Counter:
    """Full opcodes with modifiers, e.g. 'HGMMA.64x128x16.F32', counted."""
    return Counter(m.group(1) for m in _INSTR_RE.finditer(sass))


def count_class(ops: Counter, cls: str) -> int:
    """Instructions whose opcode is `cls` or starts with `cls.` (e.g. 'SYNCS' matches
    'SYNCS.ARRIVE.TRANS64'); a class with a dot matches that prefix exactly."""
    return sum(n for op, n in ops.items() if op == cls or op.startswith(cls + ".") or ("." in cls and op.startswith(cls)))


def classes(ops: Counter, names) -> dict[str, int]:
    return {c: count_class(ops, c) for c in names}


_LINE_RE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")


def instructions(sass: str) -> list[tuple[int, str]]:
    """(address, instruction text) in program order."""
    return [(int(m.group(1), 16), m.group(2)) for m in _LINE_RE.finditer(sass)]


def mma_loop_body(sass: str) -> list[str] | None:
    """The instructions of the innermost loop (a backward branch) that issues HGMMA or QGMMA
    (on fp8), in program order; None if no loop issues them. In a module of several functions
    (addresses restart in each), the first function's that has one."""
    functions = re.split(r"\n\s*Function\s*:", sass)
    if len(functions) > 2:
        return next((b for b in map(mma_loop_body, functions) if b is not None), None)
    ins = instructions(sass)
    loops = []
    for addr, text in ins:
        m = re.search(r"\bBRA\s+(?:`\()?(?:\.L_x_\d+\)?)?(0x[0-9a-f]+)", text)
        if m and "BRA" in text.split()[0 if not text.startswith("@") else 1]:
            target = int(m.group(1), 16)
            if target < addr:
                loops.append((target, addr))
    body = lambda lo, hi: [t for a, t in ins if lo <= a <= hi]  # noqa: E731
    mma_loops = [(lo, hi) for lo, hi in loops if any(t.startswith(("HGMMA", "QGMMA")) for t in body(lo, hi))]
    if not mma_loops:
        return None
    return body(*min(mma_loops, key=lambda iv: iv[1] - iv[0]))


def mma_loop_full_waits(sass: str) -> int | None:
    """How many `WARPGROUP.DEPBAR.LE gsb0, 0x0` (wait for ALL wgmma groups) sit inside the
    innermost loop that issues HGMMA (or QGMMA, on fp8), or None if no loop issues them.

    A pipelined k-loop keeps one wgmma group in flight (wait_group 1); a full wait inside
    it means ptxas serialized the MMAs (e.g. when accumulators are read or written on a
    path through the loop) — without any warning. A module of several functions (addresses
    restart in each) is read function by function; the worst counts."""
    functions = re.split(r"\n\s*Function\s*:", sass)
    if len(functions) > 2:
        counts = [c for c in (mma_loop_full_waits(f) for f in functions) if c is not None]
        return max(counts) if counts else None
    body = mma_loop_body(sass)
    if body is None:
        return None
    return sum(1 for t in body if t.startswith("WARPGROUP.DEPBAR") and t.rstrip().endswith("0x0"))


def function_text(sass: str, name: str) -> str | None:
    """The SASS of function `name` of a module (cuobjdump lists each after 'Function :'), or None."""
    for part in re.split(r"\n\s*Function\s*:\s*", sass)[1:]:
        if part.split(None, 1)[0] == name:
            return part
    return None


def loads_before_first_use(sass: str, load: str = "LDG", use: str = "FADD") -> int:
    """How many `load` instructions come before the first `use` one, in program order (a
    predicated instruction counts): the loads a thread has in flight before it first waits."""
    n = 0
    for _, text in instructions(sass):
        op = text.split()[1] if text.startswith("@") else text.split()[0]
        if op == use or op.startswith(use + "."):
            return n
        n += op == load or op.startswith(load + ".")
    return n
