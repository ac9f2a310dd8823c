#!/usr/bin/env bash
# Refresh docs/screenshots/ (the README's pictures): serve the app on the real model and take the lecture tour
# in headless chromium with presets only: a code prompt from the sidebar's presets, the "as in the paper"
# preset on Medusa, EAGLE and Lookahead, each page at full length (1600 px wide) and at the 1600 x 900 slide
# size. The test suite's browser run saves its screenshots to a temporary folder instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python scripts/lecture_shots.py "$@"
