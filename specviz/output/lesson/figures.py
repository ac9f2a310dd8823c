"""A lesson stop's figure for its slide, drawn by the builder its page declares (output/pages/), at the step its
stop's rule picks; and the figures drawn from no run (a stored bench, the cost curve, the lineage, the lab)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from specviz.core.measure import Provenance, provenance
from specviz.core.model import LoadedModel
from specviz.core.prompts import prepare
from specviz.core.trace import Trace
from specviz.output.deck import stored_measurement
from specviz.output.lesson.model import LessonError, Stop
from specviz.output.lesson.pages import PAGES
from specviz.output.pages import Shown


@dataclass(frozen=True)
class Drawn:
    """A stop's figure, the runs behind it (name -> first run) and where a stored one was measured ('' if live)."""

    figure: go.Figure
    traces: dict[str, Trace]
    measured: str = ""


def shown(stop: Stop) -> Shown:
    """What the stop's page builders read: its widget values and its step rule."""
    return Shown(stop.widget_values(), stop.step)


def from_traces(stop: Stop, traces: dict[str, Trace]) -> go.Figure:
    """The stop's figure from the runs made for it, by its page's own builder; LessonError when its page cannot
    draw one from them."""
    try:
        return PAGES[stop.page].draw(stop.figure, traces, shown(stop))
    except (KeyError, IndexError) as exc:
        raise LessonError(f"Stop {stop.id!r}: the runs gave no {stop.figure!r} to draw ({exc}).") from None


def stored(name: str, here: Provenance) -> Drawn:
    """A figure Compare draws from a stored bench, marked with where and when it was measured."""
    from specviz.output.viz.stored import stored_figures

    figs = stored_figures(here)
    if name not in figs:
        raise LessonError(f"No stored measurement here draws {name!r} (docs/bench/ holds the benches).")
    meta = figs[name].to_dict()["layout"].get("meta")
    return Drawn(figs[name], {}, meta.get("measured", "") if isinstance(meta, dict) else "")


def latency(lm: LoadedModel) -> Drawn:
    """This device's forward latency against the number of new tokens (the probe's curve, stored or measured)
    over its roofline, as the home page draws it: the read bandwidth and matmul peak, measured once a process."""
    from specviz.output.viz.latency import latency_figure
    from specviz.tuning.probe import cached_curve
    from specviz.tuning.roofline import device_roofs

    here = provenance(lm.describe())
    curve = cached_curve(lm)
    roof, _why, peaks = device_roofs(lm, curve.ks, curve.prefix_len)[0]  # the model's own device and dtype
    where = curve.measured(here) + (f", disturbed: {curve.contended}" if curve.contended else "")
    where += f"; the roofline from {peaks.dtype} peaks {peaks.measured()}"
    return Drawn(stored_measurement(latency_figure(curve, here=here, roof=roof), where), {}, where)


def lineage(here: Provenance) -> Drawn:
    """The works and what each changed, with the stored Spec-Bench numbers of those that run here."""
    from specviz.output.viz.lineage import lineage_figure
    from specviz.output.viz.stored import merged_spec_bench

    bench, used = merged_spec_bench()

    def where(data: dict[str, Any]) -> str:
        try:
            return Provenance.from_dict(data.get("provenance")).describe(here)
        except ValueError:
            return "where and when it was measured is not recorded"

    each = "; ".join(f"{', '.join(names)}: {where(data)}" for _path, data, names in used)
    fig = lineage_figure(bench if used else None, where(used[0][1]) if len(used) == 1 else "", slide=True)
    return Drawn(fig, {}, each)


def lab_config(v: dict[str, Any]) -> Any:
    """The lab's settings from the Acceptance page's widget values."""
    from specviz.tuning.lossless import LabConfig

    return LabConfig(
        temperature=v.get("acceptance.temperature", 0.8),
        n=v.get("acceptance.samples", 20000),
        eps=v.get("acceptance.eps", 0.09),
        delta=v.get("acceptance.delta", 0.3),
        layers=f"0-{v.get('acceptance.depth', 4) - 1}",
        draft=v.get("acceptance.lab_draft", "perturbed"),
    )


def lab(lm: LoadedModel, prompt: str, v: dict[str, Any]) -> Drawn:
    """The losslessness lab on the stop's prompt with the Acceptance page's settings."""
    from specviz.output.viz.acceptance import lab_figure
    from specviz.tuning.lossless import lab as run_lab

    return Drawn(lab_figure(run_lab(lm, prepare(lm, prompt), lab_config(v))), {})  # the lab takes the model's lock
