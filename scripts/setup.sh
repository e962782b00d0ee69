#!/usr/bin/env bash
# Create .venv (once) with gemm-ladder and everything its tests need. Idempotent: when the
# environment was set up from this pyproject.toml already, it does nothing (the package is
# installed in editable mode, so source changes need no reinstall).
# A first run takes minutes (torch is a large download): each step says what it does on
# stderr; the up-to-date check prints one line on stdout.
#   GEMM_LADDER_VENV   where the environment goes (default: .venv)
#   GEMM_LADDER_TORCH  the torch requirement to install when torch is missing
#                      (default: torch==2.13.0, the release the CPU tests run with here)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${GEMM_LADDER_VENV:-.venv}
PY="$VENV/bin/python"
STAMP="$VENV/.gemm-ladder-setup"
say() { echo "gemm-ladder setup: $*" >&2; }
want=$(python3 -c "import hashlib; print(hashlib.sha256(open('pyproject.toml', 'rb').read()).hexdigest())")
if [ -x "$PY" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$want" ] \
   && "$PY" -c "import importlib.util as u, sys; sys.exit(u.find_spec('gemm_ladder') is None)" 2>/dev/null; then
  echo "gemm-ladder: $VENV is up to date (set up from this pyproject.toml)"
  exit 0
fi
if [ ! -x "$PY" ]; then
  say "creating the environment $VENV (first run: a few minutes in all)"
  python3 -m venv "$VENV"
  "$PY" -m pip install -q --upgrade pip
fi
if ! "$PY" -c "import torch" 2>/dev/null; then
  say "installing ${GEMM_LADDER_TORCH:-torch==2.13.0} (a large download: this is the slow step)"
  "$PY" -m pip install -q "${GEMM_LADDER_TORCH:-torch==2.13.0}"
fi
say "installing gemm-ladder and its test tools (pyproject.toml changed or first run)"
"$PY" -m pip install -q -e ".[test]"
"$PY" -c "import gemm_ladder, torch; print('gemm-ladder', gemm_ladder.__version__, '| torch', torch.__version__, '| CUDA GPU:', torch.cuda.is_available())"
echo "$want" > "$STAMP"
say "done: $VENV is ready"
