"""Recording a lesson: every group of stops run once on this model (a warm-up, then interleaved repeats), every
stop drawn from no run drawn now, and where and when, as the plain data `pack.read` gives back as a Pack."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from specviz.core import measure
from specviz.core.trace import Trace
from specviz.output.lesson import fitted, stored
from specviz.output.lesson.model import Lesson, LessonError, Stop
from specviz.output.lesson.pack import PACK_FORMAT, Group, group_key, plan
from specviz.output.lesson.pages import COMPUTED


def _run(lm: Any, lesson: Lesson, group: Group, repeats: int, note: Callable[[str], None]) -> dict[str, list[Trace]]:
    from specviz.core.prompts import prepare
    from specviz.core.sampling import Sampling
    from specviz.tuning import fit
    from specviz.tuning.compare import interleaved_runs

    text = lesson.prompt_text(next(s for s in lesson.stops if s.prompt == group.prompt))
    # as live: a tree's or a window's shape fitted to this device, prompt lookup steered by its curve; the pack
    # keeps the Configs as they ran
    cfgs = fit.prepare(lm, group.configs)
    group.configs.update(cfgs)
    sampling = Sampling(max_new_tokens=lesson.max_new_tokens, temperature=group.temperature, seed=0)
    note(f"{group.key}: plain decoding and {', '.join(cfgs) or 'nothing else'}, warm-up + {repeats} interleaved")
    ids, tick = prepare(lm, text), lambda done: note(f"  {group.key}: {done:.0%} of its runs")
    return interleaved_runs(lm, ids, cfgs, sampling, repeats=repeats, prompt=text, progress=tick)


def _figure_only(lm: Any, lesson: Lesson, stop: Stop) -> dict[str, Any]:
    """A stop drawn from no run: its figure as plotly JSON, where it was measured, and what its checks read."""
    drawn, data = stored.draw(lm, lesson, stop)
    return {"figure": drawn.figure.to_json(), "measured": drawn.measured, "data": data}


def record(lm: Any, lesson: Lesson, repeats: int = 3, note: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every group and draw every stop drawn from no run; the pack as plain data (see `write`)."""
    if repeats < 3:
        raise LessonError(f"A pack takes at least 3 interleaved repeats (asked for {repeats}).")
    groups, start = plan(lesson), measure.provenance(lm.describe())
    for group in groups.values():
        group.runs.update(_run(lm, lesson, group, repeats, note))
    stops: dict[str, Any] = {}
    for stop in lesson.stops:
        note(f"stop {stop.id}")
        key = group_key(stop, lesson)
        if stop.figure in COMPUTED:  # drawn when read, from the pack's other stops and the stored sweeps
            stops[stop.id] = {"computed": True}
        elif key is None:
            stops[stop.id] = _figure_only(lm, lesson, stop)
        else:
            built = stored.stored_builds(lm, stop, groups[key])  # a build that re-runs the model once on the step shown
            stops[stop.id] = {"group": key} | ({"stored": built} if built else {})
    raw = Path(lesson.source).read_bytes() if Path(lesson.source).is_file() else b""
    return told(
        {
            "format": PACK_FORMAT,
            "lesson": {
                "title": lesson.title,
                "file": Path(lesson.source).name,
                "sha256": hashlib.sha256(raw).hexdigest(),
            },
            "provenance": start.to_dict(),
            "load_after": measure.load_average(),
            "settings": {
                "model": lm.name,
                "max_new_tokens": lesson.max_new_tokens,
                "repeats": repeats,
                "warmup": 1,
                "threads": _threads(),
            },
            "groups": [_group_dict(g) for g in groups.values()],
            "stops": stops,
            "fit": fitted.summary(lm),
        },
        lesson,
    )


def told(data: dict[str, Any], lesson: Lesson) -> dict[str, Any]:
    """The pack with each stop's narration as told from its data (numbers as shown, sentences chosen), stored so
    that `lesson check` fails the pack if its data is changed afterwards."""
    from specviz.output.lesson.facts import narrate
    from specviz.output.lesson.pack import from_dict

    pack = from_dict(data, "the recording")
    for stop in lesson.stops:
        data["stops"][stop.id]["told"] = narrate(pack, stop).stored()
    return data


def _threads() -> int:
    import torch

    return torch.get_num_threads()


def slim(g: Group) -> Group:
    """The group with each method's step records kept on its median run only: the one its figures and its checks
    read a step from (lesson.facts); the other runs keep every step's tokens and times, which the numbers read."""
    runs = {}
    for name, ts in g.runs.items():
        shown = g.median(name) if name != "ar" else None
        runs[name] = [t if t is shown else replace(t, steps=[replace(s, detail=None) for s in t.steps]) for t in ts]
    return replace(g, runs=runs)


def _group_dict(g: Group) -> dict[str, Any]:
    g = slim(g)
    medians = {n: {k: asdict(v) for k, v in g.numbers(n).items()} for n in g.runs if n != "ar"}
    return {
        "key": g.key,
        "prompt": g.prompt,
        "temperature": g.temperature,
        "configs": {n: asdict(c) for n, c in g.configs.items()},
        "numbers": medians,  # for a reader of the file; the app and the checks recompute them from the runs
        "runs": {n: [t.to_dict() for t in ts] for n, ts in g.runs.items()},
    }


def write(data: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, allow_nan=False), encoding="utf-8")
    return path
