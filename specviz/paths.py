"""Every path specviz reads or writes, in one place; none depends on the current directory."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]  # the checkout: app.py, models/, docs/
MODELS = REPO / "models"  # trained heads and calibration tables, committed
MEDUSA_DIR = MODELS / "medusa"
EAGLE_DIR = MODELS / "eagle"
LOOKAHEAD_SWEEP = MODELS / "lookahead_sweep.json"
SCREENSHOTS = REPO / "docs" / "screenshots"


def cache_root() -> Path:
    """Where converted weights, probe results and training data live (SPECVIZ_CACHE overrides)."""
    return Path(os.environ.get("SPECVIZ_CACHE", Path.home() / ".cache" / "specviz")).expanduser()


def spec_bench_file() -> Path | None:
    """The Spec-Bench question file, if this checkout sits beside it (`../shared/data`) or holds one."""
    for cand in (
        REPO.parent / "shared" / "data" / "spec_bench_question.jsonl",
        REPO / "data" / "spec_bench_question.jsonl",
    ):
        if cand.is_file():
            return cand
    return None
