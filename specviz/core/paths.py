"""Every path specviz reads or writes, in one place; none depends on the current directory."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]  # the checkout: app.py, models/, docs/
MODELS = REPO / "models"  # trained heads and calibration tables, committed
MEDUSA_DIR = MODELS / "medusa"
EAGLE_DIR = MODELS / "eagle"
DRAFT_DIR = MODELS / "draft"  # the trained speculative-sampling draft model
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


MAX_PATH = 1024  # characters of a folder named in a Config (a head's)


def folder_problem(value: object) -> str | None:
    """Why `value` cannot name a folder (not a string, too long, control characters), or None when it can."""
    if not isinstance(value, str):
        return f"must be a folder name (a string), got {type(value).__name__}"
    if len(value) > MAX_PATH:
        return f"must be a folder name of at most {MAX_PATH} characters"
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        return "must be a folder name without control characters"
    if any(len(part) > 255 for part in value.split("/")):
        return "must be a folder name whose parts are at most 255 characters"
    return None


def inside(folder: str | Path, root: Path = MODELS) -> bool:
    """Whether `folder` is `root` or lies under it, links and '..' resolved (what the app may read heads from)."""
    try:
        where, top = Path(folder).expanduser().resolve(), root.resolve()
    except (OSError, RuntimeError, ValueError):
        return False
    return where == top or top in where.parents
