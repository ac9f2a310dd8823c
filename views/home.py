"""Home: the four questions, plain decoding streamed live, its serial timeline and the latency curve."""

from __future__ import annotations

import time

import streamlit as st

from specviz.core.measure import provenance
from specviz.core.prompts import PromptError, prepare
from specviz.output.lesson.visitor import escaped
from specviz.output.pages.home import PAGE
from specviz.tuning import turns
from specviz.tuning.compare import run_once
from specviz.tuning.probe import cached_curve
from specviz.tuning.roofline import Busy, device_roofs, emulated_bf16, stored_curve
from specviz.tuning.rows import latest_stored
from ui import live
from ui.common import page_header, settings
from ui.declared import draw
from ui.resources import get_model

STREAM_EVERY_S = 0.2  # the live answer's refresh


def gpu_note() -> str:
    """One sentence of the newest stored GPU run (docs/gpu), with where and when; '' when none is stored."""
    got = latest_stored()
    if got is None:
        return ""
    head, summ = got
    where = head.get("provenance", {})
    plain = summ.get("ar", {}).get("tokens_per_s")
    rest = ", ".join(
        f"{label} {summ[key]['speedup']:.2f}x"
        for key, label in (("pld", "prompt lookup"), ("eagle", "EAGLE-2"), ("eagle3", "EAGLE-3"))
        if key in summ
    )
    return (
        f"Measured on a GPU, stored (not the computer running this app): {escaped(where.get('device', 'a GPU'))}, "
        f"{str(where.get('date', ''))[:10]}: plain decoding {plain} tokens/s; {rest} (docs/gpu)."
    )


def forward_cost(lm):
    """The stored latency curve and roofline, read without waiting for the model; measured here only while the
    model is free, else (curve, roofs) with None where the device is still to be measured, and a line that says so."""
    refresh = st.button("Re-measure", key="home.probe")
    curve = None if refresh else stored_curve(lm)
    busy = turns.of(lm).busy() or "another visitor's run"
    if curve is None and turns.occupied(lm):
        st.info(f"The model is busy ({busy}); this device's latency curve is measured once it is free.")
        return None, None
    if curve is None:
        with st.spinner("Measuring forward latency on this device (once)…"):
            curve = cached_curve(lm, refresh=refresh)
    try:
        with st.spinner("Measuring this device's bandwidth and matmul peak (once)…"):
            return curve, device_roofs(lm, curve.ks, curve.prefix_len, wait=False)
    except Busy:
        st.info(f"The model is busy ({busy}); the roofline is measured once it is free.")
        return curve, None


def draw_forward_cost(lm, curve, roofs) -> None:
    """The latency curve over its roofline, with its caption, why-no-speedup lines and peaks."""
    here = provenance(lm.describe())
    if curve.contended:
        st.warning(
            f"This curve was measured while the machine was busy ({curve.contended}); it may "
            "overstate the cost. Press **Re-measure** when the machine is quiet."
        )
    flag = f", disturbed: {curve.contended}" if curve.contended else ""
    draw(
        PAGE,
        "latency_curve",
        {"curve": curve, "here": here, "roof": roofs[0][0]},
        measured=curve.measured(here) + flag,
    )
    st.caption(
        f"Median of several interleaved runs with a fixed prefix, {curve.measured(here)}. Dashed: the "
        "roofline from this device's measured read bandwidth and matmul peak (the best of short runs). Below "
        "the knee the curve is nearly flat: that flatness is the budget every method spends."
    )
    whys = [why for _roof, why, _p in roofs] + [note for note in [emulated_bf16(lm)] if note]
    st.markdown("**Why no speedup on my hardware?**\n" + "\n".join(f"- {why}" for why in whys))
    if gpu := gpu_note():
        st.caption(gpu)
    st.caption(
        "Peaks: the best of short runs of a sum over a large buffer and of an MLP-sized matmul, "
        + "; ".join(f"{p.dtype} {p.measured()}" for _roof, _why, p in roofs)
        + "."
    )


page_header(
    "Why parallel decoding works",
    "Plain decoding pays one full forward pass per token. "
    "Every method in this app pays roughly the same pass for several.",
)
st.markdown(
    "Four questions judge any acceleration method:\n"
    "1. **Where do the drafts come from?** Extra heads (Medusa), a feature-level head (EAGLE), "
    "the model's own Jacobi iterations (Lookahead), the prompt (prompt lookup), a smaller draft (SpS).\n"
    "2. **How are candidates organised?** A chain, a static tree, a dynamic tree, or an n-gram pool.\n"
    "3. **Is acceptance lossless?** Greedy matching and speculative sampling are; typical acceptance is not.\n"
    "4. **Is the step bandwidth- or compute-bound?** Below: verifying k tokens costs far less than k passes.\n\n"
    "**A** = tokens committed per target forward pass, the bonus token included. "
    "**r** = cost of one method step relative to one plain step. Speedup ≈ A / r."
)

s = settings()
lm = get_model(note=True)  # None while traces are loaded: plain decoding runs the model
if lm is not None and s is not None:
    left, right = st.columns([3, 2])
    with left:
        st.subheader("Plain decoding, live")
        sig = live.signature("home", s)
        if st.button("Decode", type="primary", key="home.run", on_click=live.forget):
            out = st.empty()
            pieces: list[str] = []
            shown = [0.0]  # when the text was last sent

            def stream(step) -> None:  # at most 5 updates a second: each resends the whole text, and the browser
                pieces.extend(step.texts)  # redraws it (a 512-token answer at every step kept a core busy)
                if (now := time.monotonic()) - shown[0] >= STREAM_EVERY_S:
                    shown[0] = now
                    out.markdown("".join(pieces).replace("\n", "  \n") + " ▌")

            try:
                ids = prepare(lm, s.prompt)
                p = live.price(lm, {"ar": None}, s.sampling.max_new_tokens, len(ids))
                decode = lambda: run_once(lm, "ar", ids, s.sampling, prompt=s.prompt, on_step=stream)  # noqa: E731
                if (got := live.live(lm, sig, "plain decoding", p, decode, cached=False)) is not None:
                    st.session_state["home.trace"] = got
            except PromptError as exc:
                st.warning(str(exc))
            out.empty()
        else:
            live.held_back(sig)  # a run stopped here says so
        trace = st.session_state.get("home.trace")
        if trace is not None:
            st.markdown(f"> {trace.text}")
            c1, c2, c3 = st.columns(3)
            c1.metric("tokens", trace.new_tokens)
            c2.metric("forward passes", len(trace.steps))
            c3.metric("ms per token", f"{1000 * trace.mean_step_s:.0f}")
            draw(PAGE, "home_timeline", {"ar": trace})
        else:
            st.info("Press **Decode** to run plain decoding on the sidebar prompt.")
    with right:
        st.subheader("The cost of one forward pass")
        curve, roofs = forward_cost(lm)
        if curve is not None and roofs is not None:
            draw_forward_cost(lm, curve, roofs)
