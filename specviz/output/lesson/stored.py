"""A pack's stops drawn from no run of their methods: the figure and the plain numbers their checks read.

The cost curve (this device's probe), the losslessness lab (run once here), the stored benches (prompt kinds,
batch size, context length) and the lineage's Spec-Bench numbers, each reduced to what a check can name; and the
builds re-run with the model when recorded.
"""

from __future__ import annotations

from typing import Any

from specviz.core.measure import provenance
from specviz.output.lesson import figures as figs
from specviz.output.lesson.figures import Drawn
from specviz.output.lesson.model import Lesson, Stop
from specviz.output.lesson.pages import PAGES, figure_of


def _scaling(axis: str) -> dict[str, Any]:
    """The merged batched benches along `axis`: (method, batch or context) -> speedup, A, r medians."""
    from specviz.output.viz import scaling
    from specviz.output.viz.stored import scaling_results

    fixed_context = axis == "batch"
    rows = []
    for p in scaling.merge(d for _, d in scaling_results()):
        if (p.get("context") is None) != fixed_context or (axis == "context" and int(p["batch"]) != 1):
            continue
        where = int(p["batch"]) if axis == "batch" else int(p["context"])
        rows.append([p["method"], where, *(float(p[k]["median"]) for k in ("speedup", "A", "r"))])
    return {"axis": axis, "points": rows}


def _kinds() -> dict[str, Any]:
    from specviz.output.viz.stored import category_bench

    found = category_bench()
    return {"categories": found[1].get("categories", {}) if found else {}}


def _lineage() -> dict[str, Any]:
    from specviz.output.viz.stored import merged_spec_bench

    bench, _used = merged_spec_bench()
    keys = {"speedup": "speedup", "A": "mean_accepted", "r": "step_cost"}
    return {"methods": {m: {k: float(v[src]) for k, src in keys.items()} for m, v in bench["methods"].items()}}


def latency_data(lm: Any) -> dict[str, Any]:
    from specviz.tuning.probe import cached_curve

    curve = cached_curve(lm)
    return {"ks": list(curve.ks), "ms": list(curve.ms), "contended": curve.contended}


def draw(lm: Any, lesson: Lesson, stop: Stop) -> tuple[Drawn, dict[str, Any]]:
    """The stop's figure (as the deck draws it) and its checks' data; 'this machine' named, as a pack is replayed
    on others."""
    drawn, data = _draw(lm, lesson, stop)
    machine = provenance(lm.describe()).machine
    title = drawn.figure.to_dict()["layout"].get("title", {}).get("text")
    if title and "this machine" in title:
        drawn.figure.update_layout(title_text=title.replace("this machine", machine))
    return Drawn(drawn.figure, drawn.traces, drawn.measured.replace("this machine", machine)), data


def _draw(lm: Any, lesson: Lesson, stop: Stop) -> tuple[Drawn, dict[str, Any]]:
    source = figure_of(stop.page, stop.figure).source
    if source == "lab":
        return _lab(lm, lesson, stop)
    here = provenance(lm.describe())
    if source == "latency":
        return figs.latency(lm), latency_data(lm)
    if source == "lineage":
        return figs.lineage(here), _lineage()
    data = _kinds() if stop.figure == "where_methods_win" else _scaling(stop.figure.rsplit("_", 1)[-1])
    return figs.stored(stop.figure, here), data


def _lab(lm: Any, lesson: Lesson, stop: Stop) -> tuple[Drawn, dict[str, Any]]:
    """The lab run once: its figure and, per rule, the drafts kept, the distance to p and the χ² p-value."""
    from specviz.core.prompts import prepare
    from specviz.output.viz.acceptance import lab_figure
    from specviz.tuning.lossless import lab

    result = lab(lm, prepare(lm, lesson.prompt_text(stop)), figs.lab_config(stop.widget_values()))
    keys = ("accept_rate", "tv", "tv_exact", "p_value")
    rules = {r["rule"]: {k: r[k] for k in keys} for r in result["rules"]}
    return Drawn(lab_figure(result), {}), {"rules": rules, "draft": result["draft"], "n": result["n"]}


# builds drawn once at record time: they re-run the model on a run's step
REGROWN = tuple(f.name for p in PAGES.values() for f in p.figures if f.regrown)


def regrown(lm: Any, stop: Stop, trace: Any, step_index: int, config: Any) -> Any:
    """A build re-run with the model: EAGLE-1's static tree against EAGLE-2's dynamic one, re-grown on the step the
    stop shows, or Lookahead's run beside one more with its pool seeded from the prompt (seeding's share)."""
    if stop.figure == "lookahead_origins":
        return _seeded(lm, trace, config)
    return _static_vs_dynamic(lm, trace, step_index, config)


def _static_vs_dynamic(lm: Any, trace: Any, step_index: int, config: Any) -> Any:
    """Both trees on the step shown, and both re-grown on every drafted step of the run: the totals compare them
    on all steps, not on one a rule chose for either (the layout's meta holds them for the checks)."""
    from specviz.output.viz.eagle_growth import compare_figure
    from specviz.tuning.eagle_replay import replay_trees

    steps = [s.index for s in trace.steps if s.committed and s.detail is not None]
    totals = {"static": 0, "dynamic": 0}
    for i in steps:
        replay = replay_trees(lm, trace, i, config)
        for kind in totals:
            totals[kind] += len(replay[kind]["accepted"]) - 1
    title = f"All {len(steps)} steps re-grown: static {totals['static']}, dynamic {totals['dynamic']} drafts accepted"
    fig = compare_figure(replay_trees(lm, trace, step_index, config), title=title)
    return fig.update_layout(meta={"totals": totals, "steps": len(steps)})


def _seeded(lm: Any, trace: Any, config: Any) -> Any:
    """The run shown and the same Lookahead run with the prompt's n-grams put in its pool before decoding."""
    from dataclasses import replace

    from specviz.core.sampling import Sampling
    from specviz.output.viz.lookahead import accepted_origins, origins_figure
    from specviz.tuning.compare import run_once

    sampling = Sampling(**trace.config["sampling"])
    seeded = run_once(lm, "lookahead", trace.prompt_ids, sampling, replace(config, seed_prompt=True), trace.prompt)
    share = accepted_origins(seeded)
    title = (
        f"Seeded with the prompt: {share['prompt']} of {sum(share.values())} accepted drafts from the prompt's "
        f"n-grams (A {trace.mean_accepted:.2f} → {seeded.mean_accepted:.2f})"
    )
    return origins_figure([trace, seeded], title)


def stored_builds(lm: Any, stop: Stop, group: Any) -> dict[str, str]:
    """The stop's builds that need the model once (REGROWN), as plotly JSON by figure name."""
    from specviz.output.lesson.facts import shown_step

    out = {}
    if stop.figure == "sps_gamma_test" and group is not None and "sps" in group.runs:  # the stop's own figure
        from specviz.output.lesson import gamma
        from specviz.output.viz.gamma import figure as gamma_figure

        out[stop.figure] = gamma_figure(gamma.test(lm, group)).to_json()
    for b in range(1, stop.frames):
        at = stop.at(b)
        if at.figure == "size_curve" and group is not None:
            out[at.figure] = size_curve(lm, group).to_json()
            continue
        name = figure_of(at.page, at.figure).method or ""
        if at.figure in REGROWN and group is not None and name in group.runs:
            step = shown_step(stop, group)
            if step is not None:
                fig = regrown(lm, at, group.median(name), step.index, group.configs[name])
                out[at.figure] = fig.to_json()
    return out


def size_curve(lm: Any, group: Any) -> Any:
    """The fit's predicted speedup against tree size on `lm`'s device, its fitted and the paper's size, and the A / r
    the group's runs measured at the fitted size (viz.why.size_figure)."""
    from specviz.output.lesson import fitted
    from specviz.output.viz.why import curves, size_figure

    data = fitted.summary(lm)
    return size_figure(curves(data, fitted.measured_points(group)), data["knee"], slide=False)
