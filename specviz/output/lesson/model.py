"""The lesson: an ordered path of stops across the app's pages, read from a TOML file a lecturer can edit or replace.

Each stop names a page, the figure it puts in focus (one that page draws), two or three sentences of narration,
whose live numbers to show, the shipped prompt it runs on and the page's settings that make its point. The
settings are the page's own widget keys (what a lecturer sees on the page); `<page>.preset` fills a method
page's sliders from a named preset. Nothing here imports streamlit: ui/lesson.py runs the lesson in the app,
output/lesson/deck.py writes it as slides.
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specviz import methods
from specviz.core.prompts import PromptError, PromptItem, preset_prompts
from specviz.output.focus import STEP_RULES
from specviz.output.lesson import claims, parts, told
from specviz.output.lesson.pages import PAGES, REPEATS
from specviz.tuning import presets

LESSON_FILE = Path(__file__).with_name("lesson.toml")  # shipped; a lecturer's own file replaces it
ENV = "SPECVIZ_LESSON"  # a lesson file named here replaces the shipped one (the app's and the CLI's default)
MAX_BYTES, MAX_STOPS, MAX_NARRATION = 256 * 1024, 60, 700  # a narration is two or three sentences
MAX_TEMPLATE = 2400  # a narration as written: its numbers and chosen sentences spelled out (lesson.told)
__all__ = ["PAGES", "Lesson", "LessonError", "Stop", "lesson_path", "load_lesson"]
STOP_KEYS = {"id", "title", "page", "figure", "narration", "prompt", "methods", "settings", "step", "checks", "builds",
             "questions"}  # fmt: skip
MAX_CHECKS = 12
TOP_KEYS = {"title", "prompt", "max_new_tokens", "repeats", "stop", "lecture"}


class LessonError(ValueError):
    """A lesson file that cannot be used; the message says which file, which stop and why, in one sentence."""


@dataclass(frozen=True)
class Stop:
    """One point of the lesson: a page, the figure in focus, what to say, and the settings that make the point."""

    id: str
    title: str
    page: str  # a page's id (output/pages/)
    figure: str  # one of the figures its page declares
    narration: str
    prompt: str  # a shipped prompt's id (specviz/data/prompts.jsonl)
    methods: tuple[str, ...] = ()  # whose live numbers the stop shows (A, speedup against plain decoding)
    settings: tuple[tuple[str, Any], ...] = ()  # (widget key, value), as written in the file
    step: str = "longest"  # the rule that picks the step in focus (focus.STEP_RULES)
    checks: tuple[claims.Check, ...] = ()  # the narration's facts, as checks over the stop's data (lesson.claims)
    builds: tuple[parts.Build, ...] = ()  # figures the clicker walks to after `figure`, before the next stop
    questions: tuple[tuple[str, str], ...] = ()  # a method stop's four answers (lesson.parts.QUESTIONS)
    home: str = ""  # at a build (Stop.at): the stop's own figure
    sentences: tuple[tuple[str, tuple[str, ...]], ...] = ()  # the narration's sentences, each with its marks
    spoken: tuple[told.Part, ...] = ()  # the narration as text, numbers read from the data and chosen sentences

    def tell(self, fns: Any, step: Any = None, kinds: Any = None) -> told.Told:
        """The narration told from a stop's facts (lesson.facts.facts): its numbers and chosen sentences."""
        return told.tell(self.spoken or (self.narration,), fns, step, kinds)

    @property
    def file(self) -> str:
        return PAGES[self.page].file

    @property
    def frames(self) -> int:
        """How many figures the stop walks: its own, then its builds."""
        return 1 + len(self.builds)

    @property
    def clicks(self) -> int:
        """How many clicks the stop takes: its figures, then (a method stop) its four questions answered."""
        return self.frames + bool(self.questions)

    def at(self, build: int) -> Stop:
        """The stop as it stands at build `build` (0: itself): that build's figure and title."""
        if build <= 0 or not self.builds:
            return self
        b = self.builds[min(build, len(self.builds)) - 1]
        return replace(self, figure=b.figure, title=b.title, home=self.home or self.figure)

    def widget_values(self) -> dict[str, Any]:
        """The page's widget values for this stop: a `<page>.preset` becomes the sliders' values it stands for."""
        out: dict[str, Any] = {}
        for key, value in self.settings:
            if key.endswith(".preset"):
                out |= {
                    f"{self.page}.{k}": v for k, v in presets.values(self.page, presets.get(self.page, value)).items()
                }
            else:
                out[key] = list(value) if isinstance(value, tuple) else value
        return out


@dataclass(frozen=True)
class Lesson:
    """The stops in order, the shipped prompts they run on (by id) and the answer length every stop asks for."""

    title: str
    stops: tuple[Stop, ...]
    prompts: tuple[tuple[str, str, str], ...]  # (id, text, "kind · title") of every shipped prompt a stop uses
    max_new_tokens: int
    source: str  # the file it was read from
    repeats: int = 0  # interleaved runs on the live pages (their `<page>.repeats`); 0: the pages' own default
    prompt: str = ""  # the shipped prompt's id every stop runs on unless it names its own
    lectures: tuple[parts.Lecture, ...] = ()  # named runs of stops (e.g. How the methods work, When they pay)

    def lecture(self, lecture_id: str | None) -> Lesson:
        """The lesson cut to one lecture's stops, in the lecture's order (None or "all": the whole lesson)."""
        if lecture_id in (None, "", "all"):
            return self
        for lec in self.lectures:
            if lec.id == lecture_id:
                by_id = {s.id: s for s in self.stops}
                return replace(self, stops=tuple(by_id[i] for i in lec.stops), title=lec.title, lectures=(lec,))
        known = ", ".join(lec.id for lec in self.lectures) or "none"
        raise LessonError(f"The lesson has no lecture {lecture_id!r} (its lectures: {known}).")

    def lecture_of(self, stop_id: str) -> parts.Lecture | None:
        return next((lec for lec in self.lectures if stop_id in lec.stops), None)

    def values(self, stop: Stop) -> dict[str, Any]:
        """Everything a stop sets: its page's widgets (the lesson's repeats on a live page), prompt and length."""
        repeats = {f"{stop.page}.repeats": self.repeats} if self.repeats else {}
        out = {k: v for k, v in repeats.items() if k in PAGES[stop.page].settings} | stop.widget_values()
        return out | {"sidebar.prompt": self.prompt_text(stop), "sidebar.max_new_tokens": self.max_new_tokens}

    def prompt_text(self, stop: Stop) -> str:
        return next(text for pid, text, _ in self.prompts if pid == stop.prompt)

    def prompt_label(self, stop: Stop) -> str:
        """'code · Add type hints': the shipped prompt's kind and title."""
        return next(label for pid, _, label in self.prompts if pid == stop.prompt)

    def index(self, stop_id: str) -> int:
        """The position of the stop called `stop_id`; LessonError names the ones there are."""
        for i, s in enumerate(self.stops):
            if s.id == stop_id:
                return i
        raise LessonError(f"The lesson has no stop {stop_id!r}; its stops are {', '.join(s.id for s in self.stops)}.")


def lesson_path(path: str | Path | None = None) -> Path:
    """The lesson file to read: `path` if given, else the one named by $SPECVIZ_LESSON, else the shipped one."""
    return Path(path or os.environ.get(ENV) or LESSON_FILE).expanduser()


def _toml(text: str, name: str) -> dict[str, Any]:
    # tomllib is in the standard library from Python 3.11; on 3.10 huggingface_hub's tomli stands in for it
    try:
        toml = importlib.import_module("tomllib" if sys.version_info >= (3, 11) else "tomli")
    except ImportError:
        raise LessonError("Reading a lesson needs Python 3.11 or the tomli package.") from None
    try:
        return toml.loads(text)
    except toml.TOMLDecodeError as exc:
        raise LessonError(f"{name} is not valid TOML ({exc}).") from None
    except RecursionError:  # arrays nested thousands deep
        raise LessonError(f"{name} nests its values too deeply to be a lesson file.") from None


def load_lesson(path: str | Path | None = None) -> Lesson:
    """Read and check a lesson file (see lesson_path); LessonError with one sentence when it cannot be used."""
    file = lesson_path(path)
    if not file.is_file():  # a device or a pipe is never read (/dev/zero was read until memory ran out)
        raise LessonError(f"The lesson file {str(file)!r} could not be read (it is not a regular file).")
    try:
        if file.stat().st_size > MAX_BYTES:
            raise LessonError(f"{file} is larger than a lesson file may be ({MAX_BYTES // 1024} KB).")
        with file.open("rb") as f:
            text = f.read(MAX_BYTES + 1).decode("utf-8")
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: a NUL byte in the path
        raise LessonError(f"The lesson file {file!r} could not be read ({type(exc).__name__}: {exc}).") from None
    return parse_lesson(_toml(text, str(file)), str(file))


def _text(value: Any, where: str, key: str, limit: int = 200) -> str:
    if not isinstance(value, str) or not value.strip():
        raise LessonError(f"{where}: '{key}' must be non-empty text.")
    if len(value) > limit:
        raise LessonError(f"{where}: '{key}' is {len(value)} characters long; at most {limit} fit a stop.")
    return " ".join(value.split())


def _shipped() -> dict[str, PromptItem]:
    try:
        return {p.id: p for p in preset_prompts()}
    except PromptError as exc:
        raise LessonError(f"The shipped prompts could not be read ({exc}).") from None


def parse_lesson(data: dict[str, Any], source: str = "lesson") -> Lesson:
    """Check a lesson's parsed TOML (a table with `title`, `prompt`, `max_new_tokens` and `[[stop]]` entries)."""
    if extra := sorted(set(data) - TOP_KEYS):
        raise LessonError(f"{source}: unknown key {extra[0]!r} at the top (known: {', '.join(sorted(TOP_KEYS))}).")
    title = _text(data.get("title", "The lesson"), source, "title")
    shipped = _shipped()
    prompt = data.get("prompt", "code-hints")
    if not isinstance(prompt, str) or prompt not in shipped:
        raise LessonError(f"{source}: 'prompt' {prompt!r} is not a shipped prompt ({', '.join(shipped)}).")
    tokens = data.get("max_new_tokens", 48)
    if not isinstance(tokens, int) or isinstance(tokens, bool) or not 1 <= tokens <= 512:
        raise LessonError(f"{source}: 'max_new_tokens' must be a whole number from 1 to 512, not {tokens!r}.")
    repeats = data.get("repeats", 0)
    if not isinstance(repeats, int) or isinstance(repeats, bool) or not 0 <= repeats <= REPEATS[1]:
        raise LessonError(f"{source}: 'repeats' must be a whole number from 1 to {REPEATS[1]} (0: the pages' own).")
    raw = data.get("stop")
    if not isinstance(raw, list) or not raw:
        raise LessonError(f"{source}: a lesson needs at least one [[stop]].")
    if len(raw) > MAX_STOPS:
        raise LessonError(f"{source}: {len(raw)} stops; a lesson may have at most {MAX_STOPS}.")
    stops = tuple(_stop(s, f"{source}: stop {i + 1}", prompt, shipped) for i, s in enumerate(raw))
    seen: set[str] = set()
    for i, s in enumerate(stops):
        if s.id in seen:
            raise LessonError(f"{source}: stop {i + 1}: the id {s.id!r} is used by an earlier stop.")
        seen.add(s.id)
    try:
        lectures = parts.lectures(data.get("lecture"), [s.id for s in stops])
    except parts.PartError as exc:
        raise LessonError(f"{source}: {exc}.") from None
    used = tuple(
        (pid, shipped[pid].text, f"{shipped[pid].category} · {shipped[pid].title or pid}")
        for pid in dict.fromkeys(s.prompt for s in stops)
    )
    return Lesson(title, stops, used, tokens, source, repeats, prompt, lectures)


def _stop(raw: Any, where: str, default_prompt: str, shipped: dict[str, PromptItem]) -> Stop:
    if not isinstance(raw, dict):
        raise LessonError(f"{where}: a stop is a table ([[stop]] with keys), not {type(raw).__name__}.")
    if extra := sorted(set(raw) - STOP_KEYS):
        raise LessonError(f"{where}: unknown key {extra[0]!r} (a stop has {', '.join(sorted(STOP_KEYS))}).")
    sid = _text(raw.get("id"), where, "id", 40)
    where = f"{where} ({sid!r})"
    page = raw.get("page")
    if page not in PAGES:
        raise LessonError(f"{where}: 'page' {page!r} is not a page; choose from {', '.join(PAGES)}.")
    figure = raw.get("figure")
    if figure not in PAGES[page].names:
        names = ", ".join(PAGES[page].names)
        raise LessonError(f"{where}: 'figure' {figure!r} is not one the {page} page can focus; choose from {names}.")
    prompt = raw.get("prompt", default_prompt)
    if not isinstance(prompt, str) or prompt not in shipped:
        raise LessonError(f"{where}: 'prompt' {prompt!r} is not a shipped prompt ({', '.join(shipped)}).")
    names = raw.get("methods", [])
    if not isinstance(names, list) or any(n not in methods.available() for n in names):
        raise LessonError(f"{where}: 'methods' must list methods among {', '.join(methods.available())}.")
    settings = raw.get("settings", {})
    if not isinstance(settings, dict):
        raise LessonError(f"{where}: 'settings' must be a table of the page's widget keys and values.")
    checked = tuple(_setting(page, k, v, where) for k, v in settings.items())
    narration, spoken, sentences = _narration(raw.get("narration"), where)
    title = _text(raw.get("title"), where, "title", 90)
    try:
        builds = parts.builds(raw.get("builds"), PAGES[page].names, title)
        questions = parts.questions(raw.get("questions"))
    except parts.PartError as exc:
        raise LessonError(f"{where}: {exc}.") from None
    rule, checks = _step_checks(raw, where)
    stop = Stop(sid, title, page, figure, narration, prompt, tuple(names), checked, rule, checks, builds, questions)
    return replace(stop, sentences=sentences, spoken=spoken)


def _narration(raw: Any, where: str) -> tuple[str, tuple[told.Part, ...], tuple[tuple[str, tuple[str, ...]], ...]]:
    """The narration as written (its marks stripped), read into text, numbers and chosen sentences, and each
    sentence with its marks, the numbers and choices taken out (those the data holds, never audited as unmarked)."""
    shown, _ = claims.marked(raw)  # its `[#mark]`s stripped: what a stop shows
    narration = _text(shown, where, "narration", MAX_TEMPLATE)
    try:
        spoken = told.parse(narration)
        _, sentences = claims.marked(told.plain(told.parse(" ".join(raw.split()))))
    except (told.ToldError, claims.ClaimError) as exc:
        raise LessonError(f"{where}: the narration cannot be told: {exc}.") from None
    if len(said := told.skeleton(spoken)) > MAX_NARRATION:
        raise LessonError(f"{where}: the narration is {len(said)} characters long; at most {MAX_NARRATION} fit a stop.")
    return narration, spoken, sentences


def _step_checks(raw: dict[str, Any], where: str) -> tuple[str, tuple[claims.Check, ...]]:
    """The stop's step rule and its checks, each parsed (lesson.claims): LessonError naming a bad one."""
    rule = raw.get("step", "longest")
    if rule not in STEP_RULES:
        raise LessonError(f"{where}: 'step' must be one of {', '.join(STEP_RULES)}, not {rule!r}.")
    checks = raw.get("checks", [])
    if not isinstance(checks, list) or len(checks) > MAX_CHECKS:
        raise LessonError(f"{where}: 'checks' must be a list of at most {MAX_CHECKS} expressions.")
    try:
        return rule, claims.checks(checks, claims.FUNCTIONS)
    except claims.ClaimError as exc:
        raise LessonError(f"{where}: a check cannot be read: {exc}.") from None


def _setting(page: str, key: str, value: Any, where: str) -> tuple[str, Any]:
    """(widget key, the value as the page's widget holds it); LessonError naming the key and what it accepts."""
    control = PAGES[page].settings.get(key)
    if control is None:
        known = ", ".join(PAGES[page].settings) or "none"
        raise LessonError(f"{where}: the {page} page has no setting {key!r} (settings: {known}).")
    return key, _value(control.spec, key, value, where)


def _value(spec: tuple, key: str, value: Any, where: str) -> Any:
    """The value as a widget of this spec holds it; LessonError naming the key and what it accepts."""
    kind = spec[0]
    if kind == "bool" and isinstance(value, bool):
        return value
    if kind == "methods" and isinstance(value, list) and all(v in methods.available() and v != "ar" for v in value):
        return tuple(value)
    if kind == "choice" and value in spec[1] and not isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool) and spec[1] <= value <= spec[-1]:
        if kind == "int" and value == int(value):
            return int(value)
        if kind == "float":
            return float(value)
    raise LessonError(f"{where}: setting {key!r} must be {_wants(kind, spec)}, not {value!r}.")


def _wants(kind: str, spec: tuple) -> str:
    """What a setting of this kind accepts, in words."""
    if kind in ("int", "float"):
        return f"a {'whole ' if kind == 'int' else ''}number from {spec[1]} to {spec[2]}"
    if kind == "choice":
        return f"one of {', '.join(map(str, spec[1]))}"
    if kind == "methods":
        return f"a list of methods among {', '.join(n for n in methods.available() if n != 'ar')}"
    return "true or false"
