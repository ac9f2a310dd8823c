#!/usr/bin/env bash
# DFlash against EAGLE-3 (issue 65), with plain decoding, on the held-out prompts (scripts/bench-heldout.sh).
#   bash scripts/bench-dflash.sh [OUT_DIR] [TOKENS...]      (default docs/bench/dflash-<date>, 64 then 128)
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/bench-heldout.sh ar,eagle3,dflash "${1:-docs/bench/dflash-$(date +%F)}" "${@:2}"
