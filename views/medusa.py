"""Medusa: heads guess ahead, a sparse candidate tree is verified in one pass with a tree-attention mask."""

from __future__ import annotations

import streamlit as st

from specviz.core.details import MedusaDetail
from specviz.heads import hydra as hydra_heads
from specviz.heads.medusa import HeadsError, load_calibration, models_dir, read_config
from specviz.methods.medusa import Config
from specviz.output.pages.medusa import PAGE
from specviz.output.viz.depth import starts, step_at
from ui.common import page_header, settings
from ui.declared import configs, draw, widget
from ui.method_page import (
    Beside,
    at_temperature,
    beside,
    focused_step,
    main_run,
    need,
    optional,
    recorded_predicted,
    step_caption,
    stored_sweep,
)
from ui.presentation import controls
from ui.presets import preset_control, preset_costs
from ui.resources import measured_where, repeats_control, run_paired, same_tokens, speedup_metric

TOTAL_HELP = "Tokens verified in one target forward, the root included: total_tokens − 1 drafted nodes"
TEMPERATURE_HELP = "0 = greedy; typical acceptance needs T > 0 to differ"
ACCEPTANCE_HELP = (
    "exact: lossless (argmax match at T = 0, tree rejection sampling at T > 0); "
    "typical: p(x) > min(ε, δ·e^(−H)), lossy by design"
)

page_header(
    "Medusa: a tree of guesses, checked in one pass",
    "Where do drafts come from (heads on the last hidden state), how are they organised (a sparse "
    "tree), is acceptance lossless (greedy: yes; typical: no), and what does a step cost here?",
)

trained, acc = need(lambda: (read_config(models_dir()), load_calibration()), HeadsError)

s = settings()
preset_control("medusa", "medusa", clamp={"heads": (1, trained.num_heads)})  # sets the two sliders' values
c1, c2, c3 = controls().columns(3)
total = widget(c1, PAGE, "medusa.total_tokens", "Tree size (total_tokens)", help=TOTAL_HELP)
heads = c1.slider("Heads", 1, trained.num_heads, key="medusa.heads")
widget(c2, PAGE, "medusa.acceptance", "Acceptance", help=ACCEPTANCE_HELP)
t0 = min(1.5, s.sampling.temperature) if s else 0.0
temperature = widget(c2, PAGE, "medusa.temperature", "Temperature", value=t0, step=0.05, help=TEMPERATURE_HELP)
widget(c3, PAGE, "medusa.eps", "ε (typical)", value=Config.eps, step=0.01)
widget(c3, PAGE, "medusa.delta", "δ (typical)", value=Config.delta, step=0.05)
repeats = repeats_control("medusa", c3)
hydra, hydra_missing = optional(
    lambda: (hydra_heads.load_calibration(), hydra_heads.read_config(hydra_heads.models_dir())), HeadsError
)
hydra_acc, hydra_trained = hydra or (None, None)
HYDRA_HELP = "Hydra's heads at the same tree size, interleaved in the same runs"
with_hydra = hydra_trained is not None and widget(c2, PAGE, "medusa.hydra", "Run Hydra beside it", value=True,
                                                  help=HYDRA_HELP)  # fmt: skip
PAIR_HELP = "Lookahead's window and n-gram pool added to the same heads' tree, interleaved in the same runs"
with_pool = widget(c3, PAGE, "medusa.lookahead", "Run Medusa + Lookahead beside it", value=True, help=PAIR_HELP)
cfgs = configs(PAGE, hydra=with_hydra, lookahead=with_pool)  # Medusa, and the methods beside it
cfg, hydra_k = cfgs["medusa"], cfgs["hydra"].heads if "hydra" in cfgs else heads
s = at_temperature(s, temperature)
runs = run_paired(cfgs, s, repeats)
ar, trace = main_run(runs, "medusa")
steps = trace.drafted_steps
m1, m2, m3, m4 = st.columns(4)
m1.metric(
    "A (tokens per forward pass)",
    f"{trace.mean_accepted:.2f}",
    help="New tokens ÷ target forward passes; the target's own (bonus) token counts.",
)
predicted = recorded_predicted(steps)  # the run's own: 1 + Σ path weights of its tree (calibration)
m2.metric("Predicted A", "–" if predicted is None else f"{predicted:.2f}", help="1 + Σ path weights (calibration)")
if ar is not None:
    speedup_metric(
        m3,
        runs,
        "medusa",
        "Speedup vs plain decoding",
        "Generation time of plain decoding over Medusa's (prefill + steps), runs interleaved after a "
        "warm-up: the median ratio and its range.",
    )
    m4.metric(
        "Same tokens as plain decoding",
        same_tokens(ar, trace),
        help="Greedy acceptance at T = 0 must give identical tokens; at T > 0 identity says nothing.",
    )

if steps:
    i = focused_step("medusa", steps, trace)
    step = steps[i]
    d = step.detail_as(MedusaDetail)
    step_caption(step, f"predicted {d.predicted:.2f}, measured {d.measured}")
    left, right = st.columns([3, 2])
    with left:
        draw(PAGE, "medusa_tree", {"medusa": trace}, step.index)
    with right:
        draw(PAGE, "medusa_mask", {"medusa": trace}, step.index)
    draw(PAGE, "medusa_tokens", {"medusa": trace}, step.index)
    with st.expander("Every node of this step"):
        st.dataframe(
            [
                {
                    "node": j,
                    **{k: n[k] for k in ("text", "head", "rank", "head_prob", "target_prob", "status", "reason")},
                }
                for j, n in enumerate(d.nodes)
            ],
            hide_index=True,
        )
draw(PAGE, "medusa_steps", {"medusa": trace, "ar": ar})
preset_costs("medusa", "medusa", cfg, s, repeats)

st.subheader("Medusa against Hydra: what independent heads give away")
st.caption(
    "Medusa's head k guesses the token k+1 places ahead from the last hidden state alone, so it cannot know "
    "what heads 1…k−1 chose on its branch. Hydra's head k also reads the embeddings of the k tokens above its "
    "node (the root and the guesses on the path), and fills the same kind of sparse tree at the same size."
)
if hydra_acc is None:
    st.info(f"Hydra is not available here: {hydra_missing}")
else:
    k = min(len(acc), len(hydra_acc))
    draw(PAGE, "hydra_accuracy", {"top1": {"medusa": [r[0] for r in acc[:k]], "hydra": [r[0] for r in hydra_acc[:k]]}})
if "hydra" in runs:
    names = Beside(
        "A, Medusa → Hydra",
        "same tree size",
        "Hydra's speedup",
        "Hydra's runs interleaved with Medusa's and plain decoding's.",
        "Same tokens as plain decoding",
    )
    htrace = beside(runs, ar, trace, "hydra", names)
    draw(PAGE, "hydra_depths", {"medusa": trace, "hydra": htrace})
    if steps:
        offset = starts(trace)[i]
        twin = step_at(htrace, offset)
        if twin is None:
            st.caption(f"Hydra has no step starting at output token {offset}: its steps fell elsewhere.")
        else:
            st.caption(f"Both methods' trees for the step that starts at output token {offset} (same context).")
            t1, t2 = st.columns(2)
            with t1:
                draw(PAGE, "medusa_twin", {"medusa": trace}, step.index)
            with t2:
                draw(PAGE, "hydra_twin", {"medusa": trace, "hydra": htrace}, step.index)

st.subheader("Medusa + Lookahead: the window's n-grams in the heads' tree")
st.caption(
    "The same heads fill the same sparse tree; Lookahead's pool then hangs the n-grams it holds for the root onto "
    "it (walking the heads' nodes where they agree), and its Jacobi window rides in the same forward beside the "
    "tree, seeing the root and its own columns only. The tree is judged as Medusa's is, so the output stays plain "
    "decoding's; the window's new level fills the pool for the steps after."
)
if "medusa_lookahead" not in runs:
    st.info("Turn on *Run Medusa + Lookahead beside it* above to run it on this prompt, in the same runs.")
else:
    names = Beside(
        "A, Medusa → with Lookahead",
        "same heads and tree",
        "Its speedup",
        "Medusa + Lookahead's runs interleaved with Medusa's and plain decoding's.",
        "Same tokens as plain decoding",
    )
    paired = beside(runs, ar, trace, "medusa_lookahead", names)
    p1, p2 = st.columns(2)
    with p1:
        draw(PAGE, "medusa_lookahead_origins", {"medusa_lookahead": paired})
    with p2:
        draw(PAGE, "medusa_lookahead_tree", {"medusa_lookahead": paired})

sw, unreadable = stored_sweep(models_dir() / "sweep.json")
if unreadable:
    st.warning(
        f"The tree-size sweep could not be read ({unreadable}); "
        "re-measure with `python -m specviz calibrate medusa --sweep`."
    )
if sw is not None:
    st.subheader("Why the best tree is small on the machine that measured it")
    swept = measured_where(sw)
    st.caption(f"The tree-size sweep was {swept}.")
    b1, b2 = st.columns(2)
    with b1:
        draw(PAGE, "medusa_budget", {"sweep": sw, "total": total}, measured=swept)
    with b2:
        draw(PAGE, "medusa_cost", {"sweep": sw}, measured=swept)
    st.caption(sw.get("note", ""))
costs = sw.get("head_ms", {}) if sw is not None else {}
where = measured_where(sw) if costs and sw is not None else ""
measured = (
    (
        f" {where[:1].upper()}{where[1:]}: {costs['draft_vocab']:.1f} ms per drafting call with the slice "
        f"against {costs['full_vocab']:.1f} ms with the full LM head."
    )
    if costs
    else ""
)
st.info(
    "**Why the heads project onto a slice of the LM head.** Each head ends in the model's own frozen LM "
    f"head (49,152 × 576, a fifth of the model's weights). The {trained.num_heads} heads share it in ONE "
    f"batched product over only the {trained.draft_vocab:,} most frequent continuation tokens, so drafting "
    f"stays small next to a forward pass.{measured}"
)
