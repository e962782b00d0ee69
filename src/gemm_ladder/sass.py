"""SASS inspection: disassemble a cubin with cuobjdump and count instruction classes.

cuobjdump and nvdisasm come from the `nvidia-cuda-cuobjdump` / `nvidia-cuda-nvdisasm`
wheels (or a CUDA toolkit on PATH); they run on the CPU.
"""
from __future__ import annotations

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


def disassemble(cubin: bytes) -> str:
    cuobjdump = find_tool("cuobjdump")
    nvdisasm = find_tool("nvdisasm")
    if cuobjdump is None or nvdisasm is None:
        raise SassUnavailable("cuobjdump/nvdisasm not found: pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm")
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


_INSTR_RE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def opcodes(sass: str) -> Counter:
    """Full opcodes with modifiers, e.g. 'HGMMA.64x128x16.F32', counted."""
    return Counter(m.group(1) for m in _INSTR_RE.finditer(sass))


def count_class(ops: Counter, cls: str) -> int:
    """Instructions whose opcode is `cls` or starts with `cls.` (e.g. 'SYNCS' matches
    'SYNCS.ARRIVE.TRANS64'); a class with a dot matches that prefix exactly."""
    return sum(n for op, n in ops.items() if op == cls or op.startswith(cls + ".") or ("." in cls and op.startswith(cls)))


def classes(ops: Counter, names) -> dict[str, int]:
    return {c: count_class(ops, c) for c in names}
