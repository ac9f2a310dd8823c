#!/usr/bin/env bash
# The held-out bench of the fit (issue 61): every trained method at the shape fitted to this device against the
# constants it replaced ("before": EAGLE-family 2/4/6 drafting in bf16, Medusa and Hydra 4 heads / 5 tokens,
# Lookahead 3/2/2), 12 prompts never used to train or tune (docs/bench/heldout-2026-12-07.jsonl), 3 interleaved
# repeats, natively and with AVX2 kernels; rows are appended as they finish (a stopped run keeps them).
#   bash scripts/bench-fit.sh [OUT_DIR] [TOKENS...]      (default docs/bench/fit-<date>, 64 then 128)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/bench/fit-$(date +%F)}
shift || true
tokens=("${@:-64 128}")
mkdir -p "$out"
PY=.venv/bin/python
after=ar,medusa,hydra,eagle,eagle3,hybrid,lookahead,pld
before=(--set "medusa:heads=4,total_tokens=5" --set "hydra:heads=4,total_tokens=5"
  --set "eagle:depth=2,top_k=4,total_tokens=6,head_dtype=bf16" --set "eagle3:depth=2,top_k=4,total_tokens=6,head_dtype=bf16"
  --set "hybrid:depth=2,top_k=4,total_tokens=6,head_dtype=bf16" --set "lookahead:window=3,ngram=2,guesses=2")
for n in ${tokens[@]}; do
  for kind in native avx2; do
    env=()
    [ "$kind" = avx2 ] && env=(ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2)
    extra=()
    [ "$n" = 64 ] && extra=("${before[@]}")  # the constants it replaced, side by side, at 64 tokens
    env "${env[@]}" "$PY" -m specviz fit > "$out/fit-$kind.txt"
    env "${env[@]}" "$PY" -m specviz.tuning.rows --out "$out/rows-$kind-$n.jsonl" \
      --prompts docs/bench/heldout-2026-12-07.jsonl --max-new-tokens "$n" --repeats 3 --methods "$after" "${extra[@]}" \
      > "$out/table-$kind-$n.md"
  done
done
