"""The Python scripts the device session runs (scripts/device_session.sh and the run scripts it
calls) start without a GPU: each argparse script prints its --help, the others compile. A
script whose import went stale would otherwise fail only on the H200, costing device time."""
import py_compile
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUNNERS = [ROOT / "scripts" / "device_session.sh", ROOT / "benchmarks" / "probes" / "longk" / "shared_loads_run.sh"]
SCRIPTS = sorted({m for r in RUNNERS for m in re.findall(r"(?:benchmarks/probes|scripts)/[\w/]+\.py", r.read_text())})


def test_the_runners_name_scripts_that_exist():
    assert len(SCRIPTS) >= 10
    missing = [s for s in SCRIPTS if not (ROOT / s).is_file()]
    assert not missing, missing


@pytest.mark.parametrize("script", SCRIPTS)
def test_script_starts_without_a_gpu(script):
    path = ROOT / script
    py_compile.compile(str(path), doraise=True)
    if "argparse" not in path.read_text():
        return  # positional arguments only: compiled above
    env = {"PYTHONPATH": f"{ROOT / 'src'}:{ROOT / 'tests'}:{ROOT / 'benchmarks' / 'probes'}", "PATH": "/usr/bin:/bin"}
    res = subprocess.run([sys.executable, str(path), "--help"], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and "usage" in res.stdout.lower(), res.stderr[-2000:]
