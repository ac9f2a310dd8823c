"""The pages' figures drawn from stored measurements (sweeps, the prompt-kinds bench), for export and the gallery."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import plotly.graph_objects as go

from specviz.core import paths
from specviz.core.measure import Provenance


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


def swept_sizes(sweep: dict[str, Any]) -> list[int]:
    """A Medusa sweep's tree sizes as total_tokens (root included; the committed sweep was migrated from `budgets`)."""
    return list(sweep["total_tokens"])


def _medusa(sw: dict[str, Any], here: Provenance | None) -> dict[str, go.Figure]:
    from specviz.methods.medusa import Config
    from specviz.output.viz.tree import budget_figure, cost_figure

    sizes = swept_sizes(sw)
    return {
        "medusa_budget": budget_figure(sizes, sw["predicted"], sw["measured"], Config().total_tokens),
        "medusa_cost": cost_figure(sizes, sw["draft_ms"], sw["verify_ms"], sw["ar_ms"], sw["speedup"]),
    }


def _eagle(sw: dict[str, Any], here: Provenance | None) -> dict[str, go.Figure]:
    from specviz.output.viz.eagle import sweep_figure

    return {"eagle_sweep": sweep_figure(sw, where=_where(sw, here))}


def _lookahead(sw: dict[str, Any], here: Provenance | None) -> dict[str, go.Figure]:
    from specviz.output.viz.lookahead import sweep_figure

    return {"lookahead_sweep": sweep_figure(sw, title=f"Where a wider window stops paying ({_where(sw, here)})")}


# Spec-Bench's categories by the kind of prompt shipped with the app that they resemble (for the hints)
SPEC_BENCH_KIND = {
    "writing": "chat",
    "roleplay": "chat",
    "reasoning": "chat",
    "humanities": "chat",
    "stem": "chat",
    "qa": "chat",
    "coding": "code",
    "extraction": "extraction",
    "summarization": "summarisation",
    "translation": "translation",
    "math": "maths",
    "math_reasoning": "maths",
    "rag": "long document",
}


def category_bench() -> tuple[Path, dict[str, Any]] | None:
    """The stored bench result that 'where each method wins' draws: the shipped prompt kinds' when it has
    been measured, else the newest stored Spec-Bench result (docs/bench/specbench-*.json)."""
    for path, data in [(paths.PROMPT_KINDS_BENCH, _read(paths.PROMPT_KINDS_BENCH)), *spec_benches()]:
        if data and data.get("categories") and data.get("methods"):
            return path, data
    return None


def spec_benches() -> list[tuple[Path, dict[str, Any]]]:
    """Every stored Spec-Bench result with per-method figures (docs/bench/specbench-*.json), newest first: by the
    date its provenance records, then by name (a file without provenance counts as older than any with one)."""
    out = []
    for path in paths.BENCH_DIR.glob("specbench-*.json"):
        data = _read(path)
        if data and isinstance(data.get("methods"), dict):
            out.append((path, data))

    def measured(item: tuple[Path, dict[str, Any]]) -> tuple[str, str]:
        where = item[1].get("provenance")
        return (str(where.get("date", "")) if isinstance(where, dict) else "", item[0].name)

    return sorted(out, key=measured, reverse=True)


def merged_spec_bench() -> tuple[dict[str, Any], list[tuple[Path, dict[str, Any], list[str]]]]:
    """{"methods": …} taking each method from the newest file that measured it, and which file gave which methods.

    Every file keeps its own provenance, so a page can say where and when each number was measured."""
    methods: dict[str, Any] = {}
    used = []
    for path, data in spec_benches():
        fresh = [m for m in data["methods"] if m not in methods and m != "ar"]
        if fresh:
            methods.update({m: data["methods"][m] for m in fresh})
            used.append((path, data, fresh))
    return {"methods": methods}, used


def kind_of(category: str, kinds: list[str]) -> str:
    """The shipped kind a bench category is (or resembles); '' when none."""
    return category if category in kinds else SPEC_BENCH_KIND.get(category, "")


def category_labels(data: dict[str, Any], kinds: dict[str, str]) -> dict[str, str]:
    """Display names of a bench result's categories (kind name -> label), grouped in the kinds' order."""
    order = list(kinds)

    def rank(cat: str) -> tuple[int, str]:
        k = kind_of(cat, order)
        return (order.index(k) if k else len(order), cat)

    named = {"qa": "QA", "stem": "STEM", "rag": "RAG"}
    cats = sorted(data["categories"], key=rank)
    return {c: kinds.get(c) or named.get(c) or c.replace("_", " ").capitalize() for c in cats}


def _kinds(data: dict[str, Any], here: Provenance | None) -> dict[str, go.Figure]:
    from specviz.core.prompts import PromptError, prompt_kinds
    from specviz.output.viz.categories import wins_figure

    try:
        kinds = {k: v.label for k, v in prompt_kinds().items()}
    except PromptError:
        kinds = {}
    return {"where_methods_win": wins_figure(data, _where(data, here), category_labels(data, kinds))}


def scaling_results() -> list[tuple[Path, dict[str, Any]]]:
    """The stored batched bench results (docs/bench/batched-*.json) that can be read, in name order (a later
    file's point replaces an earlier one's when scaling.merge combines them)."""
    found = [(p, _read(p)) for p in sorted(paths.BENCH_DIR.glob("batched-*.json"))]
    return [(p, d) for p, d in found if d and isinstance(d.get("points"), list)]


def _scaling(_data: dict[str, Any], here: Provenance | None) -> dict[str, go.Figure]:
    from specviz.output.viz import scaling

    points = scaling.merge(d for _, d in scaling_results())
    return {
        "speedup_vs_batch": scaling.curve_figure(points, "batch", {"context": None}),
        "speedup_vs_context": scaling.curve_figure(points, "context", {"batch": 1}),
        "speculation_region": scaling.region_figure(points),
    }


def _scaling_source() -> list[tuple[Path, Callable[[dict[str, Any], Provenance | None], dict[str, go.Figure]]]]:
    found = scaling_results()
    return [(found[-1][0], _scaling)] if found else []


def _category_source() -> list[tuple[Path, Callable[[dict[str, Any], Provenance | None], dict[str, go.Figure]]]]:
    found = category_bench()
    return [(found[0], _kinds)] if found else []


def sources() -> list[tuple[Path, Callable[[dict[str, Any], Provenance | None], dict[str, go.Figure]]]]:
    """The stored files the pages draw from, each with its figure builder."""
    return [
        (paths.MEDUSA_DIR / "sweep.json", _medusa),
        (paths.EAGLE_DIR / "live_sweep.json", _eagle),
        (paths.LOOKAHEAD_SWEEP, _lookahead),
        *_category_source(),
        *_scaling_source(),
    ]


def stored_figures(here: Provenance | None = None) -> dict[str, go.Figure]:
    """Every figure the pages draw from a stored file that exists here (a file that cannot be drawn is skipped)."""
    from specviz.output.deck import stored_measurement

    out: dict[str, go.Figure] = {}
    for path, draw in sources():
        data = _read(path)
        if data is None:
            continue
        try:
            drawn = draw(data, here)
        except (KeyError, TypeError, ValueError, IndexError):
            continue  # a file of an older format: the page says so; the gallery leaves it out
        where = _scaling_where(here) if draw is _scaling else _where(data, here)
        out |= {name: stored_measurement(fig, where) for name, fig in drawn.items()}
    return out


def _scaling_where(here: Provenance | None) -> str:
    """Where each stored batched bench (the scaling figures merge them all) was measured."""
    return "; ".join(f"{path.name} {_where(data, here)}" for path, data in scaling_results())
