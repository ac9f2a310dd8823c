#!/usr/bin/env bash
# Medusa + Lookahead against Medusa and Lookahead alone (issue 64), with plain decoding, in the same interleaved runs
# on the held-out prompts (scripts/bench-heldout.sh).
#   bash scripts/bench-medusa-lookahead.sh [OUT_DIR] [TOKENS...]   (default docs/bench/medusa-lookahead-<date>)
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/bench-heldout.sh ar,medusa,lookahead,medusa_lookahead "${1:-docs/bench/medusa-lookahead-$(date +%F)}" "${@:2}"
