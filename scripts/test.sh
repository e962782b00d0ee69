#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the tests. Without a GPU the GPU tests skip; without
# Chromium (Debian: apt-get install chromium chromium-driver) the browser test skips.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec "${GEMM_LADDER_VENV:-.venv}/bin/python" -m pytest -q -p no:cacheprovider "$@"
