#!/usr/bin/env bash
# The soak checks, not run by the README's test command: statistics at full power (3,000 draws per sampling method,
# power for a 5% shift), the whole lesson by key presses with per-stop times, several visitors on one server,
# hypothesis at 200 examples, the checks that pin committed data (each says what to re-record when it fails),
# the batched bench on the real model and `python -m specviz doctor`. About 20 minutes on a quiet 2-core CPU.
# Other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=.venv/bin/python
t0=$SECONDS
SPECVIZ_HYPOTHESIS=soak "$PY" -m pytest -m "soak" --soak -n 0 --durations=25 --timeout=3600 "$@"
# the property tests again at the soak profile's 200 examples
SPECVIZ_HYPOTHESIS=soak "$PY" -m pytest tests/project/test_fuzz.py -m "not soak" -n 0 --durations=10 --timeout=3600 "$@"
echo "soak tests: $((SECONDS - t0)) s"
out=$(mktemp -d)
"$PY" -m specviz doctor
"$PY" -m specviz bench --methods ar,pld,eagle --prompts specviz/data/prompts.jsonl --limit 8 --batch 1,8 \
  --max-new-tokens 64 --repeats 1 --json "$out/batched.json"
echo "soak: passed in $((SECONDS - t0)) s (batched bench: $out/batched.json)"
