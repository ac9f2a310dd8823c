"""A narration told from the run it shows: its numbers read from the data, its sentences chosen by it.

A stop's narration may carry, besides its `[#mark]`s (lesson.claims):
- `{{ speedup("eagle") | .2f }}`: a number read from the stop's data in the checks' language, then formatted (a
  Python format spec after `|`; a float without one gets two decimals). A number filled from the run needs no
  band: on another device it reads that device's figure.
- `{{? speedup("eagle") > 1 }}wins here{{:}}loses here{{/}}`: a sentence for each outcome of a claim that can go
  either way on another device (which method wins, whether a tree pays), chosen by the data; either text may hold
  numbers.

What a narration was told when recorded (its numbers as shown, its choices) is stored with the pack; `lesson check`
tells it again from the pack's data, so a pack whose data changed afterwards fails (`verdicts`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from specviz.output.lesson import claims

TOKEN = re.compile(r"\{\{([?:/]?)(.*?)\}\}", re.DOTALL)
FORMULA = re.compile(r"\$\$.*?\$\$", re.DOTALL)
UNREAD = "—"  # a number the data cannot give (a live run without the method, a range from one run)
MAX_FILLS = 32


class ToldError(ValueError):
    """A narration whose numbers or choices cannot be read: which one and why."""


@dataclass(frozen=True)
class Fill:
    expr: str
    spec: str = ""


@dataclass(frozen=True)
class Choice:
    cond: str
    yes: tuple[str | Fill, ...]
    no: tuple[str | Fill, ...]


Part = str | Fill | Choice


def _tokens(narration: str) -> list[tuple[str, str, str]]:
    """(text before, kind: "?", ":", "/" or "" for a number, body) per {{ … }} outside a $$ formula $$ (LaTeX's
    braces are never read as a number), then ("rest", "", "") for the text after the last."""
    formulas = [f.span() for f in FORMULA.finditer(narration)]
    out, at = [], 0
    for m in TOKEN.finditer(narration):
        if not any(a <= m.start() < b for a, b in formulas):
            out.append((narration[at : m.start()], m.group(1), m.group(2).strip()))
            at = m.end()
    return [*out, (narration[at:], "end", "")]


class _Reader:
    """The parts read so far, and the open choice's condition and branches (choices do not nest)."""

    def __init__(self, functions: set[str] | Mapping[str, Any]) -> None:
        self.out: list[Part] = []
        self.branch: list[list[str | Fill]] | None = None
        self.cond, self.functions = "", functions

    def take(self, text: str, kind: str, body: str) -> None:
        here: list[Any] = self.out if self.branch is None else self.branch[-1]
        here.extend([text] if text else [])
        if kind == "?":
            if self.branch is not None:
                raise ToldError(f"a choice opens inside another ({{{{? {body} }}}}); choices do not nest")
            claims.parse(body, self.functions)
            self.branch, self.cond = [[]], body
        elif kind in (":", "/"):
            if self.branch is None or (kind == ":" and len(self.branch) > 1):
                raise ToldError(f"{{{{{kind}}}}} without the {{{{? … }}}} it belongs to")
            if kind == ":":
                self.branch.append([])
            else:
                no = tuple(self.branch[1]) if len(self.branch) > 1 else ()
                self.out.append(Choice(self.cond, tuple(self.branch[0]), no))
                self.branch = None
        elif kind == "":
            here.append(_fill(body, self.functions))


def parse(narration: str, functions: set[str] | Mapping[str, Any] = claims.FUNCTIONS) -> tuple[Part, ...]:
    """The narration as text, fills and choices; ToldError naming what cannot be read."""
    reader = _Reader(functions)
    for text, kind, body in _tokens(narration):
        reader.take(text, kind, body)
    if reader.branch is not None:
        raise ToldError(f"the choice {{{{? {reader.cond} }}}} is never closed with {{{{/}}}}")
    if sum(not isinstance(p, str) for p in reader.out) > MAX_FILLS:
        raise ToldError(f"a narration holds at most {MAX_FILLS} numbers and choices")
    return tuple(reader.out)


def _fill(body: str, functions: set[str] | Mapping[str, Any]) -> Fill:
    expr, _, spec = body.rpartition("|") if "|" in body else (body, "", "")
    expr, spec = expr.strip(), spec.strip()
    claims.parse(expr, functions)
    try:
        format(1.5, spec)
    except ValueError:
        raise ToldError(f"{{{{ {body} }}}}: {spec!r} is not a number's format (e.g. .2f, .0%)") from None
    return Fill(expr, spec)


HELD = "told"  # the mark plain() leaves where a number or a choice stood: the sentence is held by the data


def plain(parts: Sequence[Part]) -> str:
    """The narration with each number and choice replaced by the mark [#told] (lesson.claims audits the
    sentences: one told from the data is held by `verdicts`, never listed as unmarked)."""
    return "".join(p if isinstance(p, str) else f" [#{HELD}] " for p in parts)


def skeleton(parts: Sequence[Part]) -> str:
    """The narration before its data is read (a live stop whose runs have not finished): each number and each
    chosen sentence as …"""
    return " ".join("".join(p if isinstance(p, str) else "…" for p in parts).split())


@dataclass(frozen=True)
class Told:
    """A narration told from data: the text, each number as shown (in order), each choice (None: undecided), and
    the kind of the most measured figure read (lesson.claims.KINDS)."""

    text: str
    numbers: tuple[str, ...]
    choices: tuple[bool | None, ...]
    kind: str = ""

    def stored(self) -> dict[str, Any]:
        return {"numbers": list(self.numbers), "choices": list(self.choices)}


def tell(
    parts: Sequence[Part], fns: Mapping[str, Callable[..., Any]], step: Any = None, kinds: claims.Kinds | None = None
) -> Told:
    """The narration told from `fns` (a stop's facts) and the step it shows; never raises for unreadable data."""
    numbers: list[str] = []
    choices: list[bool | None] = []
    seen: set[str] = set()

    def show(f: Fill) -> str:
        numbers.append(_number(f, fns, step, kinds, seen))
        return numbers[-1]

    def said(branch: Sequence[str | Fill]) -> str:
        return "".join(b if isinstance(b, str) else show(b) for b in branch)

    text = []
    for p in parts:
        if isinstance(p, Choice):
            v = claims.evaluate(p.cond, fns, step, kinds)
            choices.append(v.holds)
            seen.add(v.kind)
            text.append(UNREAD if v.holds is None else said(p.yes if v.holds else p.no))
        else:
            text.append(said([p]))
    kind = next((k for k in claims.KINDS if k in seen), "")
    return Told(" ".join("".join(text).split()), tuple(numbers), tuple(choices), kind)


def _number(f: Fill, fns: Mapping[str, Callable[..., Any]], step: Any, kinds: Any, seen: set[str]) -> str:
    """A fill's value as shown: formatted by its spec (two decimals for a float without one), UNREAD otherwise."""
    try:
        value, kind = claims.value(f.expr, fns, step, kinds)
    except claims.ClaimError:
        return UNREAD
    seen.add(kind)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    try:
        return format(value, f.spec or (".2f" if isinstance(value, float) else ""))
    except ValueError:
        return UNREAD


def verdicts(parts: Sequence[Part], now: Told, stored: Mapping[str, Any] | None) -> list[claims.Verdict]:
    """The narration as recorded against as told again from the pack's data: a choice that would now go the other
    way (or cannot be decided), a number that now reads otherwise, or a pack that stores no narration fails."""
    conds = [p.cond for p in parts if isinstance(p, Choice)]
    if all(isinstance(p, str) for p in parts):
        return []
    if not stored:
        return [claims.Verdict("told: the narration", None, (), "the pack stores no narration; record it again")]
    was = list(stored.get("choices", []))
    out = [
        claims.Verdict(f"told: {c}", None if n is None else w is n, (("recorded", w), ("now", n)), kind=now.kind)
        for c, w, n in zip(conds, was + [None] * len(conds), now.choices, strict=False)
    ]
    said = list(stored.get("numbers", []))
    differ = [(i, a, b) for i, (a, b) in enumerate(zip(said, now.numbers, strict=False)) if a != b]
    figures = tuple((f"number {i + 1}", f"{a} recorded, {b} now") for i, a, b in differ[:4])
    whole = len(said) == len(now.numbers) and len(was) == len(now.choices)
    ok = whole and not differ and UNREAD not in now.numbers
    figures = figures or (("numbers", len(now.numbers)), ("recorded", len(said)))
    return [*out, claims.Verdict("told: the narration's numbers", ok, figures, kind=now.kind)]
