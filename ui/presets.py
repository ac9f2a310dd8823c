"""The method pages' presets: a control that fills the page's sliders, and what each preset costs here, measured."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from typing import Any

import streamlit as st

from specviz.core import measure
from specviz.methods.base import settled
from specviz.tuning import presets
from specviz.tuning.presets import Preset, fields
from specviz.tuning.probe import cached_curve
from ui.resources import Settings, fitted, get_model, replaying, run_paired

CUSTOM = "custom"


def _widget(page: str, name: str) -> str:
    return f"{page}.{name}"


def _clamped(name: str, value: Any, clamp: dict[str, tuple[int, int]]) -> Any:
    lo, hi = clamp.get(name, (value, value))
    return min(max(value, lo), hi)


def _shape(method: str) -> tuple[dict[str, int], str]:
    """The fitted shape of `method` on this device and its sentence ({} and '' without a model: a replay)."""
    f = fitted(method)
    return (dict(f.best.fields), f.describe()) if f is not None else ({}, "")


def _set(page: str, method: str, clamp: dict[str, tuple[int, int]]) -> None:
    key = st.session_state.get(f"{page}.preset", CUSTOM)
    if key != CUSTOM:
        shape, _ = _shape(method)
        for name, value in _values(method, presets.get(method, key, shape)).items():
            st.session_state[_widget(page, name)] = _clamped(name, value, clamp)


def _values(method: str, preset: Preset) -> dict[str, Any]:
    """A preset's slider values: where the fit left a field unset (no model here), its fallback."""
    return presets.values(method, replace(preset, config=settled(preset.config)))


def preset_control(page: str, method: str, clamp: dict[str, tuple[int, int]] | None = None) -> Preset | None:
    """Presets for `method` that fill the sliders keyed `<page>.<field>`; call it before they are drawn.

    The sliders must be drawn without a default value (this sets their starting values, presets.start's: the shape
    fitted to this device). The control reads "custom" once a slider is moved off every preset. Returns the chosen
    preset, if any.
    """
    clamp = clamp or {}
    shape, told = _shape(method)
    options = presets.presets(method, shape, told)
    for name, value in _values(method, presets.start(method, shape)).items():
        st.session_state.setdefault(_widget(page, name), _clamped(name, value, clamp))
    current = {n: st.session_state[_widget(page, n)] for n in fields(method)}
    match = next((p for p in options if _values(method, p) == current), None)
    st.session_state[f"{page}.preset"] = match.key if match else CUSTOM
    labels = {p.key: p.label for p in options} | {CUSTOM: "custom"}
    key = st.radio(
        "Preset",
        [p.key for p in options] + [CUSTOM],
        format_func=labels.get,
        horizontal=True,
        key=f"{page}.preset",
        on_change=_set,
        args=(page, method, clamp),
        help="Fitted to this device: the shape whose predicted speedup (the head's held-out acceptance over this "
        "device's measured step cost) is largest here; on a GPU, where a wide forward costs about as much as a "
        "narrow one, it lands near the paper's. As in the paper: the reference setting, where the figures look as "
        "they do in the paper. A page may start elsewhere where its figures need it (and says why beneath). "
        "Moving a slider makes it custom.",
    )
    chosen = next((p for p in options if p.key == key), None)
    if chosen is not None:
        st.caption(chosen.why)
    return chosen


def _probe_note(method: str, widths: dict[str, int]) -> str:
    """What one forward of each preset's width costs on this device, by the latency probe; '' if unknown."""
    lm = None if replaying() else get_model()
    if lm is None or not {presets.FITTED, presets.PAPER} <= set(widths):
        return ""
    curve = cached_curve(lm)  # measured (under the model's lock) only if none is stored
    wf, wp = widths.get(presets.FITTED, 1), widths.get(presets.PAPER, 1)
    ratio = curve.cost_of(wp) / max(curve.cost_of(wf), 1e-9)
    head = (
        f"On {lm.describe()}, one forward of {wp} tokens costs {ratio:.2f}× one of {wf} (the latency probe, "
        f"{curve.measured(measure.provenance(lm.describe()))})"
    )
    if ratio < 1.15:
        return f"{head}: verifying the paper-size preset is nearly free here, so the two presets converge, as on a GPU."
    return (
        f"{head}: the paper-size preset is where the figures teach, the fitted one is where the clock wins. On a "
        "GPU, where a forward of 64 tokens costs about as much as one, the two converge."
    )


def _row(method: str, p: Preset, cfg: Any, runs: dict) -> dict:
    m = measure.paired(runs["ar"][: len(runs[method])], runs[method])
    return {
        "preset": p.label,
        "verified tokens per forward": presets.verified_tokens(cfg),
        "A": round(m["A"].median, 2),
        "r (step cost)": round(m["r"].median, 2),
        "speedup": m["speedup"].label(),
    }


def preset_costs(page: str, method: str, config: Any, s: Settings | None, repeats: int) -> None:
    """Both presets timed against plain decoding on the sidebar prompt (on request: it runs the model)."""
    if config is None or s is None:
        return
    st.subheader("What each preset costs here")
    if replaying():
        st.caption("Measuring the presets runs the model; remove the loaded traces in the sidebar to measure.")
        return
    stamp = json.dumps([s.prompt, asdict(s.sampling), s.model_spec, repeats, asdict(config)], sort_keys=True)
    flag = f"{page}.presets_measured"
    if st.button("Measure the presets on this prompt", key=f"{page}.measure_presets"):
        st.session_state[flag] = stamp
    if st.session_state.get(flag) != stamp:
        st.caption("Runs plain decoding and each preset in turn on the sidebar prompt, after a warm-up.")
        return
    rows, widths = [], {}
    shape, told = _shape(method)
    for p in presets.presets(method, shape, told):
        cfg = presets.applied(method, config, p)
        runs = run_paired({method: cfg}, s, repeats)
        if "ar" in runs and method in runs:
            rows.append(_row(method, p, cfg, runs))
            widths[p.key] = presets.verified_tokens(cfg)
    if rows:
        st.dataframe(rows, hide_index=True)
        if note := _probe_note(method, widths):
            st.caption(note)
