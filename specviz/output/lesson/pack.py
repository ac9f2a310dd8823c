"""A lesson measured once and replayed: every stop's runs, their medians and ranges, and where and when.

`record` runs each group of stops (the stops that share a prompt and a temperature) once: plain decoding and
every method those stops show, a warm-up then `repeats` interleaved runs (tuning.compare.interleaved_runs, the
pages' own), so one method has one set of runs, and so one number, in every stop. A stop whose figure comes
from no run (the cost curve, the lab, a stored bench, the lineage) keeps its figure and the data its checks
read. `read` gives a Pack the app and `lesson check` draw from with no model; `fit` gives it as one lesson uses it,
so a pack costs what the lesson draws, whatever else it carries, and says which stops it lacks or holds besides.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from specviz.core import measure
from specviz.core.paths import REPO
from specviz.core.schema import SchemaError, check, check_size
from specviz.core.trace import Trace, TraceError
from specviz.output.lesson import pack_schema as schema
from specviz.output.lesson.model import Lesson, LessonError, Stop
from specviz.output.lesson.settings import configs
from specviz.output.pages import PAGES, by_source

PACK_FORMAT = "specviz-lesson-pack/1"
PACK_FILE = REPO / "docs" / "lesson" / "pack.json"  # the shipped pack: `lesson check` and `?pack` read it
MAX_PACK_BYTES = schema.MAX_PACK_BYTES  # what a pack may hold: lesson.pack_schema, beside its fields
# the pages whose settings shape a method's Config (a control names the field it sets), and the figures drawn from
# no run of the stop's methods: stored benches, the lineage, the cost curve, the lab, arithmetic
METHOD_PAGES = tuple(p.id for p in PAGES.values() if any(c.field for c in p.controls))
NO_RUNS = by_source("stored", "lineage", "latency", "lab", "computed")


@dataclass(frozen=True)
class Group:
    """Plain decoding and the methods of the stops on one prompt at one temperature, run in turn."""

    key: str  # "<prompt id>@<temperature>"
    prompt: str
    temperature: float
    configs: dict[str, Any]  # method -> its Config (plain dataclass)
    runs: dict[str, list[Trace]] = field(default_factory=dict)  # method -> interleaved runs ("ar" first)

    def numbers(self, method: str) -> dict[str, measure.Spread]:
        """Speedup, A, r, time to first token and tokens per second of `method` over its runs (measure.paired)."""
        runs = self.runs[method]
        out = measure.paired(self.runs["ar"][: len(runs)], runs)
        return out | {"tokens_per_s": measure.spread([t.tokens_per_s for t in runs])}

    def median(self, method: str) -> Trace:
        """The run of the median speedup (a page draws its per-step figures from it)."""
        pairs = sorted(zip(self.runs["ar"], self.runs[method]), key=lambda p: measure.speedup(*p))
        return pairs[len(pairs) // 2][1]


def group_key(stop: Stop, lesson: Lesson) -> str | None:
    """The group a stop's runs belong to, None for a stop drawn from no run."""
    if stop.figure in NO_RUNS:
        return None
    return f"{stop.prompt}@{float(configs(stop)[1] or 0.0):g}"


def plan(lesson: Lesson) -> dict[str, Group]:
    """The groups to run: a method page's settings fix a method's Config for its group (two pages that disagree
    are refused), a Timeline or Compare stop takes the method as the group's method pages set it, else its own."""
    groups: dict[str, Group] = {}
    owner: dict[tuple[str, str], str] = {}
    ordered = sorted(lesson.stops, key=lambda s: s.page not in METHOD_PAGES)  # method pages first
    for stop in ordered:
        if (key := group_key(stop, lesson)) is None:
            continue
        cfgs, temperature = configs(stop)
        group = groups.setdefault(key, Group(key, stop.prompt, float(temperature or 0.0), {}))
        for name, cfg in cfgs.items():
            if name not in group.configs:
                group.configs[name], owner[key, name] = cfg, stop.id
            elif stop.page in METHOD_PAGES and asdict(group.configs[name]) != asdict(cfg):
                raise LessonError(
                    f"Stop {stop.id!r} runs {name} with other settings than stop {owner[key, name]!r} on the same "
                    "prompt; a pack holds one run of each method per prompt, so give both stops the same settings."
                )
    return groups


class Figures(Mapping[str, Any]):
    """A pack's stored figures, stop id (or "<stop id>/<build's figure>") -> the figure, each validated by plotly
    and relabelled the first time it is asked for, then kept (never per rerun; to be copied before it is changed):
    a figure no stop of the lesson draws is never validated. What a visitor's figure raises is one LessonError."""

    def __init__(self, stops: dict[str, Any], name: str) -> None:
        self._texts: dict[str, str] = {}
        self._built: dict[str, Any] = {}
        self._name = name
        for sid, stop in stops.items():
            self._texts |= {sid: stop["figure"]} if "figure" in stop else {}
            self._texts |= {f"{sid}/{k}": v for k, v in stop.get("stored", {}).items()}

    def __getitem__(self, key: str) -> Any:
        if key not in self._built:
            self._built[key] = _figure(self._texts[key], f"{self._name}'s stored figure {key[:80]!r}")
        return self._built[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._texts)

    def __len__(self) -> int:
        return len(self._texts)

    def validate(self) -> None:
        """Every figure validated now: the first that cannot be drawn refused in one sentence (LessonError)."""
        for key in self:
            self[key]


@dataclass(frozen=True)
class Pack:
    """A recorded lesson, read back: its groups, each stop's group or figure, and where and when; `fit` gives it as
    one lesson uses it (the stops and stored figures it does not have dropped, with a word: `note`)."""

    groups: dict[str, Group]
    stops: dict[str, dict[str, Any]]
    provenance: measure.Provenance
    load_after: float
    settings: dict[str, Any]
    lesson: dict[str, Any]
    figures: Mapping[str, Any] = field(default_factory=dict)  # stored figures, validated when first drawn
    name: str = "the pack"
    dropped: tuple[str, ...] = ()  # fitted to a lesson: the stops it does not have (their figures never validated)
    unused: int = 0  # and how many stored figures were dropped with them or from its own stops' builds
    lacks: tuple[str, ...] = ()  # the lesson's stops the pack does not hold
    # fitted packs, by the figures of the lesson they were fitted to (or why that lesson's figures are refused)
    fits: dict[tuple, Pack | LessonError] = field(default_factory=dict, repr=False, compare=False)
    fit: dict[str, Any] = field(default_factory=dict)  # the fit the recording ran at (lesson.fitted.summary)

    def group(self, stop: Stop) -> Group | None:
        entry = self.stops.get(stop.id)
        if entry is None:
            raise LessonError(f"The pack holds no stop {stop.id!r}; record it again for this lesson.")
        return self.groups[entry["group"]] if entry.get("group") else None

    def nearest(self, stop: Stop) -> Group | None:
        """The stop's group, or for a stop drawn from no run the group its page can replay instead of running the
        model (its prompt at its temperature, else its prompt, else the first): the page below it stays quiet."""
        if (own := self.group(stop)) is not None or not self.groups:
            return own
        key = f"{stop.prompt}@{float(configs(stop)[1] or 0.0):g}"
        same = [g for g in self.groups.values() if g.prompt == stop.prompt]
        return self.groups.get(key) or (same or list(self.groups.values()))[0]

    def brief(self, runs: str = "") -> str:
        """'Recorded on 2026-12-03 on a 2-core Intel(R) Xeon(R) Processor, under load (load average 4.1 → 5.9), 3
        interleaved runs each'; `runs` says otherwise for a stop drawn from no interleaved runs ('run once')."""
        p = self.provenance
        after = replace(p, load=self.load_after)
        busy = "under load" if measure.contended(p) or measure.contended(after) else "quiet"
        runs = runs or f"{self.settings.get('repeats', '?')} interleaved runs each"
        return (
            f"Recorded on {p.date[:10]} on a {p.cores}-core {p.cpu}, {busy} (load average {p.load:.1f} → "
            f"{self.load_after:.1f}), {runs}, commit {p.commit}"
        )

    def where(self) -> str:
        """'Recorded on <machine>, <device>, on <date> (load average 0.4 → 0.6 on 2 cores), commit abc123'."""
        p = self.provenance
        where = p.describe(flag_load=False).replace("measured on", "recorded on", 1)
        threads = f", {self.settings['threads']} torch thread(s)" if self.settings.get("threads") else ""
        return f"{where} (load average {p.load:g} → {self.load_after:g} on {p.cores} cores{threads}), commit {p.commit}"

    def note(self) -> str:
        """What fitting it to a lesson found: the lesson's stops it lacks (it does not fit), else the stops and
        stored figures it holds that the lesson does not draw (dropped); '' for a pack of just the lesson."""
        extra = f"{len(self.dropped)} stop(s) the lesson does not have ({_few(self.dropped)})"
        if self.lacks:
            lacks = f"it lacks {len(self.lacks)} of its stops ({_few(self.lacks)})"
            return f"{self.name} does not fit the lesson: {lacks}" + (f" and holds {extra}." if self.dropped else ".")
        what = [extra] * bool(self.dropped) + [f"{self.unused} stored figure(s) it does not draw"] * bool(self.unused)
        return f"{self.name} holds {' and '.join(what)}: dropped, never drawn." if what else ""


def _few(ids: tuple[str, ...], shown: int = 4) -> str:
    """'a', 'b' or 'a', 'b', 'c', 'd', … and 97 more: each id cut to 24 characters, as repr (a visitor's text)."""
    named = ", ".join(repr(i[:24]) for i in ids[:shown])
    return named + (f", … and {len(ids) - shown} more" if len(ids) > shown else "")


def fit(pack: Pack, lesson: Lesson) -> Pack:
    """The pack as `lesson` uses it, its figures validated once (a refusal said again, not worked out again): kept
    in the pack per lesson, so every visitor of one lesson is given the same fitted pack."""
    want = {s.id: {s.figure, *(b.figure for b in s.builds)} for s in lesson.stops}
    key = tuple(sorted((sid, tuple(sorted(f))) for sid, f in want.items()))
    if (done := pack.fits.get(key)) is None:
        try:
            done = _fitted(pack, want)
        except LessonError as exc:
            done = exc
        if len(pack.fits) >= 4:  # lessons are few (the shipped files): a bound all the same
            pack.fits.pop(next(iter(pack.fits)))
        pack.fits[key] = done
    if isinstance(done, LessonError):
        raise LessonError(str(done))
    return done


def _fitted(pack: Pack, want: dict[str, set[str]]) -> Pack:
    """Before any figure is validated: the stops the lesson does not have dropped, and each kept stop's stored
    figures but those of its own figure and its builds; then what is kept validated, so a pack costs what its
    lesson draws (the schema's caps on one stop, times the lesson's stops), whatever else it carries."""
    stops: dict[str, dict[str, Any]] = {}
    for sid, entry in pack.stops.items():
        if sid in want and "stored" in entry:
            entry = entry | {"stored": {k: v for k, v in entry["stored"].items() if k in want[sid]}}
        if sid in want:
            stops[sid] = entry
    figures = Figures(stops, pack.name)
    figures.validate()
    dropped = tuple(sid for sid in pack.stops if sid not in want)
    lacks = tuple(sid for sid in want if sid not in pack.stops)
    unused = len(pack.figures) - len(figures)
    return replace(pack, stops=stops, figures=figures, dropped=dropped, unused=unused, lacks=lacks, fits={})


def read(path: str | Path = PACK_FILE, lesson: Lesson | None = None) -> Pack:
    """A pack file (fitted to `lesson` when given); LessonError with one sentence when it cannot be used (a device
    or a folder is never read)."""
    file = Path(path)
    try:
        if not file.is_file():
            raise LessonError(f"The pack {file.name} is not a regular file.")
        if file.stat().st_size > MAX_PACK_BYTES:
            raise LessonError(f"{file.name} is larger than a pack may be ({MAX_PACK_BYTES >> 20} MB).")
        with file.open("rb") as f:
            raw = f.read(MAX_PACK_BYTES + 1)  # a file that grew since: still no more than a pack may be
    except OSError as exc:
        raise LessonError(f"The pack {file.name} could not be read ({type(exc).__name__}).") from None
    pack = from_bytes(raw, file.name)
    return pack if lesson is None else fit(pack, lesson)


def from_bytes(raw: bytes, name: str = "the pack") -> Pack:
    """A pack from a file's or an upload's bytes: sized, parsed and checked once (lesson.pack_schema)."""
    try:
        data = schema.parse(raw, name)
    except SchemaError as exc:
        raise LessonError(str(exc)) from None
    return from_dict(data, name)


def _load_methods(groups: Any) -> None:
    """Import the module of every method a pack ran: each defines (and registers) its step record's type."""
    from specviz import methods

    for g in groups:
        for n in g["runs"]:
            if n in methods.available():
                methods.get(n)


def from_dict(data: Any, name: str = "the pack") -> Pack:
    """A pack checked against lesson.pack_schema.PACK, then built: its traces and provenance; its stored figures
    are validated when a lesson draws them (`fit`, Figures), never those of a stop no lesson shows."""
    if not isinstance(data, dict) or data.get("format") != PACK_FORMAT:
        raise LessonError(f"{name} is not a lesson pack ({PACK_FORMAT}).")
    from specviz import methods

    try:
        check_size(data, name, depth=schema.MAX_PACK_DEPTH)
        check(data, schema.PACK, name)
        if why := schema.problem(data, {"ar", *methods.available()}):
            raise SchemaError(f"{name} cannot be replayed: {why}.")
        _load_methods(data["groups"])
        groups = {
            g["key"]: Group(
                g["key"],
                g["prompt"],
                float(g["temperature"]),
                dict(g["configs"]),
                {n: [Trace.from_dict(t) for t in ts] for n, ts in g["runs"].items()},
            )
            for g in data["groups"]
        }
        prov = measure.Provenance.from_dict(data["provenance"])
    except (SchemaError, TraceError) as exc:
        raise LessonError(_sentence(str(exc))) from None
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError, RecursionError) as exc:
        raise LessonError(f"{name} is incomplete ({type(exc).__name__}: {str(exc)[:120]}).") from None
    settings, lesson, stops = dict(data["settings"]), dict(data["lesson"]), dict(data["stops"])
    fitted = dict(data.get("fit") or {})
    return Pack(
        groups, stops, prov, float(data["load_after"]), settings, lesson, Figures(stops, name), name, fit=fitted
    )


def _sentence(text: str) -> str:
    """One line of at most 300 characters, ending in a full stop."""
    line = " ".join(text.split())
    return (line if len(line) <= 300 else line[:299] + "…").rstrip(".") + "."


def _figure(text: str, where: str) -> Any:
    """One stored figure validated by plotly and relabelled; LessonError in one sentence when it cannot be."""
    import plotly.graph_objects as go

    from specviz.output.lesson.names import relabel

    try:
        return relabel(go.Figure(schema.figure_data(text, where)))
    except SchemaError as exc:
        raise LessonError(_sentence(str(exc))) from None
    except (KeyError, TypeError, ValueError, AttributeError, ArithmeticError, RecursionError) as exc:
        raise LessonError(_sentence(f"{where} cannot be drawn ({type(exc).__name__}: {str(exc)[:120]})")) from None
