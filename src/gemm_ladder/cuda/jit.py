"""Compile the package's CUDA sources to sm_90a cubins with NVRTC, and cache them on disk.

compile -> cache -> (driver.py) load -> launch. No nvcc is needed: NVRTC comes from the
`nvidia-cuda-nvrtc` wheel through `cuda-bindings`.

The cache key hashes the kernel source, every header it includes (transitively), the
compile options and the NVRTC version. Entries are written atomically (temp file +
rename), so concurrent compiles of one kernel both succeed; each entry records the cubin's
SHA-256, so a corrupt or truncated entry is detected and rebuilt. A cache directory that
cannot be created or written (read-only, full) costs one warning: kernels then compile in
memory and are kept for the rest of the process.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

KERNEL_DIR = Path(__file__).resolve().parents[1] / "kernels"
CACHE_ENV = "GEMM_LADDER_CACHE_DIR"
DEFAULT_ARCH = "sm_90a"
CACHE_FORMAT = 1  # bump when the entry layout changes

_INCLUDE_RE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
# ptxas warnings that mean the kernel will not run as written: wgmma serialized
# (C7510-C7515 and relatives) or setmaxnreg ignored (C7508).
_FATAL_WARNING_RE = re.compile(r"\b(C75\d\d)\b")
# ... and the serialization itself where ptxas reports it as an "info" line (C7510-C7515, or any
# C75xx that says "serialized"); other info notes (e.g. C7519, a warpgroup.arrive it injected)
# leave the MMAs asynchronous
_FATAL_INFO_RE = re.compile(r"\b(C751[0-5])\b")


def _reported(line: str) -> bool:
    """A ptxas line the report keeps: a warning, or a serialized wgmma given as an "info" line
    (C7510-C7515, or a C7519 that says "serialized" rather than an injected arrive)."""
    low = line.lower()
    return "warning" in low or bool(_FATAL_INFO_RE.search(line)) or ("c75" in low and "serialized" in low)


class KernelBuildError(RuntimeError):
    """NVRTC failed, or ptxas reported spills or a fatal performance warning."""


@dataclass
class PtxasReport:
    """What ptxas said about one kernel entry."""

    kernel: str = ""
    registers: int = 0
    shared_bytes: int = 0  # static shared memory
    stack_frame_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    barriers: int = 0
    warnings: list[str] = field(default_factory=list)

    @property
    def spill_bytes(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes


@dataclass
class CompiledKernel:
    name: str  # entry point
    source: str  # file name under kernels/
    options: list[str]
    key: str
    cubin: bytes
    log: str
    report: PtxasReport
    from_cache: bool
    seconds: float  # compile time, or cache load time when from_cache


def _cache_location() -> Path:
    d = os.environ.get(CACHE_ENV)
    return Path(d) if d else Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "gemm_ladder"


def cache_dir() -> Path:
    path = _cache_location()
    path.mkdir(parents=True, exist_ok=True)
    return path


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as e:  # pragma: no cover - depends on the install
        raise KernelBuildError(
            "cuda-bindings is not installed: pip install 'cuda-bindings>=13' 'nvidia-cuda-nvrtc>=13'"
        ) from e
    return nvrtc


def _check_nvrtc(result, what: str):
    nvrtc = _nvrtc()
    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise KernelBuildError(f"{what} failed: {nvrtc.nvrtcGetErrorString(err)[1].decode()}")
    return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)


def nvrtc_version() -> tuple[int, int]:
    major, minor = _check_nvrtc(_nvrtc().nvrtcVersion(), "nvrtcVersion")
    return int(major), int(minor)


def include_dirs(source: str, kernel_dir: Path = KERNEL_DIR) -> list[Path]:
    """Where a kernel's includes are looked up, by bare name: its own folder, then common/, then
    the other kernel folders (a family may use another's pieces: the small-M kernel reads the
    production GEMM's mainloop). Header names are unique across the folders (a CPU test)."""
    own = (kernel_dir / source).parent
    rest = sorted(d for d in kernel_dir.iterdir() if d.is_dir() and d != own and d.name != "common")
    return [own, kernel_dir / "common"] + rest


def headers_for(source: str, kernel_dir: Path = KERNEL_DIR) -> dict[str, str]:
    """All headers `source` (a path under kernels/, e.g. 'ladder/step7_warp_specialized.cu')
    includes, transitively: {name as included: text}."""
    dirs = include_dirs(source, kernel_dir)
    seen: dict[str, str] = {}
    todo = _INCLUDE_RE.findall((kernel_dir / source).read_text())
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = next((d / name for d in dirs if (d / name).is_file()), None)
        if path is None:
            raise KernelBuildError(f"{source}: included header {name!r} not found in {', '.join(map(str, dirs))}")
        seen[name] = path.read_text()
        todo.extend(_INCLUDE_RE.findall(seen[name]))
    return dict(sorted(seen.items()))


def build_options(defines: dict[str, object] | None = None, arch: str = DEFAULT_ARCH,
                  extra: tuple[str, ...] = ()) -> list[str]:
    opts = [f"--gpu-architecture={arch}", "-std=c++17", "--ptxas-options=-v",
            "--use_fast_math", "-default-device"]
    for k, v in sorted((defines or {}).items()):
        opts.append(f"-D{k}={int(v) if isinstance(v, bool) else v}")
    opts.extend(extra)
    return opts


def cache_key(source: str, options: list[str], kernel_dir: Path = KERNEL_DIR) -> str:
    h = hashlib.sha256()
    h.update(f"gemm-ladder-jit/{CACHE_FORMAT}\0".encode())
    h.update(f"nvrtc/{nvrtc_version()}\0".encode())
    h.update(source.encode() + b"\0" + (kernel_dir / source).read_bytes() + b"\0")
    for name, text in headers_for(source, kernel_dir).items():
        h.update(name.encode() + b"\0" + text.encode() + b"\0")
    for o in options:
        h.update(o.encode() + b"\0")
    return h.hexdigest()[:32]


_ENTRY_RE = re.compile(r"Compiling entry function '([^']+)'")


def ptxas_sections(log: str) -> dict[str, str]:
    """The log cut per entry function (a file may hold several kernels); "" keys the lines
    before the first entry (e.g. gmem). A log naming no entry is all under ""."""
    out: dict[str, list[str]] = {"": []}
    name = ""
    for line in log.splitlines():
        if m := _ENTRY_RE.search(line):
            name = m.group(1)
            out.setdefault(name, [])
        out[name].append(line)
    return {k: "\n".join(v) for k, v in out.items()}


def parse_ptxas_log(log: str, kernel: str) -> PtxasReport:
    """What ptxas said about `kernel`: when the log names entry functions, its own section,
    the lines before the first entry, and warnings elsewhere that name it."""
    sections = ptxas_sections(log)
    if kernel in sections:
        named = [ln for k, text in sections.items() if k not in ("", kernel)
                 for ln in text.splitlines() if _reported(ln) and f"'{kernel}'" in ln]
        log = "\n".join([sections[""], sections[kernel], *named])
    r = PtxasReport(kernel=kernel)
    for line in log.splitlines():
        if m := re.search(r"Used (\d+) registers", line):
            r.registers = int(m.group(1))
        if m := re.search(r"used (\d+) barriers", line):
            r.barriers = int(m.group(1))
        if m := re.search(r"(\d+) bytes smem", line):
            r.shared_bytes = int(m.group(1))
        if m := re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", line):
            r.stack_frame_bytes, r.spill_store_bytes, r.spill_load_bytes = map(int, m.groups())
        if _reported(line):
            r.warnings.append(line.strip())
    return r


def _fatal_problems(report: PtxasReport) -> list[str]:
    problems = []
    if report.spill_bytes:
        problems.append(f"{report.spill_bytes} bytes of register spill (stores {report.spill_store_bytes},"
                        f" loads {report.spill_load_bytes})")
    for w in report.warnings:
        if _FATAL_WARNING_RE.search(w):
            problems.append(w)
    return problems


def _nvrtc_compile(source: str, name: str, options: list[str], kernel_dir: Path) -> tuple[bytes, str]:
    nvrtc = _nvrtc()
    headers = headers_for(source, kernel_dir)
    text = (kernel_dir / source).read_text()
    prog = _check_nvrtc(
        nvrtc.nvrtcCreateProgram(text.encode(), source.encode(), len(headers),
                                 [t.encode() for t in headers.values()],
                                 [n.encode() for n in headers.keys()]),
        "nvrtcCreateProgram")
    try:
        opts = [o.encode() for o in options]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        size = _check_nvrtc(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        buf = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = buf.rstrip(b"\x00").decode(errors="replace")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise KernelBuildError(f"NVRTC could not compile {source} ({name}):\n{log}")
        size = _check_nvrtc(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        cubin = b" " * size
        _check_nvrtc(nvrtc.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        return bytes(cubin), log
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def atomic_write(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


_MEMORY: dict[str, tuple[bytes, dict]] = {}  # entries the disk cache could not take
_WARNED: set[str] = set()  # cache directories already warned about


def _warn_unwritable(where: str, err: OSError) -> None:
    if where in _WARNED:
        return
    _WARNED.add(where)
    warnings.warn(f"gemm_ladder: cannot write the JIT cache at {where} ({err}); compiling in memory for this "
                  f"process (set {CACHE_ENV} to a writable directory)", RuntimeWarning, stacklevel=4)


def _load_entry(key: str) -> tuple[bytes, dict] | None:
    """A cached (cubin, metadata), or None if absent, unreadable or corrupt."""
    try:
        d = cache_dir()
        meta = json.loads((d / f"{key}.json").read_text())
        cubin = (d / f"{key}.cubin").read_bytes()
    except (OSError, ValueError):
        return _MEMORY.get(key)
    if not isinstance(meta, dict) or meta.get("format") != CACHE_FORMAT or not isinstance(meta.get("log"), str) \
            or hashlib.sha256(cubin).hexdigest() != meta.get("cubin_sha256"):
        return _MEMORY.get(key)
    return cubin, meta


def _store_entry(key: str, cubin: bytes, meta: dict) -> None:
    """Write an entry (cubin first, metadata last: the metadata names the checksum of a
    complete cubin); on a read-only or full cache keep it in memory, warning once."""
    try:
        d = cache_dir()
        atomic_write(d / f"{key}.cubin", cubin)
        atomic_write(d / f"{key}.json", json.dumps(meta, indent=1).encode())
    except OSError as e:
        _warn_unwritable(str(_cache_location()), e)
        _MEMORY[key] = (cubin, meta)


def compile_kernel(source: str, name: str, defines: dict[str, object] | None = None, *,
                   arch: str = DEFAULT_ARCH, extra_options: tuple[str, ...] = (),
                   use_cache: bool = True, strict: bool = True,
                   kernel_dir: Path = KERNEL_DIR) -> CompiledKernel:
    """Compile kernels/<source> (entry point `name`) to a cubin, through the cache.

    strict: raise KernelBuildError on any spill or C75xx warning (wgmma serialization,
    setmaxnreg ignored). The check runs on cache hits too.
    """
    options = build_options(defines, arch, extra_options)
    key = cache_key(source, options, kernel_dir)
    t0 = time.perf_counter()
    entry = _load_entry(key) if use_cache else None
    if entry is not None:
        cubin, meta = entry
        log, from_cache = meta["log"], True
    else:
        cubin, log = _nvrtc_compile(source, name, options, kernel_dir)
        from_cache = False
        if use_cache:
            meta = {"format": CACHE_FORMAT, "source": source, "name": name, "options": options,
                    "log": log, "cubin_sha256": hashlib.sha256(cubin).hexdigest(),
                    "nvrtc": list(nvrtc_version())}
            _store_entry(key, cubin, meta)
    seconds = time.perf_counter() - t0
    report = parse_ptxas_log(log, name)
    result = CompiledKernel(name, source, options, key, cubin, log, report, from_cache, seconds)
    # Strict covers every entry of the file, not only the one named.
    others = [parse_ptxas_log(log, e) for e in ptxas_sections(log) if e and e != name]
    problems = [f"{r.kernel}: {p}" if r is not report else p
                for r in (report, *others) for p in _fatal_problems(r)]
    if strict and problems:
        raise KernelBuildError(f"{source} ({name}) built, but ptxas reports:\n  " + "\n  ".join(problems)
                               + f"\nfull log:\n{log}")
    return result


def report_dict(k: CompiledKernel) -> dict:
    d = asdict(k.report)
    d.update(source=k.source, key=k.key, from_cache=k.from_cache, seconds=round(k.seconds, 4))
    return d
