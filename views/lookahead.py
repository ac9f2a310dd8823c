"""Lookahead & Jacobi: drafts from the model's own Jacobi iterations, no draft model, no training."""

from __future__ import annotations

import streamlit as st

from specviz.core import measure
from specviz.methods import jacobi, lookahead
from specviz.methods.jacobi import INIT_SOURCES
from specviz.output.focus import focus_step, telling
from specviz.output.pages.lookahead import PAGE
from specviz.output.viz.lookahead import final_pool
from specviz.tuning.sweep import LOOKAHEAD_PATH
from ui.common import download_traces, page_header, run_method, settings
from ui.declared import configs, draw, widget
from ui.lesson_pack import step_rule
from ui.method_page import pick_step, stored_sweep
from ui.presentation import controls
from ui.presets import preset_control, preset_costs
from ui.resources import measured_where, median_pair, repeats_control, run_paired, same_tokens, speedup_metric

DEF = lookahead.Config()

page_header(
    "Lookahead & Jacobi decoding",
    "Where do drafts come from without a draft model? From the model's "
    "own Jacobi iterations: guess ahead, refine in parallel, keep the n-grams the trajectory leaves.",
)

preset_control("lookahead", "lookahead")  # sets W, N and G
box = controls()
c1, c2, c3, c4 = box.columns(4)
widget(c1, PAGE, "lookahead.window", "W: window columns")
widget(c2, PAGE, "lookahead.ngram", "N: n-gram length")
widget(c3, PAGE, "lookahead.guesses", "G: n-grams verified")
widget(c4, PAGE, "lookahead.init", "Initial guesses", "selectbox", index=INIT_SOURCES.index(DEF.init))
widget(box, PAGE, "lookahead.seed_prompt", "Seed the pool with the prompt's n-grams", value=DEF.seed_prompt)
repeats = repeats_control("lookahead", box)
cfg = configs(PAGE)["lookahead"]
st.caption(f"One forward feeds 1 + (N−1)·W + G·(N−1) = **{cfg.forward_tokens} tokens** once the window is full.")

s = settings()
runs = run_paired({"lookahead": cfg}, s, repeats)
if "ar" in runs and "lookahead" in runs:
    ar, la = median_pair(runs, "lookahead")
    paired = measure.paired(runs["ar"][: len(runs["lookahead"])], runs["lookahead"])
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("A (tokens per forward)", f"{la.mean_accepted:.2f}")
    speedup_metric(
        m2,
        runs,
        "lookahead",
        "Speedup vs ar",
        "Generation time of plain decoding over lookahead's (prefill + steps), runs interleaved "
        "after a warm-up: the median ratio and its range.",
    )
    m3.metric("Step cost r", f"{paired['r'].median:.2f}")
    m4.metric("Same tokens as ar", same_tokens(ar, la))
    drawn = la.drafted_steps
    work = [x.index for x in drawn]
    start = (
        drawn.index(focus_step(telling(drawn), step_rule()) or drawn[0]) if drawn else 0
    )  # the longest accepted path
    k = pick_step("lookahead", len(work), default=start, run=f"{cfg}{s}{la.total_s}{step_rule()}")
    if work:
        lanes = {"lookahead": la, "ar": ar}
        draw(PAGE, "lookahead_steps", lanes, work[k])
        draw(PAGE, "lookahead_window", lanes, work[k])
        left, right = st.columns(2)
        with left:
            draw(PAGE, "lookahead_verify", lanes, work[k])
        with right:
            draw(PAGE, "lookahead_mask", lanes, work[k])
        if final_pool(la):
            draw(PAGE, "lookahead_pool", {"lookahead": la})
    download_traces([ar, la], "lookahead_runs")
preset_costs("lookahead", "lookahead", cfg, s, repeats)

st.subheader("Plain Jacobi iteration")
j1, j2 = st.columns(2)
widget(j1, PAGE, "lookahead.jacobi_guesses", "Guesses per pass", value=jacobi.Config().guesses)
widget(j2, PAGE, "lookahead.jacobi_init", "Jacobi initial guesses", "selectbox")
jac = run_method("jacobi", configs(PAGE, "jacobi_grid")["jacobi"], s)
if jac is not None:
    rows = [x.index for x in jac.drafted_steps]
    upto = pick_step("lookahead", len(rows), "Pass", "jacobi_pass", default=8, run="", arrows=False)
    draw(PAGE, "jacobi_grid", {"jacobi": jac}, upto)

sweep, unreadable = stored_sweep(LOOKAHEAD_PATH)
if unreadable:
    st.warning(
        f"The window sweep could not be read ({unreadable}); re-measure with `specviz.tuning.sweep.write_lookahead()`."
    )
if sweep is not None:
    where = measured_where(sweep)
    draw(PAGE, "lookahead_sweep", {"sweep": sweep, "where": where}, measured=where)
    st.caption(sweep.get("note", ""))
