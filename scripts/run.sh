#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the main job: the ladder benchmark on a Hopper GPU;
# without one, the compile report of every step and the pipeline simulator.
# Extra arguments go to the CLI, e.g. scripts/run.sh bench --sizes 8192
set -euo pipefail
cd "$(dirname "$0")/.."
# setup's progress (a first run takes minutes) is on stderr and shows; its one-line
# "up to date" on stdout does not
scripts/setup.sh >/dev/null
exec "${GEMM_LADDER_VENV:-.venv}/bin/gemm-ladder" "$@"
