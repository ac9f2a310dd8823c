"""Every path specviz reads or writes, in one place; none depends on the current directory."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout: app.py, models/, docs/
MODELS = REPO / "models"  # trained heads and calibration tables, committed
MEDUSA_DIR = MODELS / "medusa"
EAGLE_DIR = MODELS / "eagle"
HYDRA_DIR = MODELS / "hydra"
LOOKAHEAD_SWEEP = MODELS / "lookahead_sweep.json"
SCREENSHOTS = REPO / "docs" / "screenshots"
BENCH_DIR = REPO / "docs" / "bench"  # committed bench results (python -m specviz bench --json), with provenance
PROMPT_KINDS_BENCH = BENCH_DIR / "prompt-kinds.json"  # the shipped prompts by kind, every method: Compare's figure
DATA = Path(__file__).resolve().parents[1] / "data"  # shipped inside the package (specviz/data)
PROMPT_PRESETS = DATA / "prompts.jsonl"  # prompts by kind: demonstration and evaluation only, never training
PROMPT_KINDS = DATA / "prompt_kinds.json"  # each kind's label and which methods tend to win on it
LONG_DOCUMENT = DATA / "long_document.txt"  # real long text (two licenses, verbatim) for long-context prompts


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
