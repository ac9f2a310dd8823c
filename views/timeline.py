"""Timeline: every method's forward passes on one wall-clock axis, racing on the same prompt."""

from __future__ import annotations

import streamlit as st

from specviz import methods
from specviz.core import measure
from specviz.output.pages.timeline import LANES, PAGE
from ui.common import download_traces, page_header, settings
from ui.declared import draw
from ui.resources import replayed, replaying, run_race, same_tokens

page_header(
    "Serial versus parallel",
    "Each bar is one forward pass of the target model, as long as it really "
    "took; orange is proposing, black is accepting. Plain decoding commits one token per bar; the others commit "
    "several.",
)

names = [n for n in methods.available() if n != "ar"]
if replaying():
    names = [n for n in names if replayed(n) is not None]
chosen = st.multiselect(
    "Methods (plain decoding is always the first lane)",
    names,
    default=[n for n in LANES if n in names] or names[:2],
    key="timeline.methods",
)
s = settings()
traces = run_race(chosen, s)
if traces:
    lanes = {t.method: t for t in traces}
    draw(PAGE, "timeline_race", lanes, play=True)
    end_ms = int(1000 * max(measure.generation_s(t) for t in traces)) + 1
    st.slider("Freeze the lanes at t (ms)", 0, end_ms, end_ms, key="timeline.upto")
    draw(PAGE, "timeline_at", lanes)  # frozen at the slider's time
    draw(PAGE, "tokens_over_time", lanes)
    st.dataframe(
        [
            {
                "method": t.method,
                "tokens": t.new_tokens,
                "forward passes": len(t.steps),
                "A": round(t.mean_accepted, 2),
                "generation ms": round(1000 * measure.generation_s(t)),
                "same tokens as ar": same_tokens(traces[0], t),
            }
            for t in traces
        ],
        hide_index=True,
    )
    st.caption(
        "One run of each method, in the order of the lanes, after a short untimed warm-up run of every lane, so "
        "no lane's prefill pays the first-run costs. For speedups with their spread over interleaved repeats, "
        "see Compare."
    )
    download_traces(traces, "timeline_runs")
