#!/usr/bin/env bash
# Create .venv (once) with gemm-ladder and everything its tests need. Idempotent.
#   GEMM_LADDER_VENV   where the environment goes (default: .venv)
#   GEMM_LADDER_TORCH  the torch requirement to install when torch is missing
#                      (default: torch==2.13.0, the release this project is tested with)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${GEMM_LADDER_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip
fi
PY="$VENV/bin/python"
if ! "$PY" -c "import torch" 2>/dev/null; then
  "$PY" -m pip install -q "${GEMM_LADDER_TORCH:-torch==2.13.0}"
fi
"$PY" -m pip install -q -e ".[test]"
"$PY" -c "import gemm_ladder, torch; print('gemm-ladder', gemm_ladder.__version__, '| torch', torch.__version__, '| CUDA GPU:', torch.cuda.is_available())"
