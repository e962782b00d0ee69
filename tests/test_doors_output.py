"""Doors of what a user reads: `explain` fits 100 columns (80 too) in a few dozen lines;
`warmup()` without CUDA says so in one RuntimeError. No GPU."""
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
    assert len(lines) <= 45  # the "why" column used to wrap a word per line: 460 lines at 80 columns
    assert "…" not in r.stdout  # nothing cut off
    assert "score" in r.stdout and "pick:" in r.stdout and "runs:" in r.stdout
    if args[0] == "127":  # padded alike: said once in the title, not per row
        assert "each runs padded to 127x8192x256" in r.stdout


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
