"""The page's slide deck: every figure the page drew in this run, as a .pptx with the provenance in the notes."""

from __future__ import annotations

import json
from typing import Any

import plotly.graph_objects as go
import streamlit as st

from specviz.core.measure import provenance
from specviz.core.trace import Trace

# this run's figures (name, figure, where a stored one was measured: "" for this session's runs) and traces
FIGURES, TRACES = "deck.figures", "deck.traces"


def reset() -> None:
    """Forget the last run's figures and traces (the sidebar calls this first, every run)."""
    st.session_state[FIGURES] = []
    st.session_state[TRACES] = {}


def note_figure(name: str, fig: go.Figure, measured: str = "") -> None:
    """Keep a drawn figure for the deck; `measured`: a stored figure's own provenance (Provenance.describe())."""
    st.session_state.setdefault(FIGURES, []).append((name, fig, measured))


def note_traces(traces: list[Trace]) -> None:
    st.session_state.setdefault(TRACES, {}).update({t.method: t for t in traces})


def _settings(traces: dict[str, Trace]) -> dict[str, Any]:
    """The notes' settings: the prompt, then each method's settings as its trace recorded them."""
    out: dict[str, Any] = {}
    if traces:
        first = next(iter(traces.values()))
        out["Prompt"] = first.prompt if len(first.prompt) <= 300 else first.prompt[:300] + "…"
    for name, t in traces.items():
        out[f"Settings ({name})"] = json.dumps(t.config, sort_keys=True)
    return out


def build(page: str, figures: list[tuple], traces: dict[str, Trace], where: tuple[str, str, bool]):
    """The deck's bytes (run when the button is pressed, outside the script: it reads no session state).

    `figures`: (name, figure) or (name, figure, where a stored one was measured); a stored figure's notes give its
    own provenance, the others this session's."""
    from specviz.output.deck import deck_bytes, notes_text, slides_of

    model, device, live = where
    notes = notes_text(provenance(device), model, {"Page": page, **_settings(traces)}, live=live)
    stored = {f[0]: f[2] for f in figures if len(f) > 2 and f[2]}
    return deck_bytes(slides_of({f[0]: f[1] for f in figures}, notes, stored))
