#!/usr/bin/env bash
# The GPU check: the tests that run on every available device (the method contract on the tiny model in the
# production dtype, fp32, and the losslessness lab, with the device lint); then the doctor on the real model in fp32,
# the app's default everywhere (greedy identity of every method, the latency probe, a 6-prompt bench, one JSON
# report); BF16=1 adds the same report in bf16, which is asked for, not the default, and may break identity (it
# is reported as measured, never failing the check); then the batched curves on the same device (speedup, A and
# r against batch size and context length, the files Compare's "Batch and context" tab draws; in fp32, so every
# row is checked against plain decoding).
# CURVES=0 skips the curves (they take about an hour on a 2-core CPU, minutes on a GPU).
# Usage: bash scripts/gpu-check.sh [report.json]   (runs on the CPU too: DEVICE=cpu bash scripts/gpu-check.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
day=$(date -u +%Y-%m-%d)
dev=${DEVICE:-cuda}
out=${1:-docs/gpu-check-$day.json}
if [ ! -x .venv/bin/python ]; then bash scripts/setup.sh; fi
if [ "$dev" = cuda ]; then
  .venv/bin/python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA device is visible')"
fi
.venv/bin/python -m pytest -q -n 0 -p no:cacheprovider tests/test_contract.py tests/test_lossless.py \
  tests/test_device_clean.py tests/test_precision.py
.venv/bin/python -m specviz.tuning.doctor --device "$dev" --dtype fp32 --out "$out"
if [ "${BF16:-0}" = 1 ]; then
  .venv/bin/python -m specviz.tuning.doctor --device "$dev" --dtype bf16 --out "${out%.json}-bf16.json" ||
    echo "bf16 (asked for): not every method stayed identical; see ${out%.json}-bf16.json"
fi
if [ "${CURVES:-1}" = 1 ]; then
  common=(--methods ar,pld,eagle --prompts specviz/data/prompts.jsonl --max-new-tokens 64 --repeats 3 --device "$dev" --dtype fp32)
  .venv/bin/python -m specviz bench --batch 1,4,16,64 --limit 18 "${common[@]}" --json "docs/bench/batched-$dev-batch-$day.json"
  .venv/bin/python -m specviz bench --batch 1,4,16 --context 128,512,2048,8064 "${common[@]}" \
    --json "docs/bench/batched-$dev-grid-$day.json"
fi
