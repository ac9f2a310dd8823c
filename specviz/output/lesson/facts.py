"""What a stop of a recorded pack shows and what its checks may read: its runs, its step in focus, its numbers.

A stop on a group (runs) reads speedup, A, r and tokens per second of any method of its group (the medians of
measure.paired over the interleaved runs), the prefill's share of plain decoding's time, and the step it shows;
a stop drawn from a stored measurement reads that measurement (per prompt kind, batch size or context length).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from typing import Any

import plotly.graph_objects as go
import plotly.io as pio

from specviz.core import measure
from specviz.core.trace import StepTrace, Trace
from specviz.output.deck import badge, machines
from specviz.output.focus import focus_step, telling
from specviz.output.lesson import claims, fitted, formulas, runs, told
from specviz.output.lesson.model import LessonError, Stop
from specviz.output.lesson.names import display, relabel
from specviz.output.lesson.pack import Group, Pack
from specviz.output.lesson.pages import COMPUTED, PAGES, figure_of
from specviz.output.lesson.settings import configs
from specviz.output.viz import why
from specviz.output.viz.lookahead import accepted_origins

STEP_FIGURES = tuple(f.name for p in PAGES.values() for f in p.figures if f.one_step)  # figures of one step


def main_method(stop: Stop) -> str | None:
    """The method whose step the stop's figure draws (None for a figure of no single step)."""
    return figure_of(stop.page, stop.figure).method


def traces(group: Group) -> dict[str, Trace]:
    """One run per method to draw: each method's run of the median speedup, plain decoding's median run."""
    ar = sorted(group.runs["ar"], key=lambda t: t.generation_s)[len(group.runs["ar"]) // 2]
    return {"ar": ar} | {n: group.median(n) for n in group.runs if n != "ar"}


def shown_step(stop: Stop, group: Group) -> StepTrace | None:
    """The step the stop's figure shows, by the stop's rule (focus), in the run it is drawn from."""
    name = main_method(stop)
    if name is None or name not in group.runs:
        return None
    run = group.median(name)
    if name == "sps":
        from specviz.output.viz.acceptance import records

        return focus_step([s for s in run.steps if records(s)], stop.step)
    return focus_step(telling([s for s in run.steps if s.detail is not None]), stop.step)


def numbers(stop: Stop, group: Group) -> list[str]:
    """'Prompt lookup: A 3.88, 86.9 tok/s, 2.60× (2.41–2.73), 3 runs': the stop's methods over its group's runs."""
    out = []
    for name in stop.methods:
        if name not in group.runs:
            continue
        if name == "ar":
            tps = measure.spread([t.tokens_per_s for t in group.runs["ar"]])
            out.append(f"Plain decoding: A 1.00, {tps.median:.1f} tok/s ({tps.n} runs)")
            continue
        n, label = group.numbers(name), _label(group, name)
        line = f"{label}: A {n['A'].median:.2f}, r {n['r'].median:.2f}, "
        out.append(line + f"{n['tokens_per_s'].median:.1f} tok/s, speedup {n['speedup'].label()}")
    return out


def _label(group: Group, name: str) -> str:
    """'Prompt lookup'; a method judged by another rule says so: 'Speculative sampling (typical acceptance)', and
    one sampled where it is usually greedy: 'EAGLE-2 at T = 0.8'."""
    cfg = group.configs.get(name)
    rule = (cfg if isinstance(cfg, dict) else vars(cfg) if cfg is not None else {}).get("rule", "speculative")
    text = display(name)[0].upper() + display(name)[1:]
    if group.temperature > 0 and name != "sps":  # a method the pages run greedy, here sampled: another number
        text = f"{text} at T = {group.temperature:g}"
    return {"typical": f"{text} (typical acceptance)", "flawed": f"{text} (the flawed rule)"}.get(rule, text)


def _group_functions(group: Group, pack: Pack | None) -> dict[str, Callable[..., Any]]:
    def stat(key: str) -> Callable[[str], float]:
        def read(name: str) -> float:
            if name == "ar":
                return 1.0
            if name not in group.runs:
                raise KeyError(f"no {name!r} runs on this stop's prompt")
            return round(group.numbers(name)[key].median, 4)

        return read

    def tps(name: str) -> float:
        if name == "ar":
            return round(measure.spread([t.tokens_per_s for t in group.runs["ar"]]).median, 2)
        return round(group.numbers(name)["tokens_per_s"].median, 2)

    def prefill_share() -> float:
        return round(statistics.median(t.prefill_s / t.generation_s for t in group.runs["ar"]), 4)

    def copy_share() -> float:
        run = group.median("hybrid")
        copied = sum(s.accepted for s in run.steps if getattr(s.detail, "copy", False))
        return round(copied / max(1, run.new_tokens), 4)

    def same(name: str) -> bool:
        """Its median run wrote exactly plain decoding's tokens (what T = 0 promises)."""
        return group.median(name).output_ids == group.runs["ar"][0].output_ids

    return {"speedup": stat("speedup"), "A": stat("A"), "r": stat("r"), "tps": tps, "prefill_share": prefill_share,
            "copy_share": copy_share, "same": same,
            "low": lambda st, name: runs.bound(group, st, name, min),
            "high": lambda st, name: runs.bound(group, st, name, max),
            "amdahl": lambda name: runs.amdahl(group, name),
            "below": lambda name: runs.below(group, name),
            "reached": lambda name, depth: runs.reached(group.median(name), depth),
            "origin": lambda where: accepted_origins(group.median("lookahead"))[where],
            "step_ms": lambda name: runs.step_ms(group, name),
            "p_below": lambda name, bar: runs.p_below(group.median(name), bar),
            "accepted": lambda s: s.drafts_accepted, "proposed": lambda s: s.proposed,
            "entropy": lambda s: round(s.entropy, 4),
            "feature_cos": lambda s, which: round(s.detail.features[f"cos_{which}_true"], 4),
            "closer": lambda name: runs.closer(group.median(name)),
            "mean_cos": lambda name, which: runs.mean_cos(group.median(name), which),
            "width": lambda name: fitted.width(group.median(name)),
            "config": lambda name, key: _config(group, name)[key],
            "split": lambda name, part: round(why.split(traces(group)[name])[part], 2),  # the run the figure draws
            } | (_pack_functions(pack) | _fitted(pack, group) if pack is not None else {})  # fmt: skip


def _fitted(pack: Pack, group: Group) -> dict[str, Callable[..., Any]]:
    """fitted(m): whether m ran, in this group, at the shape the recording's fit chose on its device."""
    return {"fitted": lambda name: fitted.ran_fitted(pack.fit, name, group.configs[name], group.runs[name])}


def _config(group: Group, name: str) -> dict[str, Any]:
    cfg = group.configs[name]
    return dict(cfg) if isinstance(cfg, dict) else vars(cfg)


def _pack_functions(pack: Pack) -> dict[str, Callable[..., Any]]:
    """What any stop may read of the recording's groups: group(key, stat, method), a median of another group
    (e.g. greedy decoding's A beside a sampled stop's), and sps_fit(key, what), speculative sampling's run there
    as the cost model reads it (alpha, c, v, gamma, model, speedup)."""
    return fitted.functions(pack.fit) | {
        "group": lambda key, st, name: _stat(pack.groups[key], st, name),
        "sps_fit": lambda key, what: runs.sps_fit(pack.groups[key], _config(pack.groups[key], "sps"))[what],
    }


def _stat(group: Group, st: str, name: str) -> float:
    return round(statistics.median(runs.values(group, st, name)), 4)


def _stored_functions(stop: Stop, data: dict[str, Any]) -> dict[str, Callable[..., Any]]:
    if "categories" in data:  # the prompt kinds
        cats = data["categories"]

        def margin(kind: str) -> float:
            """The best method's speedup over the runner-up's on that kind."""
            first, second = sorted(cats[kind].values(), reverse=True)[:2]
            return round(first / second, 4)

        best = lambda kind: max(cats[kind], key=cats[kind].get)  # noqa: E731
        return {"speedup": lambda m, kind: cats[kind][m], "best": best, "margin": margin}
    if "points" in data:  # batch size or context length
        at: dict[tuple[Any, Any], dict[str, Any]] = {
            (p[0], p[1]): dict(zip(("speedup", "A", "r"), p[2:])) for p in data["points"]
        }
        return {k: (lambda m, x, k=k: at[m, int(x)][k]) for k in ("speedup", "A", "r")}
    if "rules" in data:  # the losslessness lab
        rules = data["rules"]
        names = {"kept": "accept_rate", "tv": "tv", "tv_exact": "tv_exact", "pvalue": "p_value"}
        return {f: (lambda rule, k=k: rules[rule][k]) for f, k in names.items()}
    if "ks" in data:  # the cost curve
        import numpy as np

        def cost(k: float) -> float:
            if not data["ms"][0] > 0:
                raise ValueError("the recorded cost curve does not start at a positive time")
            return round(float(np.interp(k, data["ks"], data["ms"]) / data["ms"][0]), 4)

        return {"cost": cost, "quiet": lambda: not data.get("contended")}
    bench = data.get("methods", {})  # the lineage's Spec-Bench numbers
    return {k: (lambda m, k=k: bench[m][k]) for k in ("speedup", "A", "r")}


# each function's kind: measured on the recording, stored (a bench of another day, the draft sweep, the heads'
# training logs) or arithmetic (on an example, or a model of other hardware); a stop's own group is measured
MEASURED_HERE = {"group": "measured", "sps_fit": "measured", "fit": "measured", "fit_knee": "measured"}
COMPUTED_KINDS: dict[str, claims.Kinds] = {
    "sps_exact": {"gap": "arithmetic", "rejected": "arithmetic", "residual_tokens": "arithmetic"},
    "sps_cost_model": dict.fromkeys(("alpha", "c", "best_gamma", "best_speedup", "alpha_for"), "stored"),
    "what_data_buys": {"top1": "stored"},
    "published_figures": {"published": "stored"},
    "gpu_whatif": {
        "flat": lambda device: "measured" if device == "cpu" else "arithmetic",
        "knee": "arithmetic",
        "flat_at": "arithmetic",
        "cpu_cost": "measured",
        "gpu_cost": "stored",
        "gpu_ms": "stored",
        "gpu_tokens": "stored",
        "gpu_floor_ms": "arithmetic",
    },
}


def facts(pack: Pack, stop: Stop) -> tuple[dict[str, Callable[..., Any]], StepTrace | None, claims.Kinds]:
    """The functions a stop's checks may call, the step it shows, and each function's kind."""
    if stop.figure in COMPUTED:  # every figure the stop walks: its builds' functions too
        fns: dict[str, Callable[..., Any]] = {}
        kinds: dict[str, Any] = dict(MEASURED_HERE)
        for name in dict.fromkeys([stop.home or stop.figure, *(b.figure for b in stop.builds)]):
            fns |= formulas.computed(name, pack.stops)[1] if name in COMPUTED else {}
            kinds |= COMPUTED_KINDS.get(name, {})
        return fns | _pack_functions(pack), None, kinds
    group = pack.group(stop)
    if group is None:
        data = pack.stops[stop.id].get("data", {})
        found = _stored_functions(stop, data)
        here = "measured" if "ks" in data or "rules" in data else "stored"  # the recording's curve and lab
        return found | _pack_functions(pack), None, dict.fromkeys(found, here) | MEASURED_HERE
    fns = _group_functions(group, pack) | _regrown(pack, stop.id)
    return fns, shown_step(stop, group), dict.fromkeys(fns, "measured")


def _regrown(pack: Pack, sid: str) -> dict[str, Callable[..., Any]]:
    """What the builds re-run when recorded read: regrown(kind), the drafts the static or the dynamic tree of EAGLE's
    static-against-dynamic build accepted over every step of the run re-grown, and seeded(where), Lookahead's
    accepted drafts by origin in the run re-made with the prompt seeding its pool (both in their layout's meta, read
    from the figure as the pack validated it: a stored figure is never parsed past its bounds)."""
    fns: dict[str, Callable[..., Any]] = {}
    if (fig := pack.figures.get(f"{sid}/eagle_static_vs_dynamic")) is not None:
        totals = fig.to_dict()["layout"]["meta"]["totals"]
        fns["regrown"] = lambda kind: totals[kind]
    if (fig := pack.figures.get(f"{sid}/sps_gamma_test")) is not None:
        from specviz.output.lesson import gamma

        fns |= gamma.functions(fig.to_dict()["layout"]["meta"]["gamma_test"])
    if (fig := pack.figures.get(f"{sid}/lookahead_origins")) is not None:
        counts = fig.to_dict()["layout"]["meta"]["origins"]
        fns["seeded"] = lambda where: counts[-1][where]
    return fns


# what reading a stop's data from a checked pack can still raise: its checks are then undecided, never a traceback
UNDECIDED = (LessonError, ArithmeticError, AttributeError, KeyError, IndexError, TypeError, ValueError, RecursionError)


def check(pack: Pack, stop: Stop) -> list[claims.Verdict]:
    """The stop's checks on the pack, then its narration as recorded against as told again from the pack's data
    (lesson.told); each undecided, with the reason, when the pack cannot give their data."""
    try:
        fns, step, kinds = facts(pack, stop)
    except UNDECIDED as exc:
        why = f"the pack cannot give this stop's data ({type(exc).__name__}: {str(exc)[:120]})"
        return [claims.Verdict(c.claim, None, (), why) for c in stop.checks]
    said = told.verdicts(stop.spoken, stop.tell(fns, step, kinds), pack.stops.get(stop.id, {}).get("told"))
    return [claims.evaluate(c.claim, fns, step, kinds) for c in stop.checks] + said


def narrate(pack: Pack, stop: Stop) -> told.Told:
    """The stop's narration told from the pack's data (its numbers and chosen sentences); the skeleton, numbers
    shown as …, when the pack cannot give the stop's data."""
    try:
        fns, step, kinds = facts(pack, stop)
    except UNDECIDED:
        return told.Told(told.skeleton(stop.spoken), (), ())
    return stop.tell(fns, step, kinds)


def live(stop: Stop, traces: Mapping[str, Trace], temperature: float = 0.0) -> told.Told:
    """The stop's narration told from runs made live (one per method, plain decoding's among them), as a page
    leaves them: numbers that need a range over interleaved runs, or a method not run, are shown as —."""
    runs = {n: [t] for n, t in traces.items()}
    if "ar" not in runs:
        return told.Told(told.skeleton(stop.spoken), (), ())
    group = Group("live", stop.prompt, temperature, {}, runs)
    fns = _group_functions(group, None)
    return stop.tell(fns, shown_step(stop, group), dict.fromkeys(fns, "measured"))


def figure(pack: Pack, stop: Stop) -> tuple[go.Figure, str]:
    """The stop's figure from the pack (no model), relabelled, and where a stored one was measured ('' for the
    pack's runs)."""
    from specviz.output.lesson.figures import from_traces

    if stop.figure in COMPUTED:
        fig, _fns, measured = formulas.computed(stop.figure, pack.stops)
        return _badged(pack, relabel(fig), measured), measured
    if (stored := _stored_figure(pack, f"{stop.id}/{stop.figure}")) is not None:  # a build re-grown when recorded
        return stored, ""
    group = pack.group(stop)
    if group is None:
        entry = pack.stops[stop.id]
        measured = str(entry.get("measured", ""))
        return _badged(pack, _stored_figure(pack, stop.id) or pio.from_json(entry["figure"]), measured), measured
    shown = set(configs(stop)[0]) | {"ar"}  # the stop's page runs these: the race's lanes, Compare's toggles
    return relabel(from_traces(stop, {n: t for n, t in traces(group).items() if n in shown})), ""


def _badged(pack: Pack, fig: go.Figure, measured: str) -> go.Figure:
    """A figure measured on another machine or day than the recording wears a badge naming them (deck.badge)."""
    p, found = pack.provenance, machines(measured)
    return badge(fig, "stored: " + "; ".join(found)) if set(found) - {f"{p.cpu}, {p.date[:10]}"} else fig


def _stored_figure(pack: Pack, key: str) -> go.Figure | None:
    """A copy of a stored figure the pack validated and relabelled when it was read (None if it has none)."""
    fig = pack.figures.get(key)
    return None if fig is None else go.Figure(fig)
