#!/usr/bin/env bash
# Set up (if needed) and serve the app on the built-in model at http://localhost:8501
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m streamlit run app.py --server.address "${ADDRESS:-127.0.0.1}" "$@"
