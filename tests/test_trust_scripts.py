"""scripts/fuzz.py and scripts/soak.py end to end on the CPU, with torch standing in for
the library (--device cpu --impl torch): the records they write for the device run, and
the reproducer a failure prints."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args, timeout=300):
    return subprocess.run([sys.executable, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          cwd=ROOT)


def test_fuzz_script_writes_its_record(tmp_path):
    out = tmp_path / "fuzz.json"
    p = _run(ROOT / "scripts" / "fuzz.py", "--device", "cpu", "--impl", "torch", "--cases", 25, "--max-dim", 96,
             "--work-cap", 1 << 17, "--json", out)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    rec = json.loads(out.read_text())
    assert rec["cases_per_dtype"] == {"float16": 25, "bfloat16": 25} and rec["n_failures"] == 0 and rec["complete"]
    assert set(rec["families"]["target"]) <= {"matmul", "matmul@step", "run_step"}
    assert rec["environment"]["device"] == "cpu" and rec["impl"] == "torch"
    assert "fuzz: 50 cases" in p.stdout


def test_fuzz_replay_of_one_line(tmp_path):
    line = ("seed=3 index=5 target=run_step:7:d4 dtype=bfloat16 M=65 N=136 K=72 batch=- a=row-major b=nt "
            "out=contiguous values=exact-int data_seed=99 fam=-")
    p = _run(ROOT / "scripts" / "fuzz.py", "--device", "cpu", "--impl", "torch",
             "--replay", f"GEMM-FUZZ REPRO: python scripts/fuzz.py --replay '{line}'")
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.splitlines()[0] == line and '"basis": "exact"' in p.stdout


def test_soak_script_writes_its_record(tmp_path):
    out = tmp_path / "soak.json"
    # torch's CPU fp16/bf16 matmul (the reference side here) keeps ~0.25 MB of host memory per
    # distinct shape (measured: 2700 random shapes up to 96 grew RSS by 730 MB; fp32 and fp64
    # none), so this smoke run allows for it; the GPU soak keeps the default limit
    p = _run(ROOT / "scripts" / "soak.py", "--device", "cpu", "--impl", "torch", "--minutes", 0.05,
             "--max-dim", 96, "--work-cap", 1 << 17, "--sample-every", 0.5, "--rss-growth-limit-mb", 4096,
             "--json", out)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    rec = json.loads(out.read_text())
    assert rec["ok"] and rec["mismatches"] == 0 and rec["errors"] == 0 and rec["calls"] > 10
    assert set(rec["calls_per_dtype"]) == {"float16", "bfloat16"}
    assert {"baseline", "end", "growth", "samples"} <= set(rec["memory"]) and rec["memory"]["samples"]
    assert rec["memory"]["end"]["host_rss_mb"] > 0


def test_probe_script_configurations_still_compile():
    """scripts/probe_kernels.py builds kernels from its own table of defines; each kernel file
    it names must still take them (the kernels gained required switches after the table was
    written, and the script failed at the compiler until it set them)."""
    import pytest
    pytest.importorskip("cuda.bindings")
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import probe_kernels
    finally:
        sys.path.pop(0)
    from gemm_ladder.cuda import jit
    for key in ("7:d4", "8", "9", "10", "gemm:128x256", "gemm:128x128"):  # one configuration per kernel file
        c = probe_kernels.CONFIGS[key]
        assert jit.compile_kernel(c["src"], c["entry"], c["defines"]).report.spill_bytes == 0, key
