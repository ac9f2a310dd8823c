"""A lesson stop's figure for its slide, drawn by the builder its page uses, at the step its page first shows."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import plotly.graph_objects as go

from specviz.core.details import LookaheadStep
from specviz.core.measure import Provenance, provenance
from specviz.core.model import LoadedModel
from specviz.core.prompts import prepare
from specviz.core.trace import Trace
from specviz.output.deck import stored_measurement
from specviz.output.lesson import LessonError, Stop
from specviz.output.lesson_step import focus_step, telling


@dataclass(frozen=True)
class Drawn:
    """A stop's figure, the runs behind it (name -> first run) and where a stored one was measured ('' if live)."""

    figure: go.Figure
    traces: dict[str, Trace]
    measured: str = ""


def _detailed(trace: Trace) -> list:
    return [s for s in trace.steps if s.detail is not None]


def _focus(stop: Stop, trace: Trace) -> Any:
    """The step in focus by the stop's rule (IndexError without one: no figure)."""
    step = focus_step(telling(_detailed(trace)), stop.step)
    if step is None:
        raise IndexError("no step drafted")
    return step


def _timeline(stop: Stop, traces: dict[str, Trace]) -> go.Figure:
    from specviz.output.viz.timeline import timeline_figure, tokens_over_time_figure

    lanes = [traces["ar"], *(t for n, t in traces.items() if n != "ar")]
    if stop.figure == "tokens_over_time":
        return tokens_over_time_figure(lanes)
    return timeline_figure(lanes, title="Every method's forward passes on one clock")  # a slide cannot play the race


def _acceptance(stop: Stop, traces: dict[str, Trace]) -> go.Figure:
    from specviz.output.viz.acceptance import decisions_figure, records, typical_figure, typical_points

    trace, v = traces["sps"], stop.widget_values()
    if stop.figure == "acceptance_typical":
        return typical_figure(typical_points(trace), v.get("acceptance.eps", 0.09), v.get("acceptance.delta", 0.3))
    step = focus_step([s for s in trace.steps if records(s)], stop.step)
    if step is None:
        raise LessonError(f"Stop {stop.id!r}: speculative sampling judged no draft on this prompt.")
    if stop.figure == "sps_residual":
        return _residual(step)
    if stop.figure == "kv_cache":
        from specviz.output.viz.kvcache import cells, kv_figure

        after = trace.steps[step.index + 1] if step.index + 1 < len(trace.steps) else step
        return kv_figure(cells(trace, step), after.root_from, step.index)
    return decisions_figure(step)


def _residual(step: Any) -> go.Figure:
    """p, q and the normalised residual at the step's rejection (the record of the rejected draft)."""
    from specviz.output.viz.acceptance import records, rejection_figure

    rejected = [r for r in records(step) if not r["accepted"] and "dists" in r]
    if not rejected:
        raise IndexError("the step rejected no draft")
    text = rejected[0].get("text", "")
    title = f"Step {step.index}: {text!r} rejected; the next token is drawn from norm(max(0, p − q))"
    return rejection_figure(rejected[0]["dists"], title)


def _medusa(stop: Stop, traces: dict[str, Trace]) -> go.Figure:
    from specviz.output.viz.tree import mask_figure, step_tree_data, steps_figure, token_strip, tree_figure

    trace = traces["medusa"]
    if stop.figure == "hydra_depths":
        from specviz.output.viz.depth import acceptance_by_depth, depth_figure

        k = int(traces["hydra"].config.get("heads", 4))
        series: dict[str, Sequence[float]] = {n: acceptance_by_depth(traces[n], k) for n in ("medusa", "hydra")}
        return depth_figure(series, "Steps that accepted at least d drafted tokens, same prompt and tree size",
                            "share of steps", prefix="depth")  # fmt: skip
    if stop.figure == "medusa_steps":
        return steps_figure(trace, traces.get("ar"))
    step = _focus(stop, trace)
    if stop.figure == "medusa_tokens":
        return token_strip(trace, upto=step.index)
    parents, labels, status, hover = step_tree_data(step)
    if stop.figure == "medusa_mask":
        return mask_figure(parents, labels, step.detail.path, "Tree-attention mask")
    return tree_figure(parents, labels, status, hover, f"Candidate tree, step {step.index}")


def _eagle(stop: Stop, traces: dict[str, Trace]) -> go.Figure:
    from specviz.output.viz.eagle import feature_figure, growth_figure, verify_figures
    from specviz.output.viz.hybrid import origins_figure
    from specviz.output.viz.tree import steps_figure

    if stop.figure == "hybrid_origins":
        return origins_figure(traces["hybrid"])
    if stop.figure == "eagle_tree_sampling":
        from specviz.output.viz.treesampling import sampling_figure

        return sampling_figure(_focus(stop, traces["eagle"]))
    if stop.figure == "eagle3_fusion":
        from specviz.output.viz.eagle3 import fusion_figure

        return fusion_figure(_focus(stop, traces["eagle3"]), 30)  # SmolLM2-135M's 30 decoder layers
    trace = traces["eagle"]
    if stop.figure == "eagle_steps":
        return steps_figure(trace, traces.get("ar"))
    step = _focus(stop, trace)
    if stop.figure == "eagle_features":
        return feature_figure(step)
    if stop.figure == "eagle_verify":
        return verify_figures(step)[0]
    d = step.detail
    return growth_figure(d.tree, max(d.tree["depth"]) + 1, d.path)  # the last stage: reranked and verified


def _lookahead(stop: Stop, traces: dict[str, Trace]) -> go.Figure:
    from specviz.output.viz.jacobi import jacobi_grid_figure
    from specviz.output.viz.lookahead import mask_figure, verify_figure, window_figure
    from specviz.output.viz.tree import steps_figure

    if stop.figure == "jacobi_grid":
        jac = traces["jacobi"]
        rows = [s.index for s in _detailed(jac)]
        upto = rows[min(8, len(rows) - 1)] if rows else None  # the page's pass slider starts at 8
        return jacobi_grid_figure(
            jac, upto=upto, title=f"Jacobi convergence: A = {jac.mean_accepted:.2f} tokens per pass"
        )
    trace = traces["lookahead"]
    if stop.figure == "lookahead_steps":
        return steps_figure(trace, traces.get("ar"))
    step = _focus(stop, trace)
    d = step.detail_as(LookaheadStep)
    if stop.figure == "lookahead_verify":
        return verify_figure(d, title=f"Verification branch: root {step.texts[0]!r}")
    if stop.figure == "lookahead_mask":
        return mask_figure(d.layout, title="One forward, two branches: the attention mask")
    return window_figure(d, title=f"Step {step.index}: the Jacobi window and the n-grams it harvests")


def _compare(stop: Stop, traces: dict[str, Trace]) -> go.Figure:
    from specviz.output.viz import compare as cmp
    from specviz.tuning.compare import summarize

    rows = summarize(traces)
    return cmp.a_r_figure(rows) if stop.figure == "a_and_r" else cmp.speedup_figure(rows)


BUILDERS: dict[str, Callable[[Stop, dict[str, Trace]], go.Figure]] = {
    "timeline": _timeline,
    "acceptance": _acceptance,
    "medusa": _medusa,
    "eagle": _eagle,
    "lookahead": _lookahead,
    "compare": _compare,
}


def from_traces(stop: Stop, traces: dict[str, Trace]) -> go.Figure:
    """The stop's figure from the runs made for it; LessonError when its page cannot draw one from them."""
    try:
        return BUILDERS[stop.page](stop, traces)
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
