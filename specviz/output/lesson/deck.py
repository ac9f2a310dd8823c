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
from specviz.output.deck import Slide, deck_bytes, notes_text, split_title
from specviz.output.export import ExportError
from specviz.output.lesson import figures as figs
from specviz.output.lesson.figures import Drawn
from specviz.output.lesson.formulas import plain_math
from specviz.output.lesson.model import Lesson, LessonError, Stop
from specviz.output.lesson.pages import COMPUTED, PAGES, figure_of
from specviz.output.lesson.settings import configs
from specviz.tuning import fit
from specviz.tuning.compare import interleaved_runs, pairable


def run_stop(lm: LoadedModel, lesson: Lesson, stop: Stop, seed: int = 0) -> dict[str, Trace]:
    """Plain decoding and the stop's methods on its prompt, once each after a warm-up (name -> run)."""
    cfgs, temperature = configs(stop)  # none: plain decoding alone
    cfgs = fit.prepare(lm, cfgs)  # prompt lookup steers its draft length by this device's curve, as in the app
    text = lesson.prompt_text(stop)
    sampling = Sampling(max_new_tokens=lesson.max_new_tokens, temperature=temperature or 0.0, seed=seed)
    runs = interleaved_runs(lm, prepare(lm, text), cfgs, sampling, repeats=1, prompt=text)
    return {n: ts[0] for n, ts in runs.items() if ts}


def draw(lm: LoadedModel, lesson: Lesson, stop: Stop) -> Drawn:
    """The stop's figure, drawn as its page draws it, from runs made now or from the stored measurement."""
    source = figure_of(stop.page, stop.figure).source
    if source == "stored":
        return figs.stored(stop.figure, provenance(lm.describe()))
    if source == "latency":
        return figs.latency(lm)
    if source == "lineage":
        return figs.lineage(provenance(lm.describe()))
    if source == "lab":
        return figs.lab(lm, lesson.prompt_text(stop), stop.widget_values())
    if source == "computed":
        from specviz.output.lesson import formulas
        from specviz.output.lesson.stored import latency_data

        curve = {"curve": {"data": latency_data(lm)}} if stop.figure == "gpu_whatif" else {}
        fig, _fns, measured = formulas.computed(stop.figure, curve)
        return Drawn(fig, {}, measured)
    traces = run_stop(lm, lesson, stop)
    return Drawn(figs.from_traces(stop, traces), traces)


def numbers(stop: Stop, traces: dict[str, Trace]) -> list[str]:
    """The stop's live numbers: per method of the stop, A, tokens per second and the speedup beside plain decoding."""
    ar, out = traces.get("ar"), []
    for name in stop.methods:
        if (t := traces.get(name)) is None:
            continue
        label = "Plain decoding" if name == "ar" else methods.card(name).label
        line = f"{label}: A {t.mean_accepted:.2f}, {t.new_tokens / max(t.generation_s, 1e-9):.1f} tok/s"
        if ar is not None and name != "ar" and pairable(ar, t):
            line += f", {speedup(ar, t):.2f}× plain decoding (one run each)"
        out.append(line)
    return out


def notes(lm: LoadedModel, lesson: Lesson, stop: Stop, drawn: Drawn, where: Provenance) -> str:
    """Speaker notes: where and when it was measured (or that it is stored), the prompt, the settings, the numbers."""
    k = lesson.stops.index(stop) + 1
    settings: dict[str, Any] = {
        "Stop": f"{k} of {len(lesson.stops)} ({stop.id}), the {PAGES[stop.page].title} page, figure {stop.figure}",
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
        text = plain_math(told_live(stop, drawn.traces).text)
        for b in range(stop.frames):  # a build is its own slide, drawn from the same runs
            fig = drawn.figure if b == 0 else _build(lm, stop, b, drawn.traces)
            sub = split_title(fig, "")[1]
            out.append(Slide(stop.at(b).title, fig, notes(lm, lesson, stop, drawn, where), sub, text))
    return out


def told_live(stop: Stop, traces: dict[str, Trace]) -> Any:
    """The stop's narration told from the runs just made for it (lesson.facts.live)."""
    from specviz.output.lesson.facts import live

    sampling = next((t.config.get("sampling", {}) for t in traces.values()), {})
    return live(stop, traces, float(sampling.get("temperature", 0.0) or 0.0) if isinstance(sampling, dict) else 0.0)


def _build(lm: LoadedModel, stop: Stop, b: int, traces: dict[str, Trace]) -> Any:
    """A build's figure from the stop's runs; EAGLE's static-against-dynamic trees re-grown on the step shown."""
    from specviz.output.focus import focus_step, telling
    from specviz.output.lesson.stored import REGROWN, regrown

    at = stop.at(b)
    if at.figure in COMPUTED:  # arithmetic or stored data (a computed stop's builds)
        from specviz.output.lesson import formulas

        return formulas.computed(at.figure, {})[0]
    if at.figure not in REGROWN:
        return figs.from_traces(at, traces)
    name = figure_of(at.page, at.figure).method or ""
    step = focus_step(telling([s for s in traces[name].steps if s.detail is not None]), stop.step)
    if step is None:
        raise LessonError(f"Stop {stop.id!r}: {methods.card(name).label} drafted no step to re-grow.")
    return regrown(lm, at, traces[name], step.index, configs(stop)[0][name])


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
    """The lesson's slides from a recorded pack (no model): see output/lesson/slides.py."""
    from specviz.output.lesson.slides import pack_slides as slides

    return slides(pack, lesson, lecture)
