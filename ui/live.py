"""Fair live comparisons: plain decoding and the methods run in turn, after a warm-up, repeated."""

from __future__ import annotations

from typing import Any

import streamlit as st

from specviz import methods
from specviz.core import measure
from specviz.core.model import ModelError
from specviz.core.prompts import PromptError
from specviz.core.sampling import ConfigError
from specviz.core.trace import Trace
from specviz.output.lesson.visitor import escaped
from specviz.tuning import compare
from ui import deck, resources
from ui.common import Settings
from ui.resources import get_model, replayed, replaying

DEFAULT_REPEATS = 3


def repeats_control(page: str, container=None) -> int:
    """How many interleaved runs of each method a speedup is the median of (the page's own widget)."""
    box = container or st
    return int(
        box.number_input(
            "Repeats (each method and plain decoding, interleaved)",
            1,
            9,
            DEFAULT_REPEATS,
            key=f"{page}.repeats",
            help="After one warm-up run of each, plain decoding and "
            "the methods run in turn this many times; the speedup is the median ratio.",
        )
    )


def run_paired(configs: dict[str, Any], s: Settings | None, repeats: int) -> dict[str, list[Trace]]:
    """name -> interleaved runs (ar first, then each method), cached per (methods, configs, prompt, repeats).

    When replaying saved traces, each method has the one run that was loaded.
    """
    if resources.packed():  # a recorded lesson stop: every interleaved run, so the page's median is the pack's
        return {n: ts for n, ts in resources.packed().items() if n in ["ar", *configs]}
    if replaying():
        loaded = {n: t for n in ["ar", *configs] if (t := replayed(n)) is not None}
        runs, unrelated = compare.replay_runs(loaded, list(configs))
        if unrelated:
            st.info(
                f"No speedup for {', '.join(unrelated)}: the loaded trace ran another prompt or other settings than "
                "the loaded plain decoding, so the two are not compared."
            )
        return runs
    if s is None or get_model() is None:
        return {}
    cfg = {n: c if c is not None else methods.get(n).Config() for n, c in configs.items() if n != "ar"}
    try:
        with st.spinner(f"Running plain decoding and {', '.join(configs) or 'nothing'} {repeats}× in turn…"):
            runs = resources.paired(cfg, s.prompt, s.sampling, s.model_spec, repeats)
        deck.note_traces([ts[0] for ts in runs.values() if ts])
        return runs
    except (PromptError, ConfigError, ModelError) as exc:
        st.warning(str(exc))
    return {}


def run_race(names: list[str], s: Settings | None) -> list[Trace]:
    """Plain decoding and each method once, every lane warmed up first (compare.race); cached per (methods,
    prompt, settings). When replaying, the loaded traces of those methods."""
    if replaying():
        return [t for n in ["ar", *names] if (t := replayed(n)) is not None]
    if s is None or get_model() is None:
        return []
    try:
        with st.spinner(f"Warming up, then racing plain decoding and {', '.join(names) or 'nothing'}…"):
            lanes = resources.race(tuple(n for n in names if n != "ar"), s.prompt, s.sampling, s.model_spec)
        deck.note_traces(lanes)
        return lanes
    except (PromptError, ConfigError, ModelError) as exc:
        st.warning(str(exc))
    return []


def speedup_metric(col, runs: dict[str, list[Trace]], name: str, label: str, help: str) -> None:
    """The median speedup as a metric ('1.31×', short enough for a fifth of the page at 1600 px) and, beneath
    it, its range over the interleaved runs (measure.paired), or 'one run'."""
    sp = measure.paired(runs["ar"][: len(runs[name])], runs[name])["speedup"]
    where = "Measured on this server since it booted (runs are cached across visitors)."
    if replaying():  # a saved trace records its device, not where or when it ran
        where = f"From saved traces run on {escaped(runs[name][0].device, 60)}; where and when are not recorded."
    col.metric(label, f"{sp.median:.2f}×", help=f"{help} {where}")
    col.caption(f"range {sp.low:.2f}–{sp.high:.2f}× over {sp.n} interleaved runs" if sp.n > 1 else "one run")


def median_pair(runs: dict[str, list[Trace]], name: str) -> tuple[Trace, Trace]:
    """(plain decoding, method) of the pair whose speedup is the median one, for the per-step figures."""
    pairs = list(zip(runs["ar"], runs[name]))
    ranked = sorted(pairs, key=lambda p: measure.speedup(*p))
    return ranked[len(ranked) // 2]


def measured_where(data: dict) -> str:
    """Where and when a stored figure was measured, from its provenance record ('… on this machine' only if so)."""
    lm = None if replaying() else get_model()
    here = measure.provenance(lm.describe()) if lm is not None else None
    try:
        return measure.Provenance.from_dict(data.get("provenance")).describe(here)
    except ValueError:
        return "where and when it was measured is not recorded"


def same_tokens(ar: Trace | None, trace: Trace) -> str:
    """'yes' / 'no' at T = 0; at T > 0 token identity says nothing about a lossless method; nor across prompts or
    settings (loaded traces)."""
    if ar is None:
        return "no plain run"
    if not compare.pairable(ar, trace):
        return "n/a: another prompt or settings"
    if not compare.greedy(trace):
        return "n/a at T > 0"
    return "yes" if trace.output_ids == ar.output_ids else "no"
