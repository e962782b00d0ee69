"""Doors of the files a command reads and writes: one rule for output paths (a missing
folder is created and said so; an unwritable path is refused in one line before the work),
calibrate on every format `gemm-ladder trace` writes, plot under out/ by default. No GPU."""
import json
from pathlib import Path

import pytest

from gemm_ladder.choreography import saved
from test_doors import ROOT, one_line_error, run_main

SAMPLES = ROOT / "docs" / "samples"
PERFETTO = SAMPLES / "trace_step7_d4_perfetto.json"
LADDER = ROOT / "benchmarks" / "results" / "2026-11-29_h200_ladder_4096_fp16_16c3043.json"
# a path no one can write, root included: its folder cannot be created under /proc
UNWRITABLE = "/proc/gemm-ladder-nowhere/x.json"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc (Linux)")
@pytest.mark.parametrize("args", [
    ("report", "--steps", "1", "--json", UNWRITABLE),
    ("report", "--steps", "1", "--json", "/proc/x.json"),  # the folder exists; the file cannot be made
    ("calibrate", str(PERFETTO), "--json", UNWRITABLE),
    ("calibrate", str(PERFETTO), "--json", "/proc/x.json"),
    ("plot", str(LADDER), "--out", "/proc/x"),
    ("plot", str(LADDER), "--out", "/proc/gemm-ladder-nowhere/x"),
])
def test_unwritable_outputs_are_one_line(capsys, tmp_path, monkeypatch, args):
    monkeypatch.chdir(tmp_path)
    one_line_error(*run_main(capsys, *args), "/proc/")


@pytest.mark.parametrize("args, needles", [
    (("report", "--steps", "1", "--json", "file/r.json"), ("file is a file, not a folder",)),
    (("calibrate", str(PERFETTO), "--json", "file/c.json"), ("file is a file, not a folder",)),
    (("plot", str(LADDER), "--out", "file/x"), ("file is a file, not a folder",)),
    (("calibrate", str(PERFETTO), "--json", "."), ("is a folder; give a file name",)),
    (("calibrate", "nope.json"), ("nope.json: no such file",)),
    (("calibrate", str(SAMPLES)), ("is a folder; give a file",)),
    (("calibrate", "file"), ("file: not a measured trace",)),
    (("calibrate", "list.json"), ("list.json: not a measured trace", "Perfetto trace")),
    (("calibrate", str(PERFETTO), "--tolerance", "0"), ("--tolerance",)),
    (("calibrate", str(PERFETTO), "--ctas", "0"), ("--ctas",)),
    (("plot", str(ROOT / "benchmarks")), ("cannot read", "Is a directory")),
    (("plot", "file"), ("cannot read file: not JSON",)),
    (("report", "--steps", "1", "--json", ""), ("is a folder; give a file name",)),
    (("calibrate", str(PERFETTO), "--json", ""), ("is a folder; give a file name",)),
    (("explain", "4294967296", "8", "8"), ("4294967296 is over 2147483647",)),
])
def test_bad_files_are_one_line(capsys, tmp_path, monkeypatch, args, needles):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "file").write_text("")
    (tmp_path / "list.json").write_text("[1]")
    one_line_error(*run_main(capsys, *args), *needles)
    assert not (tmp_path / "out").exists()


def test_missing_output_folders_are_created_and_said(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_main(capsys, "report", "--steps", "1", "--json", "a/b/r.json")
    assert code == 0 and json.loads((tmp_path / "a" / "b" / "r.json").read_text())[0]["step"] == "1"
    assert err.strip() == f"gemm-ladder: created the folder {Path('a/b')}"
    code, out, err = run_main(capsys, "report", "--steps", "1", "--json", "a/b/r.json")
    assert code == 0 and err == ""  # said once, when created
    code, out, err = run_main(capsys, "simulate", "--step", "7", "--k-tiles", "4", "--out-dir", "sim")
    assert code == 0 and "created the folder sim" in err


def test_calibrate_reads_the_shipped_perfetto_trace(capsys, tmp_path):
    (page,) = saved.measured_timelines(SAMPLES / "trace_step7_d4_measured_vs_sim.html")
    (perfetto,) = saved.measured_timelines(PERFETTO)
    assert perfetto.lanes == page.lanes and len(perfetto.spans) == len(page.spans)
    assert len(perfetto.handoffs) == len(page.handoffs) and perfetto.meta["key"] == "7:d4"
    code, out, err = run_main(capsys, "calibrate", str(PERFETTO), "--json", str(tmp_path / "c.json"))
    assert code == 0 and err == "", err
    (row,) = json.loads((tmp_path / "c.json").read_text())
    assert (row["step"], row["depth"], row["k_tiles"], row["within"]) == ("7:d4", 4, 64, True)
    assert out.startswith(f"{PERFETTO}:\n") and "fitted to this trace: " in out and "step 7:d4 depth 4" in out


def test_calibrate_refuses_a_simulated_perfetto_trace(capsys, tmp_path):
    assert run_main(capsys, "simulate", "--step", "7", "--k-tiles", "4", "--out-dir", str(tmp_path))[0] == 0
    one_line_error(*run_main(capsys, "calibrate", str(tmp_path / "simulate_step7_trace.json")),
                   "no measured timeline")


def test_plot_writes_under_out_by_default(capsys, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.chdir(tmp_path)
    copy = tmp_path / "results" / LADDER.name
    copy.parent.mkdir()
    copy.write_text(LADDER.read_text())
    code, out, err = run_main(capsys, "plot", str(copy))
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        LADDER.stem + "_bars.png", LADDER.stem + "_roofline.png"]
    assert [p.name for p in copy.parent.iterdir()] == [LADDER.name]  # nothing beside the JSON
    assert run_main(capsys, "--out-dir", "figs", "plot", str(copy))[0] == 0
    assert (tmp_path / "figs" / (LADDER.stem + "_roofline.png")).is_file()


def test_simulate_leaves_the_main_jobs_page_alone(capsys, tmp_path):
    """The main job without a GPU writes choreography.html; simulate writes its own names."""
    main_page = tmp_path / "choreography.html"
    main_page.write_text("the main job's page")
    assert run_main(capsys, "simulate", "--k-tiles", "4", "--out-dir", str(tmp_path))[0] == 0
    assert run_main(capsys, "simulate", "--step", "7:d4", "--k-tiles", "4", "--out-dir", str(tmp_path))[0] == 0
    assert run_main(capsys, "simulate", "--what-if", "both-phase-0", "--k-tiles", "8",
                    "--out-dir", str(tmp_path))[0] == 0
    assert main_page.read_text() == "the main job's page"
    assert {p.name for p in tmp_path.iterdir()} == {
        "choreography.html", "simulate.html", "simulate_trace.json", "simulate_step7_d4.html",
        "simulate_step7_d4_trace.json", "simulate_both-phase-0.html", "simulate_both-phase-0_trace.json"}
