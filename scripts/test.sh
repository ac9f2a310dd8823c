#!/usr/bin/env bash
# Set up (if needed) and run the tests. By default the full tier: unit tests, the real model, AppTest, a real
# browser, ruff, import-linter and pyright. `--fast`: only the fast tier, which is what plain `pytest` runs
# (a tiny random Llama, AppTest on it, ruff, import-linter). Other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ "${1:-}" = "--fast" ]; then
  shift
  exec .venv/bin/python -m pytest "$@"
fi
exec .venv/bin/python -m pytest -m "" -n 0 "$@"
