"""What a person reads for a method: its display name, and a figure relabelled from method ids to those names."""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

from specviz import methods


def display(name: str) -> str:
    """What a person reads for a method id: 'plain decoding', 'prompt lookup', 'EAGLE-2', … (its card's short name,
    else its label; an id no method has, as it is)."""
    if name not in methods.available():
        return name
    card = methods.card(name)
    return card.short or card.label


def _swap(value: Any, names: dict[str, str]) -> Any:
    """A label that starts with a method id, read with the method's display name ('ar  (32 tok)' → 'plain …')."""
    if isinstance(value, str):
        head, _sep, rest = value.partition(" ")
        if head in names:
            return names[head] + (f" {rest}" if rest else "")
        return value
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, str) for v in value):
        # only a list of method names (a categorical axis), never tokens that happen to spell one
        return [_swap(v, names) for v in value] if all(v.partition(" ")[0] in names for v in value) else value
    return value


def relabel(fig: go.Figure) -> go.Figure:
    """The figure with display names wherever a trace, a category or a tick names a method by its id."""
    names = {m: display(m) for m in methods.MODULES}  # the method table, once per figure (not once per label)
    d = fig.to_dict()
    for trace in d.get("data", []):
        for key in ("name", "x", "y", "legendgroup"):
            if key in trace:
                trace[key] = _swap(trace[key], names)
    for note in d.get("layout", {}).get("annotations", []):
        if str(note.get("text", "")).partition(" ")[0] in names:
            note["text"] = _swap(note["text"], names)
    for key, axis in d.get("layout", {}).items():
        if key.startswith(("xaxis", "yaxis")) and isinstance(axis, dict):
            for k in ("ticktext", "categoryarray"):
                if k in axis:
                    axis[k] = _swap(axis[k], names)
    return go.Figure(d)
