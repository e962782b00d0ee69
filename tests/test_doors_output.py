"""Doors of what a user reads: `explain` fits 100 columns (80 too) in a few dozen lines;
`warmup()` without CUDA says so in one RuntimeError. No GPU."""
import json

import pytest
import torch

import gemm_ladder
from test_doors import run_cli


@pytest.mark.parametrize("args", [("4096", "4096", "4096"), ("127", "8191", "255"), ("16", "4096", "4096"),
                                  ("2048", "11008", "4096", "--b-row-major"), ("8", "8", "8")])
@pytest.mark.parametrize("columns", [80, 100])
def test_explain_fits_the_terminal(tmp_path, args, columns):
    r = run_cli("explain", *args, cwd=tmp_path, columns=columns)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns
    assert len(lines) <= 48  # the "why" column used to wrap a word per line: 460 lines at 80 columns
    assert "…" not in r.stdout  # nothing cut off
    assert "score" in r.stdout and "pick:" in r.stdout and "runs:" in r.stdout
    if args[0] == "127":  # padded alike: said once in the title, not per row
        assert "each runs padded to 127x8192x256" in r.stdout


@pytest.mark.parametrize("args,entry,why", [
    (("64", "4096", "7168", "--fp8", "tensor"), "fp8:64x64pc1", "no tile fills 80 %"),
    (("64", "1024", "8192", "--fp8", "row"), "fp8:64x64sk", "split-K over 16 tiles of 64 x 64"),
    (("4096", "4096", "4096", "--fp8", "block"), "fp8:128x256pb", "fill every wave"),
    (("4096", "4096", "4096", "--fp8", "row", "--bias16"), "fp8:128x128p", "spill on 128 x 256"),
    (("4096", "4096", "4096", "--fp8", "tensor", "--fast-accum"), "fp8:128x256", "summed in the tensor core")])
def test_explain_fp8_names_the_entry_and_why(tmp_path, args, entry, why):
    r = run_cli("explain", *args, cwd=tmp_path, columns=100)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    text = " ".join(r.stdout.split())  # the console wraps at the terminal width
    assert f": {entry} (" in text and why in text
    assert max(len(line) for line in r.stdout.splitlines()) <= 100
    j = run_cli("explain", *args, "--json", cwd=tmp_path)
    assert json.loads(j.stdout)["entry"] == entry


def test_explain_groups_the_kernels_that_do_not_take_the_shape(tmp_path):
    r = run_cli("explain", "4096", "4096", "4096", cwd=tmp_path, columns=100)
    text = r.stdout.replace("\n", " ")
    assert "not candidates:" in text
    assert text.count("is for decode-like shapes and problems under one wave") == 2  # once per reason, not per kernel


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
@pytest.mark.parametrize("device", [None, 0, "cuda:1"])
def test_warmup_without_cuda_is_a_clear_runtime_error(device):
    with pytest.raises(RuntimeError, match="no CUDA GPU is available; gemm_ladder kernels need an sm_90"):
        gemm_ladder.warmup(device)


def test_warmup_on_a_cpu_device_is_refused():
    with pytest.raises(ValueError, match="CUDA device, not cpu"):
        gemm_ladder.warmup("cpu")


def test_first_run_says_what_setup_does_and_later_runs_are_quiet(tmp_path):
    """scripts/run.sh in a copy of the repo's top level, with a stand-in environment: the first
    run shows setup's steps on stderr (torch, the package); a second, up-to-date run adds
    nothing to the CLI's own output."""
    import os
    import subprocess
    from test_doors import ROOT
    (tmp_path / "scripts").mkdir()
    for name in ("run.sh", "setup.sh"):
        (tmp_path / "scripts" / name).write_bytes((ROOT / "scripts" / name).read_bytes())
        (tmp_path / "scripts" / name).chmod(0o755)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    bin_ = tmp_path / "venv" / "bin"
    bin_.mkdir(parents=True)
    torch_mark = tmp_path / "torch-installed"
    (bin_ / "python").write_text(f'#!/bin/sh\ncase "$*" in\n  "-c import torch") [ -f "{torch_mark}" ] || exit 1 ;;\n'
                                 f'  *"pip install -q torch"*) touch "{torch_mark}" ;;\nesac\n')
    (bin_ / "gemm-ladder").write_text('#!/bin/sh\necho "the main job $*"\n')
    for f in bin_.iterdir():
        f.chmod(0o755)
    env = dict(os.environ, GEMM_LADDER_VENV=str(tmp_path / "venv"))

    def run():
        r = subprocess.run(["bash", str(tmp_path / "scripts" / "run.sh"), "report"], env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        assert r.stdout == "the main job report\n"  # setup's own stdout stays out of the job's
        return r.stderr

    first = run()
    assert "gemm-ladder setup: installing torch==2.13.0" in first
    assert "gemm-ladder setup: installing gemm-ladder" in first and "is ready" in first
    assert run() == ""


def test_a_first_compile_says_so_once(capsys, tmp_path, monkeypatch):
    from test_doors import run_main
    monkeypatch.setenv("GEMM_LADDER_CACHE_DIR", str(tmp_path / "jit"))
    code, out, err = run_main(capsys, "report", "--steps", "1,4")
    assert code == 0 and err.strip() == ("gemm-ladder: compiling 2 kernels with NVRTC (first run: they are "
                                         "cached for later runs)")
    code, out, err = run_main(capsys, "report", "--steps", "1,4")
    assert code == 0 and err == ""  # cached: quiet
    assert "compiling 1 kernel " in run_main(capsys, "report", "--steps", "1", "--dtype", "bf16")[2]


def test_explain_says_what_the_call_copies_and_what_it_costs(tmp_path):
    """K = 255: rows of 510 bytes are not 16-byte multiples, so the call copies both operands
    (one plain-copy launch); 4096^3 with a row-major b reads both in place."""
    r = run_cli("explain", "127", "8191", "255", cwd=tmp_path, columns=200)
    out = r.stdout
    assert r.returncode == 0
    assert "the call copies a first (K-major, stride 255 is not a multiple of 8 elements)" in out
    assert "the call copies b first" in out and "copies: 1 launch" in out and "in all before the GEMM" in out
    r = run_cli("explain", "4096", "4096", "4096", "--b-row-major", cwd=tmp_path, columns=200)
    assert "the call reads a and b in place (no copy)" in r.stdout and "copies:" not in r.stdout
