"""Every Streamlit cached resource, and the replay state: the models (one st.cache_resource, two at most, shared
by every session), the cached runs (st.cache_data keyed by method, frozen Config, prompt and Sampling, which it
hashes by their fields), the lesson file, the acceptance lab, EAGLE's re-grown trees, and the traces a visitor
loaded to replay. And the pages' runs made of them: fair live comparisons (plain decoding and the methods in turn,
after a warm-up, repeated; `run_paired`, `run_race`), their speedup and identity, where a stored result was
measured. A page's Config reaches the cached run here, one file from its declaration.

The library takes the model lock around whatever it runs; nothing here or in the pages takes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import streamlit as st

from specviz import methods
from specviz.core import measure
from specviz.core.model import LoadedModel, ModelError, load_model
from specviz.core.prompts import PromptError, prepare
from specviz.core.sampling import ConfigError, Sampling
from specviz.core.trace import Trace
from specviz.output.lesson.model import Lesson, load_lesson
from specviz.output.lesson.pack import Pack, from_bytes, read
from specviz.output.lesson.visitor import escaped, visitor_model
from specviz.tuning import compare, eagle_replay, fit, lossless
from ui import deck, live

MAX_MODELS = 2  # models held at once (the default and one other): every session shares them
MODEL_KEY = "sidebar.model"  # the sidebar's Model box
REPLAY = "replay.traces"  # method -> Trace: the traces loaded to replay (while any are, the model is not run)
PACK = "replay.pack"  # method -> its runs: a recorded lesson stop's (ui.lesson sets it; the model is not run)
DEFAULT_REPEATS = 3  # interleaved runs a live page's speedup is the median of


@dataclass(frozen=True)
class Settings:
    """The shared sidebar's values (ui.common.sidebar): what every run is made on."""

    prompt: str
    sampling: Sampling
    model_spec: str


@st.cache_resource(show_spinner=False, max_entries=MAX_MODELS)
def _model(spec: str) -> LoadedModel:
    return visitor_model(spec, load_model)  # the Model box's rules: allowed folders, free memory, one at a time


def model(spec: str) -> LoadedModel:
    """The model for `spec` (loaded once, shared by all sessions); raises what loading raises."""
    return _model(spec)


def get_model(note: bool = False) -> LoadedModel | None:
    """The sidebar's model; None with a message on failure.

    None while traces are loaded: nothing runs the model then (with `note`, a line says so).
    """
    if replaying():
        if note:
            st.info("This runs the model, which is not run while traces are loaded; remove them in the sidebar.")
        return None
    spec = st.session_state.get(MODEL_KEY, "default") or "default"
    try:
        with st.spinner("Loading the model (the first start converts it once, about 20 s)…"):
            return model(spec)
    except ModelError as exc:
        st.error(str(exc))
    except Exception as exc:  # a visitor's folder or hub id can fail in any way: one line, never a traceback
        st.error(f"Could not load model {spec[:80]!r} ({type(exc).__name__}: {str(exc).strip()[:160]}).")
    return None


@st.cache_resource(show_spinner=False, max_entries=MAX_MODELS * 2)
def _fits(spec: str, key: str) -> dict[str, fit.Fit]:
    """The fit of every tree and window method on `spec`'s device (key: the device's description, so a model's
    device or kernels that change measure again)."""
    return fit.fits(model(spec))


def fitted(method: str) -> fit.Fit | None:
    """`method`'s shape fitted to this device, measured once per device and model (about 30 s the first time, then
    read from the cache); None while traces are replayed or when no model loads."""
    lm = None if replaying() else get_model()
    if lm is None:
        return None
    spec = st.session_state.get(MODEL_KEY, "default") or "default"
    with st.spinner("Fitting the trees to this device: its latency curve and each head's step, timed once…"):
        return _fits(spec, lm.describe()).get(method)


def clear() -> None:
    """Forget the loaded models (and the heads each holds), every cached run and every figure built for all."""
    from ui import memo

    for cached in (_model, _fits, run, paired, race, lab, regrown):
        cached.clear()
    memo.clear()
    live.DONE.clear()


def set_replay(loaded: dict[str, Trace]) -> None:
    st.session_state[REPLAY] = loaded


def replaying() -> bool:
    return bool(st.session_state.get(REPLAY) or st.session_state.get(PACK))


def packed() -> dict[str, list[Trace]]:
    """A recorded lesson stop's runs (method -> interleaved runs, plain decoding's first), {} when none."""
    return st.session_state.get(PACK) or {}


def replayed(method: str) -> Trace | None:
    """A trace of `method` loaded by the user for replay, else a recorded stop's run of the median speedup."""
    if (loaded := st.session_state.get(REPLAY, {}).get(method)) is not None:
        return loaded
    runs = packed()
    if method not in runs:
        return None
    if method == "ar" or "ar" not in runs:
        return sorted(runs[method], key=lambda t: t.generation_s)[len(runs[method]) // 2]
    pairs = sorted(zip(runs["ar"], runs[method]), key=lambda p: p[0].generation_s / max(p[1].generation_s, 1e-12))
    return pairs[len(pairs) // 2][1]


@st.cache_data(max_entries=128, show_spinner=False)
def run(method: str, config: Any, prompt: str, sampling: Sampling, model_spec: str) -> Trace:
    """One run of a method with its frozen Config (hashed by its fields) on a prompt."""
    lm = model(model_spec)
    config = compare.steered(lm, config, method)  # what it measures of this device (PLD's cost, a tree's fit)
    return compare.run_once(lm, method, prepare(lm, prompt), sampling, config, prompt=prompt)


@st.cache_data(max_entries=64, show_spinner=False)
def paired(
    configs: dict[str, Any], prompt: str, sampling: Sampling, model_spec: str, repeats: int
) -> dict[str, list[Trace]]:
    """Plain decoding and the methods ({method: its frozen Config}) in turn, `repeats` times (prompt lookup's
    given this device's verify cost where the runs start: compare.steered)."""
    lm = model(model_spec)
    return compare.interleaved_runs(lm, prepare(lm, prompt), configs, sampling, repeats, prompt=prompt)


@st.cache_data(max_entries=32, show_spinner=False)
def race(names: tuple[str, ...], prompt: str, sampling: Sampling, model_spec: str) -> list[Trace]:
    """Plain decoding and each method once with its default Config, every lane warmed up first (compare.race)."""
    lm = model(model_spec)
    return compare.race(lm, prepare(lm, prompt), fit.prepare(lm, {}, names), sampling, prompt=prompt)


@st.cache_data(max_entries=32, show_spinner=False)
def lab(model_spec: str, prompt: str, cfg: lossless.LabConfig) -> dict:
    """The losslessness lab's result, cached per model, prompt and (frozen, hashable) lab settings."""
    lm = model(model_spec or "default")
    return lossless.lab(lm, prepare(lm, prompt), cfg)


@st.cache_data(max_entries=32, show_spinner="Re-growing both trees from the same context…")
def regrown(key: str, step_index: int, _lm: LoadedModel, _trace: Trace, _cfg: Any) -> dict:
    """Both trees for one step of a live run; `key` holds the run's whole content, so runs never share an entry."""
    return eagle_replay.replay_trees(_lm, _trace, step_index, _cfg)  # looked up now: tests spy on it


@st.cache_data(max_entries=8, show_spinner=False)
def lesson(path: str, _stamp: float) -> Lesson:
    """A lesson file, read again when its modification time (`_stamp`) changes."""
    return load_lesson(path)


@st.cache_resource(show_spinner="Opening the recorded lesson…", max_entries=2)
def pack(path: str, _stamp: float) -> Pack:
    """A recorded lesson (read-only, shared by every session), read again when its file changes (`_stamp`)."""
    return read(path)


@st.cache_resource(show_spinner="Checking the recording…", max_entries=4, ttl=3600)
def uploaded_pack(digest: str, name: str, _raw: bytes) -> Pack:
    """A visitor's pack, read once per content (`digest`: the sha256 of its bytes) and file name: the same file
    uploaded again, by this visitor or another, is neither parsed nor its figures validated again (at most four
    kept, for an hour; a refusal is never kept)."""
    return from_bytes(_raw, name)


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
    if packed():  # a recorded lesson stop: every interleaved run, so the page's median is the pack's
        return {n: ts for n, ts in packed().items() if n in ["ar", *configs]}
    if replaying():
        loaded = {n: t for n in ["ar", *configs] if (t := replayed(n)) is not None}
        runs, unrelated = compare.replay_runs(loaded, list(configs))
        if unrelated:
            st.info(
                f"No speedup for {', '.join(unrelated)}: the loaded trace ran another prompt or other settings than "
                "the loaded plain decoding, so the two are not compared."
            )
        return runs
    if s is None or (lm := get_model()) is None:
        return {}
    cfg = {n: c if c is not None else methods.get(n).Config() for n, c in configs.items() if n != "ar"}
    what = f"plain decoding and {', '.join(configs) or 'nothing'} {repeats}× in turn"
    try:
        p = live.price(lm, {"ar": None, **cfg}, s.sampling.max_new_tokens, len(prepare(lm, s.prompt)), repeats + 1)
        sig = live.signature("paired", cfg, s, repeats)
        with st.spinner(f"Running {what}…"):
            runs = live.live(lm, sig, what, p, lambda: paired(cfg, s.prompt, s.sampling, s.model_spec, repeats))
        deck.note_traces([ts[0] for ts in (runs or {}).values() if ts])
        return runs or {}
    except (PromptError, ConfigError, ModelError) as exc:
        st.warning(str(exc))
    return {}


def run_race(names: list[str], s: Settings | None) -> list[Trace]:
    """Plain decoding and each method once, every lane warmed up first (compare.race); cached per (methods,
    prompt, settings). When replaying, the loaded traces of those methods."""
    if replaying():
        return [t for n in ["ar", *names] if (t := replayed(n)) is not None]
    if s is None or (lm := get_model()) is None:
        return []
    chosen = tuple(n for n in names if n != "ar")
    what = f"a race of plain decoding and {', '.join(names) or 'nothing'}"
    try:
        configs = {"ar": None, **dict.fromkeys(chosen)}
        p = live.price(lm, configs, s.sampling.max_new_tokens, len(prepare(lm, s.prompt)), warm=compare.WARM_TOKENS)
        with st.spinner(f"Warming up, then racing plain decoding and {', '.join(names) or 'nothing'}…"):
            sig = live.signature("race", chosen, s)
            lanes = live.live(lm, sig, what, p, lambda: race(chosen, s.prompt, s.sampling, s.model_spec)) or []
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
    """Where and when a stored figure was measured, from its provenance record ('… the computer running specviz …'
    only if so)."""
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
