"""Lookahead & Jacobi: drafts from the model's own Jacobi iterations, no draft model, no training."""

from __future__ import annotations

import streamlit as st

from specviz.core import measure
from specviz.methods import jacobi, lookahead
from specviz.output.lesson_step import focus_step, telling
from specviz.output.viz.jacobi import jacobi_grid_figure
from specviz.output.viz.lookahead import (
    final_pool,
    mask_figure,
    pool_figure,
    sweep_figure,
    verify_figure,
    window_figure,
)
from specviz.output.viz.tree import steps_figure
from specviz.tuning.sweep import LOOKAHEAD_PATH
from ui.common import download_traces, page_header, run_method, settings, show_figure
from ui.lesson_pack import step_rule
from ui.live import measured_where, median_pair, repeats_control, run_paired, same_tokens, speedup_metric
from ui.method_page import pick_step, stored_sweep
from ui.presentation import controls
from ui.presets import preset_control, preset_costs

DEF = lookahead.Config()

page_header(
    "Lookahead & Jacobi decoding",
    "Where do drafts come from without a draft model? From the model's "
    "own Jacobi iterations: guess ahead, refine in parallel, keep the n-grams the trajectory leaves.",
)

preset_control("lookahead", "lookahead")  # sets W, N and G
box = controls()
c1, c2, c3, c4 = box.columns(4)
w = c1.slider("W: window columns", 1, 12, key="lookahead.window")
n = c2.slider("N: n-gram length", 2, 6, key="lookahead.ngram")
g = c3.slider("G: n-grams verified", 0, 8, key="lookahead.guesses")
init = c4.selectbox("Initial guesses", jacobi.INIT_SOURCES, jacobi.INIT_SOURCES.index(DEF.init), key="lookahead.init")
seed = box.toggle("Seed the pool with the prompt's n-grams", DEF.seed_prompt, key="lookahead.seed_prompt")
repeats = repeats_control("lookahead", box)
cfg = lookahead.Config(window=w, ngram=n, guesses=g, init=init, seed_prompt=seed)
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
    work = [x.index for x in la.steps if x.detail is not None]
    drawn = [x for x in la.steps if x.detail is not None]
    start = (
        drawn.index(focus_step(telling(drawn), step_rule()) or drawn[0]) if drawn else 0
    )  # the longest accepted path
    k = pick_step("lookahead", len(work), default=start, run=f"{cfg}{s}{la.total_s}{step_rule()}")
    if work:
        d = la.steps[work[k]].detail
        show_figure(steps_figure(la, ar, current=work[k]), "lookahead_steps")
        show_figure(
            window_figure(d, title=f"Step {work[k]}: the Jacobi window and the n-grams it harvests"), "lookahead_window"
        )
        left, right = st.columns(2)
        with left:
            show_figure(
                verify_figure(d, title=f"Verification branch: root {la.steps[work[k]].texts[0]!r}"), "lookahead_verify"
            )
        with right:
            show_figure(mask_figure(d.layout, title="One forward, two branches: the attention mask"), "lookahead_mask")
        pool = final_pool(la)
        if pool:
            show_figure(pool_figure(pool, title="The n-gram pool at the end: largest keys and hits"), "lookahead_pool")
    download_traces([ar, la], "lookahead_runs")
preset_costs("lookahead", "lookahead", cfg, s, repeats)

st.subheader("Plain Jacobi iteration")
j1, j2 = st.columns(2)
jn = j1.slider("Guesses per pass", 1, 16, jacobi.Config().guesses, key="lookahead.jacobi_guesses")
jinit = j2.selectbox("Jacobi initial guesses", jacobi.INIT_SOURCES, key="lookahead.jacobi_init")
jac = run_method("jacobi", jacobi.Config(guesses=jn, init=jinit), s)
if jac is not None:
    rows = [x.index for x in jac.steps if x.detail is not None]
    upto = pick_step("lookahead", len(rows), "Pass", "jacobi_pass", default=8, run="", arrows=False)
    show_figure(
        jacobi_grid_figure(
            jac,
            upto=rows[upto] if rows else None,
            title=f"Jacobi convergence: A = {jac.mean_accepted:.2f} tokens per pass",
        ),
        "jacobi_grid",
    )

sweep, unreadable = stored_sweep(LOOKAHEAD_PATH)
if unreadable:
    st.warning(
        f"The window sweep could not be read ({unreadable}); re-measure with `specviz.tuning.sweep.write_lookahead()`."
    )
if sweep is not None:
    where = measured_where(sweep)
    show_figure(sweep_figure(sweep, title=f"Where a wider window stops paying ({where})"), "lookahead_sweep", where)
    st.caption(sweep.get("note", ""))
