#!/usr/bin/env bash
# The GPU check: greedy identity of every method, the latency probe and a 6-prompt bench on CUDA, one JSON report.
# Usage: bash scripts/gpu-check.sh [report.json]   (runs on the CPU too: DEVICE=cpu bash scripts/gpu-check.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/gpu-check-$(date -u +%Y-%m-%d).json}
if [ ! -x .venv/bin/python ]; then bash scripts/setup.sh; fi
exec .venv/bin/python -m specviz.doctor --device "${DEVICE:-cuda}" --out "$out"
