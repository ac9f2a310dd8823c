"""Lineage: the works from blockwise decoding to DFlash, the four questions answered by each, measured where run."""

from __future__ import annotations

import streamlit as st

from specviz.core.paths import REPO
from specviz.output.lineage import WORKS
from specviz.output.pages.lineage import PAGE
from specviz.output.viz.lineage import measured_values, node_caption
from specviz.output.viz.stored import merged_spec_bench
from ui.common import page_header
from ui.declared import draw
from ui.resources import measured_where

page_header(
    "Where the methods come from",
    "Each work after Medusa fixed one of its weak points. Which question did each one answer differently?",
)
merged, used = merged_spec_bench()
bench = merged if used else None
where = measured_where(used[0][1]) if used else ""
each = "; ".join(f"{', '.join(names)}: {measured_where(data)}" for _path, data, names in used)
draw(PAGE, "lineage", {"bench": bench, "where": where if len(used) == 1 else ""}, measured=each)
for path, data, names in used:
    st.caption(
        f"{', '.join(names)}: A and speedup, greedy, against plain decoding in the same run, "
        f"{data.get('prompts', '?')} Spec-Bench questions, stored in {path.relative_to(REPO)} "
        f"({measured_where(data)}); re-measure with `{data.get('command', '')}`."
    )
if used:
    st.caption("Hollow nodes are described from their papers and not run here.")
else:
    st.info("No stored Spec-Bench result in docs/bench: the works the app runs show no measurement yet.")
measured = measured_values(bench)
# a static table: its long cells wrap, so every column fits the page (a data grid cut the last one off)
st.table(
    [
        {
            "work": f"{w.name} ({w.year})",
            "where the drafts come from": w.drafts,
            "how candidates are organised": w.organised,
            "lossless?": w.lossless,
            "what the step spends": w.bound,
            "here": node_caption(w, measured).replace("<br>", "; "),
            "paper": f"arXiv:{w.arxiv}" if w.arxiv else "",
        }
        for w in WORKS
    ],
    hide_index=True,
)
