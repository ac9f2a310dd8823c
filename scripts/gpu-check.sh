#!/usr/bin/env bash
# The GPU check: greedy identity of every method, the latency probe and a 6-prompt bench on CUDA, one JSON report;
# then the batched curves on the same device (speedup, A and r against batch size and context length, the
# files Compare's "Batch and context" tab draws; in fp32, so every row is checked against plain decoding).
# CURVES=0 skips the curves (they take about an hour on a 2-core CPU, minutes on a GPU).
# Usage: bash scripts/gpu-check.sh [report.json]   (runs on the CPU too: DEVICE=cpu bash scripts/gpu-check.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
day=$(date -u +%Y-%m-%d)
dev=${DEVICE:-cuda}
out=${1:-docs/gpu-check-$day.json}
if [ ! -x .venv/bin/python ]; then bash scripts/setup.sh; fi
.venv/bin/python -m specviz.tuning.doctor --device "$dev" --out "$out"
if [ "${CURVES:-1}" = 1 ]; then
  common=(--methods ar,pld,eagle --prompts specviz/data/prompts.jsonl --max-new-tokens 64 --repeats 3 --device "$dev" --dtype fp32)
  .venv/bin/python -m specviz bench --batch 1,4,16,64 --limit 18 "${common[@]}" --json "docs/bench/batched-$dev-batch-$day.json"
  .venv/bin/python -m specviz bench --batch 1,4,16 --context 128,512,2048,8064 "${common[@]}" \
    --json "docs/bench/batched-$dev-grid-$day.json"
fi
