"""CLI behaviour and input validation that need no GPU."""
import subprocess
import sys

import pytest
import torch

import gemm_ladder
from gemm_ladder.cli import commands as cli
from gemm_ladder.families import common, keys
from gemm_ladder.library import runner

NO_GPU = not torch.cuda.is_available()


def run_cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "gemm_ladder", *args], capture_output=True, text=True,
                          cwd=cwd, timeout=600)


def test_help_lists_commands():
    r = run_cli("--help")
    assert r.returncode == 0
    for c in ("bench", "report", "check", "deadlock", "trace"):
        assert c in r.stdout


def test_report_command_json(tmp_path):
    out = tmp_path / "report.json"
    r = run_cli("report", "--steps", "1,4,7", "--json", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    import json
    rows = json.loads(out.read_text())
    assert [row["step"] for row in rows] == ["1", "4", "7"]
    assert all(row["ok"] and row["spill_bytes"] == 0 for row in rows)
    assert "compile report" in r.stdout


@pytest.mark.skipif(not NO_GPU, reason="checks the no-GPU fallback")
def test_bench_without_gpu_is_a_clear_error():
    r = run_cli("bench")
    assert r.returncode == 2
    assert "needs a Hopper GPU" in r.stderr


@pytest.mark.skipif(not NO_GPU, reason="checks the no-GPU fallback")
def test_default_main_job_without_gpu(tmp_path):
    r = run_cli("--out-dir", str(tmp_path / "out"))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "No Hopper GPU" in r.stdout
    assert "compile report" in r.stdout


def test_parse_sizes_and_steps():
    assert cli.parse_sizes("4096") == [(4096, 4096, 4096)]
    assert cli.parse_sizes("1x2x3,8") == [(1, 2, 3), (8, 8, 8)]
    with pytest.raises(Exception):
        cli.parse_sizes("1x2")
    assert [s.key for s in keys.parse_steps("1-3,7:d4")] == ["1", "2", "3", "7:d4"]
    with pytest.raises(KeyError, match="unknown step"):
        keys.get_step("12")


# ---- validation (runs on CPU tensors: the checks come before any GPU is touched) ---------

def t(*shape, dtype=torch.float16):
    return torch.randn(*shape).to(dtype)


def test_step_validation_messages():
    st = keys.get_step("4")
    with pytest.raises(TypeError, match="float16 or torch.bfloat16"):
        runner.check_operands(t(8, 8, dtype=torch.float32), t(8, 8, dtype=torch.float32), step=st)
    with pytest.raises(TypeError, match="same dtype"):
        runner.check_operands(t(8, 8), t(8, 8, dtype=torch.bfloat16), step=st)
    with pytest.raises(ValueError, match="2-D"):
        runner.check_operands(t(2, 8, 8), t(8, 8), step=st)
    with pytest.raises(ValueError, match="inner dimensions differ"):
        runner.check_operands(t(8, 16), t(8, 24), step=st)
    with pytest.raises(common.ShapeError, match="K=12 must be a multiple of 8"):
        runner.check_operands(t(8, 12), t(8, 12), step=st)
    with pytest.raises(common.ShapeError, match="M=100 must be a multiple of 128"):
        runner.check_operands(t(100, 64), t(128, 64), step=keys.get_step("2"))
    with pytest.raises(ValueError, match="contiguous"):
        runner.check_operands(t(16, 32)[:, ::2], t(16, 16), step=st)
    flat = t(16 * 16 + 1)
    with pytest.raises(ValueError, match="16-byte aligned"):
        runner.check_operands(flat[1:].view(16, 16), t(16, 16), step=st)
    with pytest.raises(ValueError, match="CUDA tensors"):
        runner.check_operands(t(16, 16), t(16, 16), step=st)
    with pytest.raises(ValueError, match="out has shape"):
        runner.check_operands(t(16, 16), t(8, 16), t(16, 16), step=st)
    with pytest.raises(TypeError, match="torch.Tensor"):
        runner.check_operands([[1.0]], t(8, 8), step=st)


def test_step1_accepts_any_shape_tma_steps_need_alignment():
    assert keys.get_step("1").accepts(1, 1, 1)
    assert keys.get_step("7").accepts(1, 8, 8)
    assert not keys.get_step("7").accepts(8, 7, 8)
    assert not keys.get_step("3").accepts(128, 128, 32)


def test_matmul_input_errors_on_cpu():
    with pytest.raises(TypeError, match="not supported"):
        gemm_ladder.matmul(t(4, 4, dtype=torch.float32), t(4, 4, dtype=torch.float32))
    with pytest.raises(TypeError, match="same dtype"):
        gemm_ladder.matmul(t(4, 4), t(4, 4, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="CUDA tensors"):
        gemm_ladder.matmul(t(4, 4), t(4, 4))
    with pytest.raises(TypeError, match="torch.Tensor"):
        gemm_ladder.matmul(None, t(4, 4))


@pytest.mark.skipif(not NO_GPU, reason="checks the no-GPU error")
def test_no_gpu_error_is_clear():
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        runner.check_device(torch.device("cpu"))


def test_role_and_barrier_names_parsed_from_header():
    assert runner.role_names()[3] == "consumer"
    assert runner.barrier_names()[2] == "tma2mma"
    from gemm_ladder.choreography import trace
    assert trace.EVENTS["EV_WAIT_BEGIN"] == 1


def test_stuck_record_decoding():
    import struct
    raw = struct.pack("<IIIIIIIIQ", 0x57A11ED0, 2, 3, 1, 0, 5, 0, 17, 1_500_000_000)
    msg = runner.decode_stuck_record(raw, keys.get_step("7"))
    assert "producer" in msg and "mma2tma[stage 1]" in msg and "parity 0" in msg and "1.50 s" in msg
    assert runner.decode_stuck_record(b"\0" * 40, keys.get_step("7")) is None


def test_prepare_memo_keys_on_everything_the_build_depends_on(monkeypatch):
    """runner.prepare compiles and loads once per configuration; a different dtype, depth
    or define must never reuse another configuration's kernel."""
    loads = []

    class FakeLoaded:
        def __init__(self, compiled):
            self.compiled = compiled

    monkeypatch.setattr(runner, "_PREPARED", {})
    monkeypatch.setattr(runner.driver, "load", lambda compiled, dev, smem: loads.append(compiled.key) or FakeLoaded(compiled))
    s7, s7d4 = keys.get_step("7"), keys.get_step("7:d4")
    a = runner.prepare(s7, 0, bf16=False)
    assert runner.prepare(s7, 0, bf16=False) is a and len(loads) == 1
    others = [runner.prepare(s7, 0, bf16=True), runner.prepare(s7d4, 0, bf16=False),
              runner.prepare(s7, 0, bf16=False, extra_defines={"GL_TRACE": 1}), runner.prepare(s7, 1, bf16=False)]
    assert len(loads) == 5
    assert len({id(o) for o in others} | {id(a)}) == 5
    assert len(set(loads[:4])) == 4  # fp16 / bf16 / depth 4 / trace: four different cubins


def test_report_table_keeps_its_figures_beside_long_labels():
    """An fp8 or attention build's long label wraps in the step column; the figures keep theirs
    (an 80-column console showed only the labels and a clipped last column)."""
    from rich.console import Console
    from gemm_ladder.measure.report import print_report
    row = dict(ok=True, label="fp8 128x256, promoted every k-tile in 4 column pieces through two partials in turn, "
                              "each promoted under the other's MMAs", step="fp8:x", registers=168, static_smem=0,
               dynamic_smem=225 * 1024, spill_bytes=0, warnings=[], compile_s=0.5, cached=False, sass={})
    for width in (80, 120):
        con = Console(width=width, record=True, color_system=None)
        print_report([row], con)
        text = con.export_text()
        assert "SASS claims" in text and "regs" in text
        line = next(ln for ln in text.splitlines() if ln.lstrip().startswith("fp8 128x256"))
        assert "168" in line and "225" in line and "0.50" in line and "ok" in line
