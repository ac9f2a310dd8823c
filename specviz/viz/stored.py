"""The pages' figures drawn from stored measurements (sweeps, the prompt-kinds bench), for export and the gallery."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from specviz import paths
from specviz.measure import Provenance


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _where(data: dict[str, Any], here: Provenance | None) -> str:
    try:
        return Provenance.from_dict(data.get("provenance")).describe(here)
    except ValueError:
        return "where and when it was measured is not recorded"


def _medusa(sw: dict[str, Any], here: Provenance | None) -> dict[str, go.Figure]:
    from specviz.methods.medusa import Config
    from specviz.viz.tree import budget_figure, cost_figure

    return {
        "medusa_budget": budget_figure(sw["budgets"], sw["predicted"], sw["measured"], Config().budget),
        "medusa_cost": cost_figure(sw["budgets"], sw["draft_ms"], sw["verify_ms"], sw["ar_ms"], sw["speedup"]),
    }


def _eagle(sw: dict[str, Any], here: Provenance | None) -> dict[str, go.Figure]:
    from specviz.viz.eagle import sweep_figure

    return {"eagle_sweep": sweep_figure(sw, where=_where(sw, here))}


def _lookahead(sw: dict[str, Any], here: Provenance | None) -> dict[str, go.Figure]:
    from specviz.viz.lookahead import sweep_figure

    return {"lookahead_sweep": sweep_figure(sw, title=f"Where a wider window stops paying ({_where(sw, here)})")}


def _kinds(data: dict[str, Any], here: Provenance | None) -> dict[str, go.Figure]:
    from specviz.prompts import PromptError, prompt_kinds
    from specviz.viz.categories import wins_figure

    try:
        labels = {k: v.label for k, v in prompt_kinds().items()}
    except PromptError:
        labels = None
    return {"where_methods_win": wins_figure(data, where=_where(data, here), labels=labels)}


SOURCES: list[tuple[Path, Callable[[dict[str, Any], Provenance | None], dict[str, go.Figure]]]] = [
    (paths.MEDUSA_DIR / "sweep.json", _medusa),
    (paths.EAGLE_DIR / "live_sweep.json", _eagle),
    (paths.LOOKAHEAD_SWEEP, _lookahead),
    (paths.PROMPT_KINDS_BENCH, _kinds),
]


def stored_figures(here: Provenance | None = None) -> dict[str, go.Figure]:
    """Every figure the pages draw from a stored file that exists here (a file that cannot be drawn is skipped)."""
    out: dict[str, go.Figure] = {}
    for path, draw in SOURCES:
        data = _read(path)
        if data is None:
            continue
        try:
            out |= draw(data, here)
        except (KeyError, TypeError, ValueError, IndexError):
            continue  # a file of an older format: the page says so; the gallery leaves it out
    return out
