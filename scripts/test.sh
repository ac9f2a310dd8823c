#!/usr/bin/env bash
# Set up (if needed) and run the tests: the README's test command and CI's (under 10 minutes on 2 cores).
#   1. the fast tier (plain `pytest`: tiny models, AppTest on them, ruff, import-linter) on two workers;
#   2. the slower checks on tiny models (-m full: memory bounds under tracemalloc, a method added in a copy of the
#      repository, pyright's own test…), on two workers;
#   3. the real model and the browser smoke (-m "real_model or browser"), serially, with pyright running beside them.
# Every phase prints its 25 slowest tests; a test that runs past 300 s fails (pytest-timeout), so one hang cannot
# use up CI's time. `--fast`: only phase 1. The soak checks (long statistics, the whole lesson, the load test,
# the batched bench, doctor) are scripts/soak.sh. Other arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
# Compiled modules are kept in __pycache__ (git ignores it): under PYTHONDONTWRITEBYTECODE, which some shells set,
# every worker compiles the library and re-rewrites ~200 test modules' asserts at each run (~2 s a process).
unset PYTHONDONTWRITEBYTECODE
bash scripts/setup.sh
PY=.venv/bin/python
if [ "${1:-}" = "--fast" ]; then
  shift
  exec "$PY" -m pytest --durations=25 --timeout=300 "$@"
fi
t0=$SECONDS
"$PY" -m pytest --durations=25 --timeout=300 "$@"
echo "fast tier: $((SECONDS - t0)) s"
t1=$SECONDS
"$PY" -m pytest -m "full and not real_model and not browser" --durations=25 --timeout=300 "$@"
echo "slower tiny checks: $((SECONDS - t1)) s"
t2=$SECONDS
log=$(mktemp)
nice -n 5 .venv/bin/pyright >"$log" 2>&1 &
pyright=$!
"$PY" -m pytest -m "real_model or browser" -n 0 --durations=25 --timeout=300 "$@"
echo "real model and browser: $((SECONDS - t2)) s"
if ! wait "$pyright"; then
  tail -n 60 "$log"
  echo "pyright found problems (above)" >&2
  exit 1
fi
echo "pyright: clean ($(tail -n 1 "$log"))"
echo "all tests: $((SECONDS - t0)) s"
