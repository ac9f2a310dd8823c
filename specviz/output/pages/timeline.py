"""The Timeline page: every method's forward passes on one clock, plain decoding first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import plotly.graph_objects as go

from specviz import methods
from specviz.core.trace import Trace
from specviz.output.pages.page import Control, Figure, Page, Shown

LANES = ("medusa", "eagle", "lookahead", "pld")  # the page's default lanes besides plain decoding
CONTROLS = (Control("timeline.methods", "methods"),)


def runs(values: dict[str, Any], _figure: str, _shows: Sequence[str]) -> tuple[dict[str, Any], float | None]:
    return {n: methods.make_config(n) for n in values.get("timeline.methods", LANES)}, None


def lanes(traces: dict[str, Trace]) -> list[Trace]:
    """Plain decoding's lane first, then the others in their order."""
    if "ar" not in traces:
        return list(traces.values())
    return [traces["ar"], *(t for n, t in traces.items() if n != "ar")]


def race(traces: dict[str, Trace], shown: Shown) -> go.Figure:
    """The race on one clock: played on the page (`timeline.play`), finished (a slide cannot play it), or frozen
    at the page's `timeline.upto` ms."""
    from specviz.output.viz.timeline import race_title, timeline_animation, timeline_figure

    if shown.values.get("timeline.play"):
        return timeline_animation(lanes(traces), title="The race on one clock: press ▶ to replay it")
    upto = shown.values.get("timeline.upto")
    if upto is None:
        return timeline_figure(lanes(traces), title=race_title(lanes(traces)))
    return timeline_figure(lanes(traces), upto_s=upto / 1000, title=f"All lanes at t = {upto} ms")


def tokens(traces: dict[str, Trace], _shown: Shown) -> go.Figure:
    from specviz.output.viz.timeline import tokens_over_time_figure

    return tokens_over_time_figure(lanes(traces))


FIGURES = (Figure("timeline_race", race), Figure("timeline_at", race), Figure("tokens_over_time", tokens))
PAGE = Page("timeline", "Timeline", CONTROLS, runs, FIGURES, icon=":material/timeline:")
