#!/usr/bin/env bash
# Refresh docs/screenshots/ (the README's pictures): serve the app on the real model and take the lecture tour
# in headless chromium with presets only: a code prompt from the sidebar's presets, the "as in the paper"
# preset on Medusa, EAGLE and Lookahead, each page at full length (1600 px wide); then each page's figure in
# focus drawn from the shipped pack as a 1600 x 900 slide. The test suite's browser run saves to a temporary folder.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/python scripts/lecture_shots.py "$@"
exec .venv/bin/python scripts/gallery_slides.py  # each page's figure in slide form, from the shipped pack
