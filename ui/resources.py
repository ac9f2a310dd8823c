"""Every Streamlit cached resource, and the replay state: the models (one st.cache_resource, two at most, shared
by every session), the cached runs (st.cache_data keyed by method, frozen Config, prompt and Sampling, which it
hashes by their fields), the lesson file, the acceptance lab, EAGLE's re-grown trees, and the traces a visitor
loaded to replay.

The library takes the model lock around whatever it runs; nothing here or in the pages takes it.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from specviz.core.model import LoadedModel, ModelError, load_model
from specviz.core.prompts import prepare
from specviz.core.sampling import Sampling
from specviz.core.trace import Trace
from specviz.output.lesson.model import Lesson, load_lesson
from specviz.output.lesson.pack import Pack, from_bytes, read
from specviz.output.lesson.visitor import visitor_model
from specviz.tuning import compare, eagle_replay, lossless, probe

MAX_MODELS = 2  # models held at once (the default and one other): every session shares them
MODEL_KEY = "sidebar.model"  # the sidebar's Model box
REPLAY = "replay.traces"  # method -> Trace: the traces loaded to replay (while any are, the model is not run)
PACK = "replay.pack"  # method -> its runs: a recorded lesson stop's (ui.lesson sets it; the model is not run)


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


def clear() -> None:
    """Forget the loaded models (and the heads each holds), every cached run and every figure built for all."""
    from ui import memo

    for cached in (_model, run, paired, race, lab, regrown):
        cached.clear()
    memo.clear()


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
    config = probe.prepare(lm, {method: config})[method]  # prompt lookup's with this device's verify cost
    return compare.run_once(lm, method, prepare(lm, prompt), sampling, config, prompt=prompt)


@st.cache_data(max_entries=64, show_spinner=False)
def paired(
    configs: dict[str, Any], prompt: str, sampling: Sampling, model_spec: str, repeats: int
) -> dict[str, list[Trace]]:
    """Plain decoding and the methods ({method: its frozen Config}) in turn, `repeats` times."""
    lm = model(model_spec)
    steered, ids = probe.prepare(lm, configs), prepare(lm, prompt)
    return compare.interleaved_runs(lm, ids, steered, sampling, repeats, prompt=prompt)


@st.cache_data(max_entries=32, show_spinner=False)
def race(names: tuple[str, ...], prompt: str, sampling: Sampling, model_spec: str) -> list[Trace]:
    """Plain decoding and each method once with its default Config, every lane warmed up first (compare.race)."""
    lm = model(model_spec)
    return compare.race(lm, prepare(lm, prompt), probe.prepare(lm, {}, names), sampling, prompt=prompt)


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
