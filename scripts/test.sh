#!/usr/bin/env bash
# Set up (if needed) and run the tests: the README's test command and CI's (under 10 minutes on 2 cores).
#   1. every check but the browser's on two workers: the fast tier (plain `pytest`: tiny models, AppTest on them,
#      ruff, import-linter), the slower checks on tiny models (-m full: memory bounds under tracemalloc, a method
#      added in a copy of the repository…) and the real model (-m real_model: one torch thread a worker; its
#      AppTests on one worker, which measures its latency probe once);
#   2. the browser smoke (-m browser), serially (one server, nothing else on the cores), with pyright beside it.
# Every phase prints its 25 slowest tests; a test that runs past 300 s fails (pytest-timeout), so one hang cannot
# use up CI's time. `--fast`: only the fast tier. The soak checks (long statistics, the whole lesson, the load test,
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
"$PY" -m pytest -m "not browser" --durations=25 --timeout=300 "$@"
echo "every check but the browser's: $((SECONDS - t0)) s"
t1=$SECONDS
log=$(mktemp)
nice -n 5 .venv/bin/pyright >"$log" 2>&1 &
pyright=$!
"$PY" -m pytest -m browser -n 0 --durations=25 --timeout=300 "$@"
echo "browser: $((SECONDS - t1)) s"
if ! wait "$pyright"; then
  tail -n 60 "$log"
  echo "pyright found problems (above)" >&2
  exit 1
fi
echo "pyright: clean ($(tail -n 1 "$log"))"
echo "all tests: $((SECONDS - t0)) s"
