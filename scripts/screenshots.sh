#!/usr/bin/env bash
# Refresh docs/screenshots/ (the README's pictures): serve the app, visit every page in headless chromium on
# the real model, and save one full-page PNG per page. The test suite's browser run saves to a temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
SPECVIZ_SCREENSHOTS="$PWD/docs/screenshots" exec .venv/bin/python -m pytest -m browser -q -p no:cacheprovider \
  tests/test_browser.py "$@"
