"""Doors: every bad input ends in one clear line on stderr and a non-zero exit code, never a
traceback; output goes where --out-dir says; the report fits 120 columns. No GPU needed."""
import io
import json
import re
import os
import subprocess
import sys
from pathlib import Path

import pytest

import gemm_ladder
from gemm_ladder.choreography.sim import simulated_steps
from gemm_ladder.choreography.whatifs import WHAT_IFS
from gemm_ladder.cli import commands as cli
from gemm_ladder.cli import doors
from gemm_ladder.families import keys
from gemm_ladder.families.keys import UnknownStep, as_step, parse_step_spec
from gemm_ladder.library import runner
from gemm_ladder.measure import sass

ROOT = Path(__file__).resolve().parents[1]
SRC = Path(gemm_ladder.__file__).resolve().parents[1]
HOPPER = doors.hopper_problem() is None


def run_cli(*args, cwd, columns=120):
    """The CLI in a child process, importing this checkout's package."""
    env = dict(os.environ, COLUMNS=str(columns), PYTHONPATH=os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]))
    return subprocess.run([sys.executable, "-m", "gemm_ladder", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600)


def run_main(capsys, *args):
    """The CLI in this process: (exit code, stdout, stderr)."""
    try:
        code = cli.main(list(args))
    except SystemExit as e:  # argparse's usage errors exit through here
        code = e.code
    out, err = capsys.readouterr()
    return code, out, err


def one_line_error(code, out, err, *needles, expect_code=2):
    assert "Traceback" not in out + err
    assert code == expect_code, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for n in needles:
        assert n in lines[0], lines[0]
    return lines[0]


# ---- the doors, each as a user met it (child process: no traceback anywhere) ------
@pytest.mark.parametrize("args, needles", [
    (("simulate", "--mma-ns", "0"), ("--mma-ns", "at most 100000 ns")),
    (("report", "--steps", "11"), ("no step 11", "known steps: 1, 2, 3")),
    (("report", "--steps", "5:d4g8"), ("step 5 has no g variant", "known steps")),
    (("simulate", "--k-tiles", "100000"), ("--k-tiles", "at most 4096")),
])
def test_reported_doors_end_in_one_line(tmp_path, args, needles):
    r = run_cli(*args, cwd=tmp_path)
    one_line_error(r.returncode, r.stdout, r.stderr, *needles)
    assert r.stdout == ""


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux)")
def test_simulate_into_an_impossible_folder(tmp_path):
    r = run_cli("simulate", "--step", "7", "--out", "/proc/x", cwd=tmp_path)
    one_line_error(r.returncode, r.stdout, r.stderr, "cannot create the output folder /proc/x")


@pytest.mark.skipif(HOPPER, reason="checks the machine without a Hopper GPU")
def test_gpu_command_without_hopper_is_one_line_without_numpy_noise(tmp_path):
    r = run_cli("bench", cwd=tmp_path)
    line = one_line_error(r.returncode, r.stdout, r.stderr, "needs a Hopper GPU", "gemm-ladder report")
    assert line.startswith("gemm-ladder bench: error:")


# ---- every other door, in this process -------------------------------------------------
@pytest.mark.parametrize("args, needles", [
    (("simulate", "--mma-ns", "-280"), ("--mma-ns", ">= 1")),
    (("simulate", "--mma-ns", "nan"), ("--mma-ns", "out of range")),
    (("simulate", "--load-latency-ns", "-1"), ("--load-latency-ns", ">= 1")),
    (("simulate", "--load-latency-ns", "fast"), ("not a number",)),
    (("simulate", "--depth", "0"), ("--depth", "at most 16")),
    (("simulate", "--tiles-per-cta", "1000"), ("--tiles-per-cta", "at most 64")),
    (("simulate", "--l2-bw", "0"), ("--l2-bw",)),
    (("simulate", "--k-tiles", "4000"), ("at most 512 when simulating every step", "--step")),
    (("simulate", "--step", "7", "--k-tiles", "4096", "--tiles-per-cta", "2"), ("8192 k-tiles", "at most 4096")),
    (("simulate", "--step", "3"), ("the simulator models steps 4, 5",)),
    (("simulate", "--step", "4:d2"), ("step 4 has no variants",)),
    (("simulate", "--step", "11"), ("no step 11",)),
    (("simulate", "--what-if", "nope"), ("--what-if", "invalid choice")),
    (("report", "--steps", "1-12"), ("no step 11",)),
    (("report", "--steps", "7-3"), ("bad step range '7-3'",)),
    (("report", "--steps", ","), ("no steps in",)),
    (("report", "--steps", "4:d2"), ("step 4 has no variants",)),
    (("report", "--steps", "7:d0"), ("step 7:d0: d<depth> must be at least 1",)),
    (("report", "--steps", "6:d2g0"), ("g<group rows> must be at least 1",)),
    (("report", "--steps", "gemm:128x256b2"), ("is 0 or 1",)),
    (("report", "--steps", "gemm:128x256l2"), ("add b0 to leave it out",)),
    (("report", "--steps", "7:l2"), ("below the ring depth",)),
    (("report", "--dtype", "fp8"), ("unknown dtype 'fp8'", "fp16 or bf16")),
    (("bench", "--api", "--library"), ("--library ends the ladder",)),
    (("bench", "--steps", "99"), ("no step 99",)),
    (("bench", "--sizes", "1x2"), ("bad size '1x2'", "MxNxK")),
    (("bench", "--sizes", "0"), ("bad size '0'",)),
    (("bench", "--sizes", "4096xabc"), ("bad size",)),
    (("bench", "--dtype", "int8"), ("unknown dtype",)),
    (("bench", "--reps", "0"), ("--reps",)),
    (("bench", "--budget", "-1"), ("--budget",)),
    (("bench", "--dtype", "both"), ("--dtype both runs with --suite",)),
    (("bench", "--api", "--suite", "llm"), ("--api and --suite",)),
    (("bench", "--api", "--dry-run"), ("--dry-run plans a suite",)),
    (("bench", "--api", "--steps", "7"), ("--steps picks ladder steps", "--api")),
    (("bench", "--api", "--sizes", "0"), ("bad size '0'",)),
    (("bench", "--suite", "nope", "--dry-run"), ("--suite", "invalid choice", "squares")),
    (("explain", "0", "5", "5"), ("not a positive integer",)),
    (("explain", "8", "8", "8", "--sms", "0"), ("--sms",)),
    (("explain", "64", "4096", "7000", "--fp8", "row"), ("--fp8 64x4096x7000", "multiple of 16")),
    (("explain", "64", "4096", "7168", "--fp8", "row", "--b-row-major"), ("K-major only",)),
    (("explain", "8", "8", "16", "--fp8", "tensor", "--measured"), ("--fp8 --measured",)),
    (("explain", "8", "8", "8", "--fast-accum"), ("give --fp8",)),
    (("explain", "8", "8", "16", "--fp8", "int8"), ("--fp8", "invalid choice")),
    (("plot", "nonexistent.json"), ("cannot read nonexistent.json",)),
    (("check", "--steps", "7:q1"), ("step 7 has no q variant",)),
    (("check", "--sizes", "-5"), ("bad size",)),
    (("check", "--dtype", "fp32"), ("unknown dtype",)),
    (("trace", "--step", "2"), ("step 2 has no mbarrier pipeline",)),
    (("trace", "--step", "11"), ("no step 11",)),
    (("trace", "--size", "12x"), ("bad size",)),
    (("trace", "--events", "0"), ("--events",)),
    (("trace", "--step", "smallm:n64"), ("smallm:n64 is a kernel family beside the ladder",)),
    (("deadlock", "--step", "smallm"), ("smallm is a kernel family beside the ladder",)),
    (("simulate", "--step", "smallm:n32"), ("the simulator models steps", "not smallm:n32, a kernel family")),
    (("deadlock", "--step", "x"), ("not a step key",)),
    (("deadlock", "--timeout", "0"), ("--timeout",)),
    (("nosuch",), ("invalid choice",)),
])
def test_bad_input_is_one_line_exit_2(capsys, tmp_path, monkeypatch, args, needles):
    monkeypatch.chdir(tmp_path)
    one_line_error(*run_main(capsys, *args), *needles)
    assert not (tmp_path / "out").exists()  # refused before any work


@pytest.mark.skipif(HOPPER, reason="checks the machine without a Hopper GPU")
@pytest.mark.parametrize("args", [("check",), ("trace",), ("deadlock",)])
def test_gpu_commands_need_hopper(capsys, args):
    one_line_error(*run_main(capsys, *args), "needs a Hopper GPU (sm_90")


def test_output_paths_that_cannot_be_written(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("")
    one_line_error(*run_main(capsys, "simulate", "--step", "7", "--out-dir", "file/x"),
                   "cannot create the output folder file/x")
    one_line_error(*run_main(capsys, "report", "--steps", "1", "--json", "file/r.json"), "file")
    one_line_error(*run_main(capsys, "report", "--steps", "1", "--json", str(tmp_path)), "is a folder")


# ---- step keys, in Python too ------------------------------------------------------------
def test_run_step_takes_keys_as_the_readme_shows():
    import torch
    a = torch.randn(128, 64).half()
    for key in ("7", 7, "7:d4", keys.get_step("7")):
        with pytest.raises(ValueError, match="CUDA tensors"):  # past the key, at the device check
            runner.run_step(key, a, a)
    with pytest.raises(UnknownStep, match=r"no step 11.*known steps: 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7:d3") as e:
        runner.run_step("11", a, a)
    assert isinstance(e.value, KeyError) and isinstance(e.value, ValueError)
    assert not str(e.value).startswith("'")  # the message itself, not KeyError's quoted repr
    with pytest.raises(UnknownStep, match="got float"):
        as_step(7.0)


def test_step_specs():
    assert [s.key for s in parse_step_spec("1-3,7:d4")] == ["1", "2", "3", "7:d4"]
    assert [s.key for s in parse_step_spec(6)] == ["6"]
    assert as_step("6:d6g1").kernel_defines()["GL_DEPTH"] == 6
    # main's variants: named ones (cluster on/off) and ad-hoc tokens on the new steps
    assert as_step("8:c1").cluster == (1, 1, 1) and as_step("8").cluster == (2, 1, 1)
    assert as_step("9:c1").cluster == (1, 1, 1) and as_step("10").cluster == (2, 1, 1)
    assert as_step("10:c1").cluster == (1, 1, 1)
    assert (as_step("7:d4").depth, as_step("10:d3w2").ctas_per_sm) == (4, 2)
    assert keys.get_step("8:c1") is as_step("8:c1")  # one parser: get_step is keys.py's
    assert as_step("smallm").key == "smallm" and keys.get_step("smallm:n128") is as_step("smallm:n128")
    assert as_step(as_step("smallm")) is as_step("smallm")  # a family's entry passes through, like a Step
    with pytest.raises(UnknownStep, match="a kernel family: gemm:128x256, .*smallm, smallm:n128"):  # both families
        as_step("smallm:x")
    with pytest.raises(UnknownStep, match="step 5 has no g variant: its variants take d<depth>"):
        as_step("5:d4g8")


# ---- simulate: JSON alone, folders -------------------------------------------------------
def test_simulate_json_is_alone_on_stdout(capsys, tmp_path):
    code, out, err = run_main(capsys, "simulate", "--k-tiles", "4", "--json", "--out-dir", str(tmp_path))
    assert code == 0
    rows = json.loads(out)  # the whole of stdout
    assert [r["key"] for r in rows if not r["what_if"]] == [st.key for st in simulated_steps()]
    # each what-if on the step it is shown on (a ladder step, or a gemm entry: borrow-no-sync)
    assert {(r["what_if"], r["key"]) for r in rows if r["what_if"]} == \
        {(w.name, as_step(w.default_step).key) for w in WHAT_IFS.values()}
    assert "simulate.html" in err
    code, out, _ = run_main(capsys, "simulate", "--step", "7", "--k-tiles", "4", "--out-dir", str(tmp_path))
    assert code == 0 and "[{" not in out and "busy" in out
    code, out, _ = run_main(capsys, "simulate", "--step", "7:d4", "--k-tiles", "4", "--json", "--out-dir", str(tmp_path))
    (row,) = json.loads(out)  # a variant is simulated with its own ring depth
    assert code == 0 and (row["key"], row["depth"]) == ("7:d4", 4)


def test_every_command_writes_under_out_dir(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run_main(capsys, "simulate", "--step", "7", "--k-tiles", "4")[0] == 0
    assert (tmp_path / "out" / "simulate_step7.html").is_file()
    assert not (tmp_path / "results").exists()
    assert run_main(capsys, "--out-dir", "before", "simulate", "--step", "7", "--k-tiles", "4")[0] == 0
    assert run_main(capsys, "simulate", "--out-dir", "after", "--step", "7", "--k-tiles", "4")[0] == 0
    assert (tmp_path / "before" / "simulate_step7_trace.json").is_file()
    assert (tmp_path / "after" / "simulate_step7_trace.json").is_file()
    args = cli.build_parser().parse_args(["--out-dir", "x", "bench"])
    assert args.out_dir == "x"
    assert cli.build_parser().parse_args(["trace", "--out", "y"]).out_dir == "y"


def test_simulate_sweep_stays_bounded_for_extreme_latencies(tmp_path):
    from gemm_ladder.cli import simulate as cli_simulate
    text = cli_simulate.simulate_report(tmp_path, k_tiles=2, mma_ns=1, load_latency_ns=100_000)
    sweep = next(line for line in text.splitlines() if "busy vs depth" in line)
    needed = int(sweep.split("depth needed by the model: ")[1].split(")")[0])
    depths = [int(entry.split(":")[0]) for entry in sweep.split("): ", 1)[1].split(", ")]
    assert needed > cli_simulate.MAX_DEPTH and depths == list(range(1, cli_simulate.MAX_DEPTH + 1))


# ---- report: 120 columns, quiet when not a terminal, SASS cache --------------------------
def test_report_fits_120_columns(tmp_path):
    r = run_cli("report", "--steps", "all", cwd=tmp_path, columns=120)
    assert r.returncode == 0, r.stdout + r.stderr
    # no progress display when stderr is not a terminal; at most the one line of a first compile
    assert all(line.startswith("gemm-ladder: compiling ") for line in r.stderr.splitlines()), r.stderr
    lines = r.stdout.splitlines()
    assert max(len(line) for line in lines) <= 120
    assert "…" not in r.stdout
    for header in ("regs", "smem KB", "spill", "SASS claims", "HGMMA", "USETMAXREG", "LDG.E.128"):
        assert header in r.stdout


@pytest.mark.parametrize("name", ["2026-11-29_h200_ladder_4096_fp16_16c3043.json",
                                  "2026-11-29_h200_sweep_step7d4_17c9529.json"])
def test_bench_table_fits_100_columns(name):
    from rich.console import Console
    result = json.loads((ROOT / "benchmarks" / "results" / name).read_text())
    console = Console(width=100, record=True, file=io.StringIO())
    cli.print_ladder(result, console)
    text = console.export_text()
    assert max(len(line) for line in text.splitlines()) <= 100 and "…" not in text
    assert "x cuBLAS" in text and "timed calls per step" in text


def test_sass_disassembly_is_cached_and_checked(tmp_path, monkeypatch):
    if sass.find_tool("cuobjdump") is None or sass.find_tool("nvdisasm") is None:
        pytest.skip("no cuobjdump/nvdisasm")
    cubin = keys.get_step("4").compile().cubin
    monkeypatch.setenv("GEMM_LADDER_CACHE_DIR", str(tmp_path))
    runs = []
    real = sass._run_cuobjdump
    monkeypatch.setattr(sass, "_run_cuobjdump", lambda *a: runs.append(1) or real(*a))
    first = sass.disassemble(cubin)
    assert sass.disassemble(cubin) == first and len(runs) == 1
    (entry,) = (tmp_path / "sass").iterdir()
    entry.write_text(entry.read_text()[:-100])  # a truncated entry is rebuilt, not trusted
    assert sass.disassemble(cubin) == first and len(runs) == 2
    assert "HGMMA" in first


def test_progress_only_on_a_terminal(monkeypatch):
    monkeypatch.setattr(doors, "stderr_is_terminal", lambda: False)
    with doors.progress() as p:
        assert p is None
    with doors.status("x") as update:
        update("y")
    monkeypatch.setattr(doors, "stderr_is_terminal", lambda: True)
    from rich.progress import Progress
    assert isinstance(doors.progress(), Progress)


# ---- help, metadata, setup, docs ---------------------------------------------------------
def test_help_lists_each_command_once_and_every_option_has_help(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = capsys.readouterr().out
    for name in ("bench", "report", "check", "deadlock", "trace", "simulate"):
        assert sum(line.split()[:1] == [name] for line in out.splitlines()) == 1, name
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, p in sub.choices.items():
        for action in p._actions:
            assert action.help, f"{name} {action.option_strings} has no help"


def test_pyproject_metadata():
    import tomllib
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert isinstance(project["license"], str)  # SPDX string: no setuptools deprecation warning
    assert any(d.split(">")[0].split("=")[0].strip() == "numpy" for d in project["dependencies"])
    # A plain description: no ratio to cuBLAS, which goes stale with every run.
    assert "beyond" not in project["description"] and not re.search(r"\d\.\d+ ?[x×]", project["description"])


def test_setup_skips_when_pyproject_is_unchanged(tmp_path):
    """scripts/setup.sh in a copy of the repo's top level, with a stand-in python that logs
    its arguments: the second run installs nothing; a changed pyproject.toml installs again."""
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "setup.sh").write_bytes((ROOT / "scripts" / "setup.sh").read_bytes())
    (tmp_path / "scripts" / "setup.sh").chmod(0o755)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    log = tmp_path / "log"
    (venv_bin / "python").write_text(f'#!/bin/sh\necho "$@" >> "{log}"\n')
    (venv_bin / "python").chmod(0o755)
    env = dict(os.environ, GEMM_LADDER_VENV=str(tmp_path / "venv"))

    def setup():
        log.write_text("")
        r = subprocess.run(["bash", str(tmp_path / "scripts" / "setup.sh")], env=env, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        return log.read_text()

    assert "pip install -q -e .[test]" in setup()
    assert "pip install" not in setup()
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'y'\n")
    assert "pip install -q -e .[test]" in setup()


def test_docs_stand_alone_and_claim_only_what_was_measured():
    docs = {p: p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]}
    for path, text in docs.items():
        for outside in ("LADDER.md", "ANCHORS.md"):
            assert outside not in text, f"{path.name} refers to {outside}, which is not in the repo"
    readme = docs[ROOT / "README.md"]
    assert "matches cuBLAS" not in readme and "beyond-cuBLAS" not in readme
    assert "mlsyscourse.org" in readme and "tirx-gemm" in readme
    assert "2.11.0+cu130" in readme and "2.13.0" in readme
    # The ladder figures come from the recorded run the README links, and its best ratio is shown.
    linked = re.search(r"\((benchmarks/results/[^)]*_ladder_4096_fp16_[0-9a-f]+\.json)\)", readme)
    assert linked, "the README links the recorded fp16 ladder run"
    recorded = json.loads((ROOT / linked.group(1)).read_text())
    best = max(r["ratio_to_cublas"] for r in recorded["rows"] if r["ok"])
    assert f"| {best:.2f} |" in readme
