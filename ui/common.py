"""Streamlit glue shared by every page: the sidebar, a method's run, figure rendering, the page's deck button (what
is cached and the pages' paired runs: ui.resources)."""

from __future__ import annotations

import re
from typing import Any

# Imported when the app starts rather than on first use: plotly's validators read sys.modules["pandas"]
# without importing it, so a figure built while another session's thread is still importing pandas sees it half
# initialised (AttributeError: partially initialized module 'pandas' has no attribute 'Series'; found by
# scripts/load_test.py). Here every session waits for the one import to finish.
import pandas  # noqa: F401
import streamlit as st

from specviz import methods
from specviz.core.model import ModelError
from specviz.core.paths import MODELS, inside
from specviz.core.prompts import MAX_PROMPT_CHARS, PromptError, prepare
from specviz.core.sampling import ConfigError, Sampling
from specviz.core.trace import MAX_TRACE_BYTES, Trace, TraceError, bundle_json, load_traces
from specviz.output.lesson.visitor import escaped
from specviz.output.pages import PAGES, Control, ranges
from ui import deck, live, memo, presentation, resources
from ui.prompt_picker import picker
from ui.resources import Settings, get_model, replayed, replaying

DEFAULT_PROMPT = "Explain in a few sentences why the sky is blue."
MAX_TOKENS_LIMIT = 512
MAX_UPLOADS, MAX_UPLOAD_BYTES = 8, 16 << 20  # trace files (and bytes) a visitor may have loaded: 8 MB parses to ~76 MB
PARSED = "replay.parsed"  # "file id:size" -> (traces, refusal): each upload parsed once
FOLDER_FIELDS = ("head", "heads_dir")  # Config fields naming a folder: on this server, only under models/


def sidebar() -> Settings | None:
    """Draw the shared sidebar and return its settings (None when a value is unusable).

    While presenting, every setting but the prompt preset folds into a closed "Settings" expander.
    """
    sb = st.sidebar
    deck.reset()
    on = presentation.toggle(sb)
    st.session_state.setdefault("sidebar.prompt", DEFAULT_PROMPT)
    picker(sb, DEFAULT_PROMPT)
    box = sb.expander("Settings", expanded=False) if on else sb
    box.text_input(
        "Model",
        "default",
        key=resources.MODEL_KEY,
        max_chars=200,
        help="'default' is the built-in SmolLM2-135M-Instruct; or a local folder or hub id of a Llama-like model.",
    )
    box.text_area("Prompt", key="sidebar.prompt", height=110, max_chars=MAX_PROMPT_CHARS)  # default set above
    box.number_input("Max new tokens", 1, MAX_TOKENS_LIMIT, 64, step=16, key="sidebar.max_new_tokens")
    box.slider("Temperature", 0.0, 2.0, 0.0, 0.05, key="sidebar.temperature", help="0 = greedy")
    box.slider("Top-p", 0.05, 1.0, 1.0, 0.05, key="sidebar.top_p")
    box.number_input("Seed", 0, 2**31 - 1, 0, key="sidebar.seed")
    box.toggle("Slide export buttons", False, key="sidebar.export", help="PNG/SVG downloads in the slide theme")
    replay_controls(sb)
    if not replaying():
        lm = get_model()
        if lm is not None:
            sb.caption(f"Running on **{lm.describe()}**" + (f". {note}" if (note := lm.precision_note()) else ""))
    return settings()


def replay_controls(sb) -> None:
    """Load saved traces to present without running the model."""
    with sb.expander("Replay saved traces", expanded=replaying()):
        files = st.file_uploader(
            "Trace or bundle (.json)", type=["json"], accept_multiple_files=True, key="replay.files"
        )
        loaded: dict[str, Trace] = {}
        for name, traces, error in uploads(files or []):
            if error:
                st.error(f"{escaped(name)}: {escaped(error, 400)}")
            loaded.update({t.method: t for t in traces})
        resources.set_replay(loaded)
        if loaded:
            names = ", ".join(escaped(n) for n in loaded)
            st.caption(f"Replaying {names}; the model is not run while traces are loaded.")


def uploads(files: list[Any]) -> list[tuple[str, list[Trace], str]]:
    """(name, traces, refusal) per uploaded file, each parsed once per upload (not on every rerun); files past
    the per-visitor caps (MAX_UPLOADS files, MAX_UPLOAD_BYTES in all) are refused unread."""
    parsed: dict[str, tuple[list[Trace], str]] = st.session_state.get(PARSED, {})
    kept, out, total = {}, [], 0
    for i, f in enumerate(files):
        total += f.size
        if i >= MAX_UPLOADS or total > MAX_UPLOAD_BYTES:
            cap = f"{MAX_UPLOADS} files and {MAX_UPLOAD_BYTES >> 20} MB"
            out.append((f.name, [], f"not read: one visitor may load at most {cap} of traces; remove some."))
            continue
        key = f"{f.file_id}:{f.size}"
        kept[key] = parsed[key] if key in parsed else _parse_upload(f)
        out.append((f.name, *kept[key]))
    st.session_state[PARSED] = kept  # what was removed from the uploader is forgotten
    return out


def _parse_upload(f: Any) -> tuple[list[Trace], str]:
    """One uploaded file's traces of methods this app runs, or the one sentence why it cannot be replayed."""
    if f.size > MAX_TRACE_BYTES:  # checked before reading it (the server refuses larger uploads too)
        return [], f"{f.size / 2**20:.1f} MB is more than a trace file may be ({MAX_TRACE_BYTES >> 20} MB)."
    try:
        traces = load_traces(f.getvalue())
    except TraceError as exc:
        return [], str(exc)
    if unknown := [t.method for t in traces if t.method not in methods.available()]:
        return [], f"{unknown[0][:40]!r} is not a method this app runs."
    return traces, ""


def download_traces(traces: list[Trace], name: str) -> None:
    """A button that saves traces as one JSON bundle, to replay later on any machine."""
    if traces:
        st.download_button(
            "Save these runs (JSON)",
            lambda: bundle_json(traces),  # made when pressed, not on every run of the page
            file_name=f"{name}.json",
            mime="application/json",
            key=f"save.{name}",
            on_click="ignore",
        )


def settings() -> Settings | None:
    """The current shared settings, validated."""
    ss = st.session_state
    try:
        sampling = Sampling(
            max_new_tokens=int(ss.get("sidebar.max_new_tokens", 64)),
            temperature=float(ss.get("sidebar.temperature", 0.0)),
            top_p=float(ss.get("sidebar.top_p", 1.0)),
            seed=int(ss.get("sidebar.seed", 0)),
        )
    except ConfigError as exc:
        st.error(str(exc))
        return None
    return Settings(ss.get("sidebar.prompt", DEFAULT_PROMPT), sampling, ss.get(resources.MODEL_KEY, "default"))


def run_method(name: str, config: object, s: Settings | None) -> Trace | None:
    """A (cached) run of one method on the sidebar prompt; None with a clear message on bad input."""
    if replaying():
        trace = replayed(name)
        if trace is None:
            st.info(f"The loaded traces hold no {name!r} run; remove them in the sidebar to run live.")
        else:
            deck.note_traces([trace])
        return trace
    if s is None or (lm := get_model()) is None:
        return None
    cfg: Any = config if config is not None else methods.get(name).Config()  # the method's frozen Config
    what = f"a run of {methods.card(name).label}"
    try:
        p = live.price(lm, {name: cfg}, s.sampling.max_new_tokens, len(prepare(lm, s.prompt)))
        with st.spinner(f"Decoding with {methods.card(name).label}…"):
            sig = live.signature("run", name, cfg, s)
            trace = live.live(lm, sig, what, p, lambda: resources.run(name, cfg, s.prompt, s.sampling, s.model_spec))
        if trace is not None:
            deck.note_traces([trace])
        return trace
    except (PromptError, ConfigError, ModelError) as exc:
        st.warning(str(exc))
    return None


def show_figure(fig, name: str, measured: str = "") -> None:
    """Render a plotly figure; the toolbar's camera saves PNG at 2x, and buttons give slide images. `measured`: a
    figure drawn from a stored measurement gives its provenance (Provenance.describe()), for the deck's notes."""
    config = {"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2, "filename": name}}
    deck.note_figure(name, fig, measured)
    shown = memo.variant(fig, "big", presentation.figure_font) if presentation.presenting() else fig  # kept if shared
    st.plotly_chart(shown, config=config, key=f"fig.{name}")
    if st.session_state.get("sidebar.export", False):
        from specviz.output.export import figure_bytes

        cols = st.columns(6)
        for col, fmt in zip(cols, ("png", "svg")):
            col.download_button(
                f"{fmt.upper()} for slides",
                lambda f=fig, x=fmt: figure_bytes(f, x, slide=True),
                file_name=f"{name}.{fmt}",
                key=f"dl.{name}.{fmt}",
                on_click="ignore",
            )


def page_header(title: str, question: str) -> None:
    """Title plus the one question this page answers."""
    st.title(title)
    st.caption(question)


def config_controls(name: str, container=None):
    """Widgets for every field of a method's Config (defaults = its tuned CPU defaults); returns the Config. A number
    a method page's control sets takes that control's range (specviz.output.pages.ranges: one visitor's settings
    hold the one model no longer than the method pages let them); one the device's fit chooses is left to the fit
    until the visitor sets it."""
    box = container or st
    cls = methods.get(name).Config
    values, declared = {}, ranges(name)
    for f in methods.settings(cls):  # a measured field (PLD's latency curve) is the runner's to fill
        key, default = f"cfg.{name}.{f.name}", f.default
        if isinstance(default, bool):
            values[f.name] = box.checkbox(f.name, default, key=key)
        elif isinstance(default, (int, float)):
            if (got := number_control(box, f, key, declared.get(f.name))) is not None:
                values[f.name] = got
        else:
            values[f.name] = box.text_input(f.name, str(default), key=key, max_chars=200)
    outside = [k for k in FOLDER_FIELDS if values.get(k) not in (None, "", "random") and not inside(values[k])]
    if outside:
        box.warning(f"{name}: {outside[0]} must name a folder inside {MODELS.name}/ on this server.")
        return None
    try:
        return cls(**values)
    except (ConfigError, TypeError, ValueError) as exc:
        box.warning(f"{name}: {exc}")
        return None


def number_control(box: Any, f: Any, key: str, control: Control | None) -> int | float | None:
    """A Config field's number input, within `control`'s range where a method page declares one. A field at its
    unset value (the fit's: 0, Lookahead's G -1) or at a default the range leaves out (speculative sampling's γ 0:
    the draft's own) starts empty, and an empty input passes nothing: the Config keeps its own default."""
    kind = int if isinstance(f.default, int) else float
    low, high = (kind(control.low), kind(control.high)) if control is not None else (None, None)
    fitted = bool(f.metadata.get("fitted"))
    inside_range = control is None or control.low <= f.default <= control.high
    empty = (fitted and f.default == f.metadata.get("unset")) or not inside_range
    where = f"{low} to {high}, as on the {PAGES[control.key.split('.')[0]].title} page" if control else ""
    left = "fitted to the device where the run starts" if fitted else f"the method's own ({f.default})"
    got = box.number_input(
        f.name,
        min_value=low,
        max_value=high,
        value=None if empty else f.default,
        step=1 if kind is int else None,
        format=None if kind is int else "%.3f",
        key=key,
        placeholder="fitted to this device" if fitted else f"{f.default}: the method's own",
        help=f"{where}; empty: {left}." if where and empty else (f"{where}." if where else None),
    )
    return None if got is None else kind(got)


def deck_button(page: str, model: str = "", device: str = "") -> None:
    """A sidebar button that builds the deck when pressed (rendering the figures takes a second or two each)."""
    figures = list(st.session_state.get(deck.FIGURES, []))
    if not figures:
        return
    traces = dict(st.session_state.get(deck.TRACES, {}))
    first = next(iter(traces.values()), None)
    replaying_now = replaying()
    if first is not None:
        model, device = model or first.model, device or first.device
    elif not (model and device):
        lm = None if replaying_now else get_model()
        model, device = (lm.name, lm.describe()) if lm is not None else ("unknown model", "unknown device")
    slug = re.sub(r"[^a-z0-9]+", "_", page.lower()).strip("_") or "page"
    st.sidebar.download_button(
        f"Slide deck of this page ({len(figures)} slides, .pptx)",
        lambda: deck.build(page, figures, traces, (model, device, not replaying_now)),
        file_name=f"specviz_{slug}.pptx",
        mime="application/vnd.openxmlformats-officedocument.presentationml.presentation",
        key="deck.download",
        on_click="ignore",
        help="Every figure on this page, one per slide in the slide theme, with the model, device, settings "
        "and date in the speaker notes.",
    )
