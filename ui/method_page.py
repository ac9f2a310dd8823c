"""The method pages' template: what every method page does around its chapter's text and figures.

A method page is: its header; the trained head it needs (`need`, or `optional` for one run beside it); its preset
and sliders; its runs (ui.resources.run_paired) and the median one (`main_run`); its headline metrics; a step picked
(`pick_step`) and drawn; a method run beside it summed up under it (`beside`); stored sweeps (`stored_sweep`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import streamlit as st

from specviz.core.trace import StepTrace, Trace
from specviz.output.focus import focus_index
from specviz.tuning.sweep import stored
from ui.lesson_pack import step_rule
from ui.presentation import stepper
from ui.resources import Settings, median_pair, same_tokens, speedup_metric

T = TypeVar("T")


def need(read: Callable[[], T], *errors: type[Exception]) -> T:
    """What the page cannot run without (a trained head's files): on failure its one-line error, and the page stops."""
    try:
        return read()
    except errors as exc:
        st.error(str(exc))
        st.stop()


def optional(read: Callable[[], T], *errors: type[Exception]) -> tuple[T | None, str]:
    """What a section beside the method needs: (it, "") or (None, why it is missing)."""
    try:
        return read(), ""
    except errors as exc:
        return None, str(exc)


def at_temperature(s: Settings | None, temperature: float) -> Settings | None:
    """The sidebar's settings at the page's own temperature slider."""
    return None if s is None else replace(s, sampling=replace(s.sampling, temperature=temperature))


def main_run(runs: dict[str, list[Trace]], name: str) -> tuple[Trace | None, Trace]:
    """(plain decoding, the method) of the median pair, or (None, its one run) without plain decoding; stops the
    page when the method did not run (the message is already on it)."""
    if name not in runs:
        st.stop()
    return median_pair(runs, name) if "ar" in runs else (None, runs[name][0])


def recorded_predicted(steps: list[StepTrace]) -> float | None:
    """The predicted A a run recorded with its tree (1 + E[L] from the heads' calibration), or None."""
    return next((float(p) for s in steps if (p := getattr(s.detail, "predicted", None)) is not None), None)


def pick_step(
    page: str,
    count: int,
    label: str = "Step",
    key: str = "step",
    default: int = 0,
    run: str | None = None,
    arrows: bool = True,
) -> int:
    """The step slider keyed `<page>.<key>` (◀ / ▶ while presenting, with `arrows`; one slider a page has them);
    0 when there is one step. It survives the run getting shorter (clamped), and with `run` (what identifies
    the run) it starts at `default`, again whenever `run` changes."""
    full = f"{page}.{key}"
    if arrows:
        stepper(full, count)
    if count <= 1:
        return 0
    # the start goes in through the session state, not the slider's value, as the presentation stepper's does
    if run is not None and st.session_state.get(f"{full}.run") != run:
        st.session_state[f"{full}.run"] = run
        st.session_state[full] = min(default, count - 1)
    if st.session_state.get(full, 0) > count - 1:
        st.session_state[full] = count - 1
    return st.slider(label, 0, count - 1, key=full)


def focused_step(page: str, steps: list[StepTrace], trace: Trace) -> int:
    """The index in `steps` of the step `page`'s slider picks; it opens on the step rule (the lesson stop's, else the
    longest accepted path), again whenever the run or the rule changes."""
    rule = step_rule()
    return pick_step(page, len(steps), default=focus_index(steps, rule), run=f"{trace.total_s}{rule}")


def step_caption(step: StepTrace, what: str) -> None:
    """The picked step in one line: what it committed, `what` the method says of it, and its phases' times."""
    st.caption(
        f"Step {step.index}: committed {step.accepted} token(s) {step.texts!r} · {what} · propose "
        f"{1000 * step.propose_s:.1f} ms, verify {1000 * step.verify_s:.1f} ms for {step.forward_tokens} tokens, "
        f"accept {1000 * step.accept_s:.1f} ms"
    )


@dataclass(frozen=True)
class Beside:
    """How a page names a method run beside its own: A's label and help, the speedup's label and help, and the
    identity metric's label."""

    a: str
    a_help: str
    speedup: str
    speedup_help: str
    same: str


def beside(runs: dict[str, list[Trace]], ar: Trace | None, main: Trace, name: str, names: Beside) -> Trace:
    """A method run beside the page's in the same runs: its median run, with A (the page's → its), its speedup
    and its identity with plain decoding in one row."""
    t = median_pair(runs, name)[1] if "ar" in runs else runs[name][0]
    c1, c2, c3 = st.columns(3)
    c1.metric(names.a, f"{main.mean_accepted:.2f} → {t.mean_accepted:.2f}", help=names.a_help)
    if "ar" in runs:
        speedup_metric(c2, runs, name, names.speedup, names.speedup_help)
        c3.metric(names.same, same_tokens(ar, t))
    return t


def stored_sweep(path: Path) -> tuple[dict | None, str]:
    """A stored sweep's record, or (None, why it could not be read); (None, "") when none is stored."""
    try:
        return stored(path), ""
    except ValueError as exc:
        return None, str(exc)
