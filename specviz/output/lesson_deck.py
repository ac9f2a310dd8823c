"""The lesson as slides: each stop's figure drawn by running its methods on its prompt with its settings (the
library calls its page makes), its narration as the slide's text, the provenance and settings in the notes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specviz import methods
from specviz.core.measure import Provenance, provenance, speedup
from specviz.core.model import LoadedModel
from specviz.core.prompts import prepare
from specviz.core.sampling import Sampling
from specviz.core.trace import Trace
from specviz.output import lesson_figures as figs
from specviz.output.deck import Slide, deck_bytes, notes_text, split_title
from specviz.output.export import ExportError
from specviz.output.lesson import PAGES, Lesson, LessonError, Stop
from specviz.output.lesson_figures import Drawn
from specviz.output.lesson_math import plain_math
from specviz.output.lesson_pages import COMPUTED
from specviz.tuning import presets
from specviz.tuning.compare import interleaved_runs, pairable
from specviz.tuning.probe import with_verify_cost

TIMELINE = ("medusa", "eagle", "lookahead", "pld")  # the Timeline page's default lanes besides plain decoding
COMPARE = ("medusa", "eagle", "lookahead")  # Compare's default toggles
STORED = ("where_methods_win", "speedup_vs_batch", "speedup_vs_context")  # Compare's figures of stored benches


def _method_page(stop: Stop, method: str) -> dict[str, Any]:
    """A method page's Config fields: the fastest preset's shape unless the stop sets it, then its own settings."""
    v = stop.widget_values()
    shape = presets.values(method, presets.presets(method)[0])
    return {k: v.get(f"{stop.page}.{k}", d) for k, d in shape.items()}


def configs(stop: Stop) -> tuple[dict[str, Any], float | None]:
    """{method: Config} the stop's figure needs, as its page builds them, and the temperature its page sets."""
    v, page, fig = stop.widget_values(), stop.page, stop.figure
    if page == "timeline":
        return {n: methods.make_config(n) for n in v.get("timeline.methods", TIMELINE)}, None
    if page == "compare":
        on = [n for n in methods.available() if n != "ar" and v.get(f"compare.on.{n}", n in COMPARE)]
        return {n: methods.make_config(n) for n in on}, None
    if page == "acceptance":
        sps = methods.get("sps").Config
        cfg = sps(
            gamma=v.get("acceptance.gamma", sps.gamma),
            draft=v.get("acceptance.draft", "layers"),
            layers=f"0-{v.get('acceptance.depth', 4) - 1}",
            rule=v.get("acceptance.rule", "speculative"),
            eps=v.get("acceptance.eps", sps.eps),
            delta=v.get("acceptance.delta", sps.delta),
        )
        return {"sps": cfg}, v.get("acceptance.temperature", 0.8)
    if page == "medusa":
        keys = {"rule": "acceptance", "eps": "eps", "delta": "delta"}  # Config field: the page's widget
        own = {k: v[f"medusa.{w}"] for k, w in keys.items() if f"medusa.{w}" in v}
        cfg = methods.get("medusa").Config(**_method_page(stop, "medusa"), **own)
        return {"medusa": cfg, **_hydra(cfg, v.get("medusa.hydra", False))}, v.get("medusa.temperature")
    if page == "eagle":
        shape = _method_page(stop, "eagle")
        names = ["eagle", *(["hybrid"] if fig == "hybrid_origins" or "hybrid" in stop.methods else [])]
        names += ["eagle3"] if v.get("eagle.eagle3") else []  # the page runs EAGLE-3 beside EAGLE-2 when asked
        return {n: methods.get(n).Config(**shape) for n in names}, v.get("eagle.temperature")
    if page == "lookahead" and fig == "jacobi_grid":
        jac = methods.get("jacobi").Config
        guesses, init = v.get("lookahead.jacobi_guesses", jac.guesses), v.get("lookahead.jacobi_init", "pad")
        return {"jacobi": jac(guesses=guesses, init=init)}, None
    if page == "lookahead":
        la = methods.get("lookahead").Config
        own = {k: v[f"lookahead.{k}"] for k in ("init", "seed_prompt") if f"lookahead.{k}" in v}
        return {"lookahead": la(**_method_page(stop, "lookahead"), **own)}, None
    return {}, None


def _hydra(medusa: Any, on: bool) -> dict[str, Any]:
    """Hydra beside Medusa, as the Medusa page runs it: the same tree, at most as many heads as Hydra trained."""
    if not on:
        return {}
    from dataclasses import replace

    from specviz.heads import hydra as hydra_heads
    from specviz.heads.medusa import HeadsError

    try:
        k = min(medusa.heads, hydra_heads.read_config(hydra_heads.models_dir()).num_heads)
    except (HeadsError, OSError, ValueError):  # no Hydra heads here: the stop runs Medusa alone, as the page would
        return {}
    fields = {f: getattr(medusa, f) for f in ("total_tokens", "rule", "eps", "delta")}
    return {"hydra": replace(methods.get("hydra").Config(), heads=k, **fields)}


def run_stop(lm: LoadedModel, lesson: Lesson, stop: Stop, seed: int = 0) -> dict[str, Trace]:
    """Plain decoding and the stop's methods on its prompt, once each after a warm-up (name -> run)."""
    cfgs, temperature = configs(stop)  # none: plain decoding alone
    cfgs = with_verify_cost(lm, cfgs)  # prompt lookup steers its draft length by this device's curve, as in the app
    text = lesson.prompt_text(stop)
    sampling = Sampling(max_new_tokens=lesson.max_new_tokens, temperature=temperature or 0.0, seed=seed)
    runs = interleaved_runs(lm, prepare(lm, text), cfgs, sampling, repeats=1, prompt=text)
    return {n: ts[0] for n, ts in runs.items() if ts}


def draw(lm: LoadedModel, lesson: Lesson, stop: Stop) -> Drawn:
    """The stop's figure, drawn as its page draws it, from runs made now or from the stored measurement."""
    if stop.figure in STORED:
        return figs.stored(stop.figure, provenance(lm.describe()))
    if stop.figure == "latency_curve":
        return figs.latency(lm)
    if stop.figure == "lineage":
        return figs.lineage(provenance(lm.describe()))
    if stop.figure == "acceptance_lab":
        return figs.lab(lm, lesson.prompt_text(stop), stop.widget_values())
    if stop.figure in COMPUTED:
        from specviz.output import lesson_math
        from specviz.output.lesson_stored import _latency

        curve = {"curve": {"data": _latency(lm)}} if stop.figure == "gpu_whatif" else {}
        fig, _fns, measured = lesson_math.computed(stop.figure, curve)
        return Drawn(fig, {}, measured)
    traces = run_stop(lm, lesson, stop)
    return Drawn(figs.from_traces(stop, traces), traces)


def numbers(stop: Stop, traces: dict[str, Trace]) -> list[str]:
    """The stop's live numbers: per method of the stop, A, tokens per second and the speedup beside plain decoding."""
    ar, out = traces.get("ar"), []
    for name in stop.methods:
        if (t := traces.get(name)) is None:
            continue
        label = "Plain decoding" if name == "ar" else methods.get(name).LABEL
        line = f"{label}: A {t.mean_accepted:.2f}, {t.new_tokens / max(t.generation_s, 1e-9):.1f} tok/s"
        if ar is not None and name != "ar" and pairable(ar, t):
            line += f", {speedup(ar, t):.2f}× plain decoding (one run each)"
        out.append(line)
    return out


def notes(lm: LoadedModel, lesson: Lesson, stop: Stop, drawn: Drawn, where: Provenance) -> str:
    """Speaker notes: where and when it was measured (or that it is stored), the prompt, the settings, the numbers."""
    k = lesson.stops.index(stop) + 1
    settings: dict[str, Any] = {
        "Stop": f"{k} of {len(lesson.stops)} ({stop.id}), the {PAGES[stop.page][1]} page, figure {stop.figure}",
        "Prompt": f"{lesson.prompt_label(stop)} (shipped, id {stop.prompt}), {lesson.max_new_tokens} new tokens",
        "Page settings": json.dumps(stop.widget_values(), sort_keys=True) if stop.settings else "the page's defaults",
    }
    settings |= {f"Settings ({n})": json.dumps(t.config, sort_keys=True) for n, t in drawn.traces.items()}
    if lines := numbers(stop, drawn.traces):
        settings["Live numbers"] = "; ".join(lines)
    text = notes_text(where, lm.name, settings, live=True)
    if drawn.measured:
        text = f"From a stored measurement, {drawn.measured}; not measured in this session.\n{text}"
    return text


def lesson_slides(lm: LoadedModel, lesson: Lesson, progress: Callable[[str], None] | None = None) -> list[Slide]:
    """One slide per stop: its title, its narration as the text, its figure, and the notes."""
    where = provenance(lm.describe())
    out = []
    for k, stop in enumerate(lesson.stops, 1):
        if progress:
            progress(f"stop {k} of {len(lesson.stops)}: {stop.id}")
        drawn = draw(lm, lesson, stop)
        text = plain_math(stop.narration)
        for b in range(stop.frames):  # a build is its own slide, drawn from the same runs
            fig = drawn.figure if b == 0 else _build(lm, stop, b, drawn.traces)
            sub = split_title(fig, "")[1]
            out.append(Slide(stop.at(b).title, fig, notes(lm, lesson, stop, drawn, where), sub, text))
    return out


def _build(lm: LoadedModel, stop: Stop, b: int, traces: dict[str, Trace]) -> Any:
    """A build's figure from the stop's runs; EAGLE's static-against-dynamic trees re-grown on the step shown."""
    from specviz.output.lesson_step import focus_step, telling
    from specviz.output.lesson_stored import REGROWN, regrown

    at = stop.at(b)
    if at.figure in COMPUTED:  # arithmetic or stored data (a computed stop's builds)
        from specviz.output import lesson_math

        return lesson_math.computed(at.figure, {})[0]
    if at.figure not in REGROWN:
        return figs.from_traces(at, traces)
    step = focus_step(telling([s for s in traces["eagle"].steps if s.detail is not None]), stop.step)
    if step is None:
        raise LessonError(f"Stop {stop.id!r}: EAGLE-2 drafted no step to re-grow.")
    return regrown(lm, at, traces["eagle"], step.index, configs(stop)[0]["eagle"])


def write_lesson_deck(
    path: Path, lm: LoadedModel, lesson: Lesson, progress: Callable[[str], None] | None = None
) -> Path:
    """Write the lesson's deck to `path` (.pptx); LessonError with one sentence when it cannot be written."""
    if path.suffix.lower() != ".pptx":
        raise LessonError(f"A slide deck is written as .pptx; {path.name} has another suffix.")
    slides = lesson_slides(lm, lesson, progress)
    try:
        path.write_bytes(deck_bytes(slides))
    except ExportError as exc:
        raise LessonError(str(exc)) from None
    return path


def pack_slides(pack: Any, lesson: Lesson, lecture: str | None = None) -> list[Slide]:
    """The lesson's slides from a recorded pack (no model): see output/lesson_slides.py."""
    from specviz.output.lesson_slides import pack_slides as slides

    return slides(pack, lesson, lecture)
