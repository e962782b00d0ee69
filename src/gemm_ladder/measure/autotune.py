"""Optional autotuning: measure every candidate the selection accepts, once per shape, and
keep the fastest correct one in a cache on disk.

The heuristic (library/select.py) stays the default; autotune is what checks it. Each
candidate runs on the same inputs as the suite's check (poisoned output, fp32 reference),
the correct ones are timed together by `Bench.time_interleaved` (interleaved, L2 flushed,
medians). The cache (`autotune.json` in the JIT cache directory) is keyed by shape, dtype,
GPU name and SM count, and by a fingerprint of the candidates' sources, headers and
defines, so an edited kernel is tuned again.
"""
from __future__ import annotations

import hashlib
import json
import os
import statistics
import tempfile
from pathlib import Path

from ..cuda import jit
from ..families.keys import get_step
from ..library import select

TUNE_REPS = 10
FILE = "autotune.json"


def cache_path() -> Path:
    return jit.cache_dir() / FILE


def fingerprint(keys: list[str]) -> str:
    """Hash of what the candidates' kernels are built from."""
    h = hashlib.sha256()
    for key in sorted(keys):
        st = get_step(key)
        h.update(f"{key}\0{st.source}\0{sorted(st.kernel_defines().items())}\0".encode())
        h.update((jit.KERNEL_DIR / st.source).read_bytes())
        for name, text in jit.headers_for(st.source).items():
            h.update(name.encode() + b"\0" + text.encode())
    return h.hexdigest()[:16]


def entry_key(M: int, N: int, K: int, dtype: str, gpu: str, sms: int, fp: str) -> str:
    return f"{M}x{N}x{K}/{dtype}/{gpu}/{sms}/{fp}"


def load(path: Path | None = None) -> dict:
    path = path or cache_path()
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def store(key: str, entry: dict, path: Path | None = None) -> None:
    """Add one entry; the file is replaced atomically (a reader never sees half of it)."""
    path = path or cache_path()
    data = load(path)
    data[key] = entry
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def best(measured: dict[str, float]) -> str | None:
    """The fastest candidate by median ms; None when none ran correctly."""
    ok = {k: v for k, v in measured.items() if v == v}
    return min(ok, key=ok.get) if ok else None


def tune(bench, choice: select.Choice, a, b, ref, dtype: str, pad) -> dict[str, float]:
    """Median ms of every accepted candidate on (a, b) (NaN: failed the check or errored)."""
    import torch
    from ..library import runner
    from .bench import check_output
    M, N = a.shape[0], b.shape[0]
    plans, out = {}, {}
    for s in choice.scores:
        if not s.accepted:
            continue
        out[s.key] = float("nan")
        try:
            _, Np, Kp = s.shape
            c = torch.full((M, Np), float("nan"), dtype=a.dtype, device=a.device)
            p = runner.plan(get_step(s.key), pad(a, M, Kp), pad(b, Np, Kp), c)
            p()
            p.synchronize()
            if check_output(c[:, :N], ref, dtype)[0]:
                plans[s.key] = p
        except Exception:  # a candidate that cannot run is not a choice
            continue
    if plans:
        times = bench.time_interleaved(list(plans.values()), TUNE_REPS)
        out.update({k: statistics.median(t) for k, t in zip(plans, times)})
    return out


def choose(bench, choice: select.Choice, a, b, ref, dtype: str, pad, *, gpu: str, sms: int,
           use_cache: bool = True) -> tuple[str | None, dict[str, float], bool]:
    """(key, medians per candidate, from_cache)."""
    keys = [s.key for s in choice.scores if s.accepted]
    key = entry_key(choice.M, choice.N, choice.K, dtype, gpu, sms, fingerprint(keys))
    if use_cache:
        hit = load().get(key)
        if hit and hit.get("pick") in keys:
            return hit["pick"], hit.get("ms", {}), True
    measured = tune(bench, choice, a, b, ref, dtype, pad)
    pick = best(measured)
    if pick is not None:
        store(key, {"pick": pick, "ms": measured, "heuristic": choice.pick.key if choice.pick else None})
    return pick, measured, False
