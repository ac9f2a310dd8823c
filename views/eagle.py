"""EAGLE-2: a one-layer head drafts features; a dynamic tree grows by confidence and is verified in one pass."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, replace
from functools import partial
from statistics import median

import streamlit as st

from specviz.core.details import EagleDetail, HybridDetail
from specviz.core.trace import StepTrace, Trace
from specviz.heads.dflash import DEFAULT_DIR as DFLASH_DIR
from specviz.heads.dflash import KIND as DFLASH_KIND
from specviz.heads.dflash import read_config as read_dflash
from specviz.heads.eagle import DEFAULT_DIR, HeadError, read_config
from specviz.heads.eagle3 import DEFAULT_DIR as EAGLE3_DIR
from specviz.heads.eagle3 import check_fits
from specviz.heads.eagle3 import read_config as read_eagle3
from specviz.output.pages.eagle import PAGE
from specviz.tuning.sweep import EAGLE_PATH as SWEEP_PATH
from ui import live, resources
from ui.common import page_header, run_method, settings
from ui.declared import configs, draw, widget
from ui.method_page import Beside, at_temperature, beside, focused_step, main_run, need, step_caption, stored_sweep
from ui.presentation import controls
from ui.presets import preset_control, preset_costs
from ui.resources import get_model, measured_where, repeats_control, replaying, run_paired, same_tokens, speedup_metric

TOTAL_HELP = "The GPU reference verifies 60; on 2 CPU cores verify cost grows fast with the node count, so fewer win."
TEMPERATURE_HELP = "0 = greedy matching; > 0 = tree speculative sampling"
TREE_HELP = "dynamic = EAGLE-2 (expand by confidence, rerank); static = EAGLE-1's fixed shape"
E3_HELP = "EAGLE-3's head on the same tree, in the same runs"
BUDGET_HELP = (
    "Above 0, each step keeps this many nodes, more only where the head's calibrated path acceptance reaches the "
    "node floor (up to total_tokens), and drafts another round only while its best frontier node reaches the depth "
    "floor (up to depth); the head's confidence table is measured on unseen prompts."
)
POOL_HELP = "The same head and tree, with the text's own n-gram continuations grafted on, in the same runs"
DF_HELP = "A block drafter that fills its whole block in one pass, at the block fitted to this device, in the same runs"

page_header(
    "EAGLE-2: draft features, grow the tree where the draft is confident",
    "Where do drafts come from (a one-layer head fed the last feature AND the chosen token), how are "
    "they organised (a tree grown by confidence, then reranked), is acceptance lossless (yes), and "
    "what does a step cost here?",
)

head_cfg = need(lambda: read_config(DEFAULT_DIR), HeadError)

s = settings()
preset_control("eagle", "eagle")  # sets the shape sliders' and the tree's values
c1, c2, c3 = controls().columns(3)
widget(c1, PAGE, "eagle.depth", "depth (draft rounds)")
widget(c1, PAGE, "eagle.top_k", "top_k (expanded per round)")
widget(c2, PAGE, "eagle.total_tokens", "total_tokens (verified nodes, root included)", help=TOTAL_HELP)
t0 = s.sampling.temperature if s else 0.0
temperature = widget(c2, PAGE, "eagle.temperature", "Temperature", value=t0, step=0.05, help=TEMPERATURE_HELP)
tree_kind = widget(c3, PAGE, "eagle.tree", "Tree", help=TREE_HELP)
repeats = repeats_control("eagle", c3)
b1, b2, b3 = controls().columns(3)
widget(
    b1,
    PAGE,
    "eagle.min_tokens",
    "Confidence budget: least nodes (0 = fixed)",
    help=BUDGET_HELP,
)
widget(b2, PAGE, "eagle.node_floor", "a further node joins at path acceptance ≥", value=0.2, step=0.05)
widget(b3, PAGE, "eagle.depth_floor", "another round runs while the best path acceptance ≥", value=0.3, step=0.05)
try:
    e3_cfg = read_eagle3(EAGLE3_DIR)
    if (lm := get_model()) is not None and not replaying():  # a head for another model must not stop EAGLE-2's run
        check_fits(e3_cfg, lm.hf.config, EAGLE3_DIR)
except HeadError as exc:
    e3_cfg, e3_missing = None, str(exc)
with_e3 = e3_cfg is not None and widget(c3, PAGE, "eagle.eagle3", "Run EAGLE-3 beside it", value=True, help=E3_HELP)
with_pool = widget(c3, PAGE, "eagle.hybrid", "Run EAGLE-2 + n-gram pool beside it", value=True, help=POOL_HELP)
try:
    df_cfg = read_dflash(DFLASH_DIR)
    if (lm := get_model()) is not None and not replaying():  # a drafter for another model must not stop EAGLE-2's
        check_fits(df_cfg, lm.hf.config, DFLASH_DIR, DFLASH_KIND)
except HeadError as exc:
    df_cfg, df_missing = None, str(exc)
with_df = df_cfg is not None and widget(c3, PAGE, "eagle.dflash", "Run DFlash beside it", value=True, help=DF_HELP)
cfgs = configs(PAGE, shows=("hybrid",) if with_pool else (), eagle3=with_e3, dflash=with_df)  # EAGLE-2 and beside
cfg = cfgs["eagle"]
other = replace(cfg, tree="static" if tree_kind == "dynamic" else "dynamic", min_tokens=0)
s = at_temperature(s, temperature)
runs = run_paired(cfgs, s, repeats)
alt = run_method("eagle", other, s)
ar, trace = main_run(runs, "eagle")
m = st.columns(5)
m[0].metric(
    f"A ({tree_kind})",
    f"{trace.mean_accepted:.2f}",
    help="New tokens ÷ target forward passes; the target's own (bonus) token counts.",
)
if alt is not None:
    m[1].metric(f"A ({other.tree})", f"{alt.mean_accepted:.2f}")
if ar is not None:
    speedup_metric(
        m[2],
        runs,
        "eagle",
        "Speedup vs ar",
        "Generation time of plain decoding (ar) over EAGLE's (prefill + steps), runs interleaved after "
        "a warm-up: the median ratio and its range.",
    )
    m[3].metric(
        "Same tokens as ar",
        same_tokens(ar, trace),
        help="At T = 0 greedy matching must give identical tokens; at T > 0 the distribution is kept, "
        "not the exact tokens.",
    )
drafted = trace.drafted_steps
if drafted:
    propose_ms, verify_ms = (1000 * median(getattr(x, f) for x in drafted) for f in ("propose_s", "verify_s"))
    m[4].metric(  # the share fits a fifth of the page; the two times go beneath
        "Propose / verify",
        f"{propose_ms / max(verify_ms, 1e-9):.0%}",
        help="Proposing (the head drafting its tree) as a share of verifying time per step: medians over this "
        "run's drafting steps, so a slow first step (kernels warming up) does not dominate.",
    )
    m[4].caption(f"{propose_ms:.1f} ms proposing, {verify_ms:.0f} ms verifying (medians)")
draw(PAGE, "eagle_steps", {"eagle": trace, "ar": ar})


def show_verified(method: str, run: Trace, step: StepTrace) -> None:
    """A step's verified tree (accepted path highlighted) beside its tree-attention mask."""
    left, right = st.columns([3, 2])
    with left:
        draw(PAGE, f"{method}_verify", {method: run}, step.index)
    with right:
        draw(PAGE, f"{method}_mask", {method: run}, step.index)


if drafted:
    i = focused_step("eagle", drafted, trace)
    step = drafted[i]
    d = step.detail_as(EagleDetail)
    step_caption(step, f"drafted {len(d.tree['tokens']) - 1} nodes")
    stages = [f"round {r}" for r in range(1, max(d.tree["depth"]) + 1)] + ["rerank + verify"]
    st.select_slider("Grow the tree", stages, value=stages[-1], key="eagle.stage")
    draw(PAGE, "eagle_growth", {"eagle": trace}, step.index)  # at the stage chosen
    show_verified("eagle", trace, step)
    draw(PAGE, "eagle_features", {"eagle": trace}, step.index)
    st.caption(
        "A Medusa head reads f_t alone and must guess x_t+2 without knowing which x_t+1 the target "
        "picked (right: the alternatives). EAGLE's head also gets the embedding of the token that was "
        "picked, so its prediction of the next feature need not hedge across branches."
    )
    if replaying():  # re-growing runs the model on the trace's tokens: never on an uploaded trace's
        st.caption("Static against dynamic trees on this step's context: not while traces are loaded.")
    elif (lm := get_model()) is not None:
        key = json.dumps([asdict(cfg), s.model_spec if s else "", hashlib.sha256(trace.to_json().encode()).hexdigest()])
        context = len(trace.prompt_ids) + len(trace.output_ids)  # at most: the step's context
        regrow = partial(resources.regrown, key, step.index, lm, trace, cfg)
        if both := live.one_pass(lm, live.signature(key, step.index), "re-growing both trees", context, regrow):
            draw(PAGE, "eagle_static_vs_dynamic", {"regrown": both})
    draw(PAGE, "eagle_tokens", {"eagle": trace}, step.index)
draw(PAGE, "eagle_costs", {"eagle": trace})
preset_costs("eagle", "eagle", cfg, s, repeats)
sweep, unreadable = stored_sweep(SWEEP_PATH)
try:
    if unreadable:
        raise ValueError(unreadable)
    if sweep is not None:
        where = measured_where(sweep)
        draw(PAGE, "eagle_sweep", {"sweep": sweep, "where": where}, measured=where)
        st.caption(f"{sweep.get('note', '')} Re-measure with `{sweep.get('command', '')}`.")
except (ValueError, KeyError, TypeError) as exc:
    st.warning(f"{SWEEP_PATH} could not be read ({exc}); re-measure with `python -m specviz calibrate eagle --live`.")
with st.expander("How this head was trained"):
    st.json(head_cfg.train or {"note": "no training record"})

st.subheader("EAGLE-3 beside EAGLE-2: fused features, trained on its own drafts")
st.caption(
    "EAGLE-3's head reads the inputs of a low, a middle and a high layer of the target instead of the final "
    "feature alone, predicts tokens rather than features, and is trained with training-time test: unrolled on "
    "its own outputs, as it will be when it drafts deeper than one token. Same tree, same prompt, same runs."
)
if e3_cfg is None:
    st.info(f"EAGLE-3 is not available here: {e3_missing}")
else:
    top1 = [row[0] for row in head_cfg.calibration], [row[0] for row in e3_cfg.calibration]
    k = min(len(top1[0]), len(top1[1]))
    draw(PAGE, "eagle3_accuracy", {"top1": {"eagle": top1[0][:k], "eagle3": top1[1][:k]}})


def beside_eagle(name: str, label: str, whose: str) -> Trace:
    """A method run beside EAGLE-2 in the same runs: its median run, with A, speedup and identity under EAGLE-2's."""
    speed_help = f"{whose} runs interleaved with EAGLE-2's and ar's."
    names = Beside(f"A, EAGLE-2 → {label}", "same tree", f"{whose} speedup", speed_help, "Same tokens as ar")
    return beside(runs, ar, trace, name, names)


if "eagle3" in runs:
    t3 = beside_eagle("eagle3", "EAGLE-3", "EAGLE-3's")
    if t3.drafted_steps:
        lm = get_model()  # None while traces are loaded
        layers = int(getattr(lm.hf.config, "num_hidden_layers", 30)) if lm is not None else 30
        draw(PAGE, "eagle3_fusion", {"eagle3": t3}, layers=layers)  # its own step, by the step rule

st.subheader("DFlash beside EAGLE-3: a whole block drafted in one pass")
st.caption(
    "EAGLE-3's head drafts one tree level per round, each round waiting for the one before. DFlash's drafter reads "
    "the same fused layers as context and fills a whole block of masked positions at once, with no causal mask "
    "among them: one pass, however long the block. The target verifies the block as a chain, so one early miss "
    "ends it. Block drafted here at the size fitted to this device."
)
if df_cfg is None:
    st.info(f"DFlash is not available here: {df_missing}")
elif "dflash" not in runs:
    st.info("Turn on *Run DFlash beside it* above to run it on this prompt, in the same runs.")
else:
    td = beside_eagle("dflash", "DFlash", "DFlash's")
    if "eagle3" in runs:
        draw(PAGE, "dflash_drafting", {"eagle3": t3, "dflash": td})
    draw(PAGE, "dflash_blocks", {"dflash": td})
    draw(PAGE, "dflash_positions", {"dflash": td})
    top1 = [round(row[0], 3) for row in df_cfg.calibration]
    st.caption(
        f"Held-out top-1 of the drafter by block position, measured when it was trained: {top1}. Each position "
        "is guessed without knowing the drafts before it, so the later ones fall faster than EAGLE's depths."
    )

st.subheader("EAGLE-2 + n-gram pool: the text's own n-grams in the head's tree")
st.caption(
    "The same head drafts the same tree; then the continuation of the context's last n-gram, found earlier in "
    "the prompt or the output, is grafted on in place of the weakest leaves, and one forward verifies both. "
    "Once a step accepts 3 of the pool's tokens the text is being copied, and the next step verifies the "
    "pool's chain alone (a copy step: the head drafts nothing) until a copy falls short."
)
if "hybrid" not in runs:
    st.info("Turn on *Run EAGLE-2 + n-gram pool beside it* above to run it on this prompt, in the same runs.")
else:
    th = beside_eagle("hybrid", "with the pool", "Its")
    draw(PAGE, "hybrid_origins", {"hybrid": th})
    pooled = th.drafted_steps
    if pooled:
        busiest = max(range(len(pooled)), key=lambda j: (pooled[j].accepted, -j))
        j = st.slider("Step of the hybrid", 0, len(pooled) - 1, busiest, key="eagle.hybrid_step") if pooled[1:] else 0
        hs = pooled[j]
        hd = hs.detail_as(HybridDetail)
        how = "a copy step: the pool's chain verified alone" if hd.copy else f"{hd.sources.count('pool')} pool node(s)"
        st.caption(f"Step {hs.index}: committed {hs.accepted} token(s) {hs.texts!r} · {how}")
        draw(PAGE, "hybrid_tree", {"hybrid": th}, hs.index)
        show_verified("hybrid", th, hs)
