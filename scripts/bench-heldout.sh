#!/usr/bin/env bash
# Methods side by side on the 12 held-out prompts never used to train or tune (docs/bench/heldout-2026-12-07.jsonl):
# each at the shape fitted to this device, with plain decoding, in the same interleaved runs (3 repeats), natively
# and with AVX2 kernels; each table gives speedup, A, r and the step split (draft, verify, other), with the fit.
#   bash scripts/bench-heldout.sh METHODS OUT_DIR [TOKENS...]      (METHODS: ar,eagle3,dflash; default 64 then 128)
set -euo pipefail
cd "$(dirname "$0")/.."
chosen=$1
out=$2
shift 2
tokens=("${@:-64 128}")
mkdir -p "$out"
PY=.venv/bin/python
for n in ${tokens[@]}; do
  for kind in native avx2; do
    env=()
    [ "$kind" = avx2 ] && env=(ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2)
    env "${env[@]}" "$PY" -m specviz fit > "$out/fit-$kind.txt"
    env "${env[@]}" "$PY" -m specviz.tuning.rows --out "$out/rows-$kind-$n.jsonl" \
      --prompts docs/bench/heldout-2026-12-07.jsonl --max-new-tokens "$n" --repeats 3 --methods "$chosen" \
      > "$out/table-$kind-$n.md"
  done
done
