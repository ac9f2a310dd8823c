"""Acceptance decisions: how each drafted token is judged, and which rules keep the output distribution exact."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

import streamlit as st

from specviz.core.acceptance import RULE_LABELS
from specviz.core.prompts import PromptError, prepare
from specviz.heads.draft import DraftError, cached_draft
from specviz.methods import sps
from specviz.output.pages.acceptance import PAGE
from specviz.output.viz.acceptance import records
from specviz.tuning.draft_sweep import SPS_PATH
from specviz.tuning.lossless import DRAFTS, LabConfig
from ui import live, resources
from ui.common import download_traces, page_header, run_method, settings
from ui.declared import configs, draw, widget
from ui.method_page import focused_step, stored_sweep
from ui.resources import Settings, get_model, measured_where, replaying

DEF = sps.Config()
DRAFT_LABELS = {"perturbed": "perturbed p", "layers": "first L layers", "trained": "trained draft"}  # fit a quarter
RUN_DRAFTS = {"trained": "trained draft model", "layers": "first L layers, untrained"}


def trained_draft_ready() -> bool:
    """Whether models/draft holds a draft this model can run (loaded once per model and kept)."""
    lm = get_model()
    if lm is None:
        return False
    try:
        cached_draft(lm)
    except DraftError:
        return False
    return True


def show_lab(res: dict) -> None:
    """The lab's figure and its table: each rule's distance from p, its test and the drafts it kept."""
    draw(PAGE, "acceptance_lab", {"lab": res})
    st.dataframe(
        [
            {
                "rule": r["label"],
                "TV distance": r["tv"],
                "exact TV": r["tv_exact"],
                "χ²": r["chi2"],
                "dof": r["dof"],
                "p-value": r["p_value"],
                "drafts kept": r["accept_rate"],
            }
            for r in res["rules"]
        ],
        hide_index=True,
    )


def decision_rows(records: list[dict]) -> list[dict]:
    return [
        {
            "pos": r["pos"] + 1,
            "token": repr(r.get("text", "")),
            "p(x)": r["p"],
            "q(x)": r["q"],
            "p/q": r["ratio"],
            "min(1, p/q)": min(1.0, r["ratio"]),
            "u": r.get("u"),
            "threshold": r.get("threshold"),
            "decision": "accept" if r["accepted"] else "reject",
        }
        for r in records
    ]


page_header(
    "Acceptance decisions",
    "Is acceptance lossless? Every drafted token is judged by the target p, the "
    "draft q and a uniform draw u; the lab samples each rule many times and compares with p.",
)
c1, c2, c3, c4 = st.columns(4)
rule = widget(c1, PAGE, "acceptance.rule", "Rule", "selectbox", format_func=RULE_LABELS.get)
temp = widget(c2, PAGE, "acceptance.temperature", "Temperature", value=0.8, step=0.05, help="0 = greedy matching")
ready = trained_draft_ready()
best = sps.swept_gamma() if ready else None
where = measured_where(stored_sweep(SPS_PATH)[0] or {})  # a load, flagged
gamma_help = f"Starts at γ = {best}, where the trained draft was fastest in its sweep on unseen prompts "
gamma_help += f"(models/draft/gamma_sweep.json, {where})."
value = min(best or sps.PREFIX_GAMMA, 8)
widget(c3, PAGE, "acceptance.gamma", "γ: drafted tokens per step", value=value, help=gamma_help if best else None)
draft_help = "The trained draft model (models/draft: layers started from the target's, distilled on its own answers) "
draft_help += "or the target's first L layers, untrained."
draft_help += "" if ready else " No trained draft for this model: train one with python -m specviz train draft."
only = list(RUN_DRAFTS) if ready else ["layers"]
run_draft = widget(c4, PAGE, "acceptance.draft", "Draft", "selectbox", only, format_func=RUN_DRAFTS.get,
                   help=draft_help)  # fmt: skip
depth = 4
if run_draft == "layers":
    depth = widget(c4, PAGE, "acceptance.depth", "Draft depth L (first layers)", value=4)
c5, c6, c7, c8 = st.columns(4)
eps = widget(c5, PAGE, "acceptance.eps", "ε (typical)", value=DEF.eps, step=0.01)
delta = widget(c6, PAGE, "acceptance.delta", "δ (typical)", value=DEF.delta, step=0.01)
n = widget(c7, PAGE, "acceptance.samples", "N: lab samples per rule", "select_slider", value=20000)
lab_help = "perturbed p: p flattened and jittered, a plausible weaker model; first L layers: as sps drafts untrained; "
lab_help += "trained draft: models/draft."
only = [d for d in DRAFTS if ready or d != "trained"]
lab_draft = widget(c8, PAGE, "acceptance.lab_draft", "Lab draft q", "selectbox", only, format_func=DRAFT_LABELS.get,
                   help=lab_help)  # fmt: skip
if rule == "flawed":
    st.warning(
        "The flawed rule (threshold p(x)/max p, residual p − p(x)·p) is a rule copied in many tutorials. "
        "It is a common mistake, shown here to be measured wrong."
    )

SHORT_RULES = {"speculative": "min(1, p/q)", "typical": "typical", "flawed": "flawed rule"}  # fit a third
s = settings()
cfg = configs(PAGE, depth=depth)["sps"]  # as the lesson runs it
here = Settings(s.prompt, replace(s.sampling, temperature=temp), s.model_spec) if s else None
trace = run_method("sps", cfg, here)
if trace is not None:
    proposed = sum(x.proposed for x in trace.steps)
    taken = sum(x.drafts_accepted for x in trace.steps)
    m1, m2, m3 = st.columns(3)
    m1.metric("A (tokens per forward)", f"{trace.mean_accepted:.2f}")
    m2.metric("Drafts accepted", f"{taken}/{proposed}")
    m3.metric(
        "Decided by",
        "greedy match" if temp == 0 else SHORT_RULES[rule],
        help="The rule that accepted or rejected each draft: "
        + ("greedy matching (T = 0)" if temp == 0 else RULE_LABELS[rule]),
    )
    st.text(trace.text)
    judged = [x for x in trace.steps if records(x)]
    if judged:
        step = judged[focused_step("acceptance", judged, trace)]  # opens on the lesson stop's rule, else the longest
        st.dataframe(decision_rows(records(step)), hide_index=True)
        draw(PAGE, "acceptance_decisions", {"sps": trace}, step.index)
        if "dists" in records(step)[-1]:
            draw(PAGE, "acceptance_rejection", {"sps": trace}, step.index)
        else:
            st.caption("Every draft of this step was accepted; the bonus token is drawn from p.")
    draw(PAGE, "acceptance_typical", {"sps": trace})
    download_traces([trace], "acceptance_run")

st.subheader("The losslessness lab")
st.caption(
    "One fixed context (the prompt): draft x ~ q, decide with each rule, and count "
    "the committed token N times. Speculative sampling matches p; typical acceptance drifts; the flawed "
    "rule is biased. At temperature 0 the lab samples at T = 1."
)
if replaying():
    st.info("The lab runs the model; remove the loaded traces to use it.")
elif s is not None and (lm := get_model()) is not None:
    try:
        cfg = LabConfig(temp, n, s.sampling.seed, eps, delta, f"0-{depth - 1}", draft=lab_draft)
        sig, context = live.signature("lab", s.model_spec, s.prompt, cfg), len(prepare(lm, s.prompt))
        with st.spinner(f"Sampling {n:,} times per rule…"):
            res = live.one_pass(lm, sig, "the lab", context, partial(resources.lab, s.model_spec, s.prompt, cfg))
        if res is not None:  # else stopped or refused: live.one_pass said so
            show_lab(res)
    except PromptError as exc:
        st.warning(str(exc))
    except (ValueError, RuntimeError) as exc:  # a bad draft setting, or the device (out of memory, a kernel error)
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        st.warning(f"The lab could not run on {lm.describe()}: {first[:200]}")
