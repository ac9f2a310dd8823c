"""What a page declaration is: its controls (widget key, range or options, the Config field it sets), the methods
it runs (their Configs from its widget values), and its figures by name, each with the builder that draws it.

The Streamlit page (views/), the lesson (output/lesson*.py), its deck and the export gallery read these records;
none keeps its own list of a page's settings or figures. Nothing here imports streamlit.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from dataclasses import fields as config_fields
from typing import Any

import plotly.graph_objects as go

from specviz import methods
from specviz.core.trace import StepTrace, Trace
from specviz.output.focus import focus_step, telling

REPEATS = (1, 9)  # a live page's interleaved runs: its `<page>.repeats` input
KINDS = ("int", "float", "bool", "choice", "methods")
# where a figure comes from: the runs of the page's methods, arithmetic or a model over stored data
# (output/lesson/formulas.py), a stored bench, the device's cost curve, the lineage's works, the losslessness lab
SOURCES = ("runs", "computed", "stored", "latency", "lineage", "lab")


@dataclass(frozen=True)
class Control:
    """One widget of a page: its key, what it accepts, and the method Config field it sets ("" when none)."""

    key: str
    kind: str  # one of KINDS
    low: float = 0
    high: float = 0
    options: tuple[Any, ...] = ()
    field: str = ""  # the Config field it sets
    method: str = ""  # whose Config: "" for the page's own method

    @property
    def spec(self) -> tuple:
        """("int"|"float", low, high) | ("bool",) | ("choice", options) | ("methods",)."""
        if self.kind in ("int", "float"):
            return (self.kind, self.low, self.high)
        return (self.kind, self.options) if self.kind == "choice" else (self.kind,)


@dataclass(frozen=True)
class Shown:
    """What a builder reads besides the runs: the page's widget values, the rule picking the step in focus, and
    the step a page's slider chose (its index in the run; None: the rule's)."""

    values: dict[str, Any] = field(default_factory=dict)
    step: str = "longest"
    index: int | None = None


# (name -> its run, Shown) -> the figure; Compare's builders also take a list of interleaved repeats for a run
Builder = Callable[[dict[str, Any], Shown], go.Figure]
# one trace -> a method's own views of it by name: what `export` writes and the browser test checks
Views = Callable[[Trace], dict[str, go.Figure]]


@dataclass(frozen=True)
class Figure:
    """A figure a page draws (or only the lesson draws, from the page's runs), by the name a stop focuses."""

    name: str
    draw: Builder | None = None  # from the runs (name -> trace); None for a figure of another source
    source: str = "runs"  # one of SOURCES
    method: str | None = None  # whose run (and step) it draws: what a stop's checks read
    one_step: bool = False  # it draws one step (a method stop shows drafts accepted on it)
    lesson_only: bool = False  # the page does not draw it; the lesson does
    regrown: bool = False  # a build re-grown with the model on the step shown (output/lesson/stored.regrown)
    wide: bool = False  # it needs a slide's whole width (its panels side by side): a lesson's narration goes above


Runs = Callable[[dict[str, Any], str, Sequence[str]], tuple[dict[str, Any], float | None]]


@dataclass(frozen=True)
class Beside:
    """A method a method page runs beside its own, on the same Config fields: while its toggle (a bool control's
    key) is on; without a toggle, when a stop shows it or focuses one of its figures."""

    method: str
    toggle: str = ""


@dataclass(frozen=True)
class Page:
    """One page, declared once: its id (its view is views/<id>.py) and title, its controls, the methods it runs,
    its figures, its icon."""

    id: str
    title: str
    controls: tuple[Control, ...] = ()
    # its own rule for the {method: Config} it runs for a figure, from its widget values and the methods a stop
    # shows, and the temperature it sets (None: the sidebar's); None: `configs` builds them from the declaration
    runs: Runs | None = None
    figures: tuple[Figure, ...] = ()
    icon: str = ""  # its icon in the app's navigation (a Material icon's name)
    method: str = ""  # a method page's own method, whose Config its controls set ("" for a page that runs none)
    beside: tuple[Beside, ...] = ()  # the methods it runs beside its own
    # each method's own views of one of its traces, for the methods this page teaches (a method none names draws
    # the timeline only): the output layer registers a method's figures, where the import contracts see them
    views: Mapping[str, Views] = field(default_factory=dict, compare=False)

    @property
    def file(self) -> str:
        """Its Streamlit page: views/<id>.py."""
        return f"views/{self.id}.py"

    @property
    def settings(self) -> dict[str, Control]:
        return {c.key: c for c in self.controls}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.figures)

    def configs(
        self, values: dict[str, Any], figure: str = "", shows: Sequence[str] = ()
    ) -> tuple[dict[str, Any], float | None]:
        """{method: Config} the page runs for `figure` (the methods `shows` a stop shows) and the temperature it sets:
        its own `runs` where it has one, else its method's Config from the preset's shape and the controls' values,
        checked by the Config itself, and the same fields for each method beside it (the page's module is
        declarations only: the values go from the widgets through here to the methods)."""
        if self.runs is not None:
            return self.runs(values, figure, shows)
        if not self.method:
            return {}, None
        fields = shape(self.id, self.method, values) | own(values, self.controls)
        names = [self.method, *(b.method for b in self.beside if self.runs_beside(b, values, figure, shows))]
        return {n: fitted(n, fields if n == self.method else shared(n, fields)) for n in names}, values.get(
            f"{self.id}.temperature"
        )

    def runs_beside(self, b: Beside, values: dict[str, Any], figure: str, shows: Sequence[str]) -> bool:
        """Whether `b` runs: its toggle's value, or (no toggle) a stop shows it or focuses one of its figures."""
        if b.toggle:
            return bool(values.get(b.toggle))
        return b.method in shows or any(f.name == figure and f.method == b.method for f in self.figures)

    def figure(self, name: str) -> Figure:
        """The figure called `name`; KeyError naming the page's figures."""
        for f in self.figures:
            if f.name == name:
                return f
        raise KeyError(f"the {self.id} page draws no {name!r} (figures: {', '.join(self.names)})")

    def draw(self, name: str, traces: Mapping[str, Any], shown: Shown | None = None) -> go.Figure:
        """Figure `name` from the runs; KeyError when it is drawn from no run, IndexError when no step fits."""
        builder = self.figure(name).draw
        if builder is None:
            raise KeyError(f"{name!r} is drawn from no run of the page's methods")
        return builder(dict(traces), shown or Shown())


def focus(trace: Trace, shown: Shown, steps: Sequence[StepTrace] | None = None) -> StepTrace:
    """The step in focus among `steps` (default: the drafted ones): the page's chosen one, else the rule's
    (IndexError when there is none: no figure)."""
    pool = list(steps) if steps is not None else trace.drafted_steps
    if shown.index is not None:
        chosen = next((s for s in pool if s.index == shown.index), None)
    else:
        chosen = focus_step(pool if steps is not None else telling(pool), shown.step)
    if chosen is None:
        raise IndexError("no step drafted")
    return chosen


def shape(page: str, method: str, values: dict[str, Any]) -> dict[str, Any]:
    """A method page's Config fields a preset sets, where its widget values set them; the others are left to the
    device's fit, which fills them where the run starts (specviz.tuning.fit.measured)."""
    from specviz.tuning import presets

    return {k: values[f"{page}.{k}"] for k in presets.fields(method) if f"{page}.{k}" in values}


def own(values: dict[str, Any], controls: Sequence[Control], method: str = "") -> dict[str, Any]:
    """The fields of `method`'s Config ("" the page's own) that the controls set and the widget values hold."""
    return {c.field: values[c.key] for c in controls if c.field and c.method == method and c.key in values}


def shared(method: str, fields: dict[str, Any]) -> dict[str, Any]:
    """The page's fields that `method`'s Config has: a method beside the page's takes those (EAGLE-3 the tree's
    shape), and its own fit or defaults for the rest (DFlash, whose block is no tree)."""
    have = config_names(method)
    return {k: v for k, v in fields.items() if k in have}


def config_names(method: str) -> set[str]:
    """The names of `method`'s Config fields."""
    return {f.name for f in config_fields(methods.get(method).Config)}


def fitted(method: str, fields: dict[str, Any]) -> Any:
    """`method`'s Config from a page's fields: its `fitted` where it has one (the nearest Config its checks accept,
    since no slider sees another's value: EAGLE's budget floor within total_tokens), else the Config as given."""
    cls = methods.get(method).Config
    return getattr(cls, "fitted", cls)(**fields)


def given(build: Callable[..., go.Figure], *names: str, **fixed: Any) -> Builder:
    """A figure drawn by `build` from the inputs the page hands over (a run, a stored bench, a measured curve, a
    table it computed): `names` in order, "param=name" by keyword, and `fixed` keywords (a title)."""
    args = [n for n in names if "=" not in n]
    kw = dict(n.split("=", 1) for n in names if "=" in n)

    def draw(inputs: dict[str, Any], _shown: Shown) -> go.Figure:
        return build(*(inputs[n] for n in args), **{k: inputs[v] for k, v in kw.items()}, **fixed)

    return draw


def strip(method: str) -> Builder:
    """The method's output as a strip of tokens, up to the step in focus (viz.steps.token_strip)."""

    def draw(traces: dict[str, Trace], shown: Shown) -> go.Figure:
        from specviz.output.viz.steps import token_strip

        return token_strip(traces[method], upto=focus(traces[method], shown).index)

    return draw


def per_step(method: str) -> Builder:
    """The per-step chart of a method's run beside plain decoding's (viz.tree.steps_figure)."""

    def draw(traces: dict[str, Trace], shown: Shown) -> go.Figure:
        from specviz.output.viz.steps import steps_figure

        return steps_figure(traces[method], traces.get("ar"), current=shown.index)

    return draw
