"""Claims as checks: a stop's narration states its facts as small expressions over the stop's own data.

The language is Python's expression syntax cut down to a whitelist, parsed with `ast` and walked here (never
`eval`): numbers and quoted strings, the stop's functions called with them, + − × ÷, comparisons, and / or /
not. E.g. `accepted(step) >= 1`, `speedup("hybrid") > speedup("eagle")`, `r("pld", 8064) <= 1.1 * r("pld", 128)`.
Evaluating one gives a Verdict: whether it holds, every figure that decided it, and its kind: measured (on the
recording), stored (a bench of another day, a sweep, a training log) or arithmetic (on an example, or a model).

A check in the lesson file is a string, or a table { check = "…", kind = "measured", backs = "mark" } whose
`backs` names the narration's sentences it holds: a sentence carries its mark as `[#mark]` (stripped from what
is shown). `audit` finds a marked sentence no check backs, a check backing no sentence, a kind declared wrong,
and lists the unmarked sentences that state numbers or comparisons.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

MAX_CLAIM = 200  # characters of one check
MAX_TEXT = 10_000  # characters a check's string arithmetic may build ('x' * 999999999 took 1 GB)
COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
           ast.Eq: operator.eq, ast.NotEq: operator.ne}  # fmt: skip
ARITH = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
NODES = (ast.Expression, ast.Compare, ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.BinOp,
         ast.Call, ast.Name, ast.Constant, ast.Load, *COMPARE, *ARITH)  # fmt: skip
STEP = "step"  # the one name that is not a function: the step the stop shows
FUNCTIONS = {"speedup", "A", "r", "tps", "prefill_share", "copy_share", "accepted", "proposed", "best", "kept",
             "tv", "tv_exact", "pvalue", "cost", "quiet", "same", "gap", "rejected", "alpha", "c", "best_gamma",
             "best_speedup", "alpha_for", "knee", "flat", "top1", "low", "high", "amdahl", "reached", "origin",
             "step_ms", "entropy", "group", "sps_fit", "margin", "feature_cos", "closer", "mean_cos", "below",
             "residual_tokens", "regrown", "seeded", "p_below", "published", "fitted", "width", "split", "fit",
             "fit_knee", "gamma_test", "config", "flat_at", "cpu_cost", "gpu_cost", "gpu_ms", "gpu_tokens",
             "gpu_floor_ms"}  # fmt: skip  # what some stop can read (lesson.facts)
KINDS = ("measured", "stored", "arithmetic")  # strongest first: a check is as measured as the most measured figure
MARK = re.compile(r"\s*\[#([a-z0-9_]+)\]")  # a sentence's mark in a narration: `… decoding's [#fast].`
SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z$(\"'])")  # where one sentence of a narration ends and the next begins
# an unmarked sentence that says one of these states a number or a comparison: lesson check lists it
STATES = re.compile(r"\d|×|\b(more|less|fewer|faster|slower|than|beats?|wins?|ahead|below|above|higher|lower|"
                    r"most|least|falls?|grows?|shrinks?|about the same)\b", re.IGNORECASE)  # fmt: skip


# what states no number though it holds digits: a formula, a work's name with its version (EAGLE-2)
NAMED = re.compile(r"\$\$.*?\$\$|\b[A-Z][A-Za-z]*-\d+\b")


class ClaimError(ValueError):
    """A check that is not in the language, names an unknown function, or cannot be decided on this data."""


def parse(text: str, functions: set[str] | Mapping[str, Any]) -> ast.Expression:
    """The check as a tree of allowed nodes only; ClaimError naming what is not allowed."""
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_CLAIM:
        raise ClaimError(f"a check is an expression of 1 to {MAX_CLAIM} characters")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        raise ClaimError(f"{text!r} is not an expression ({exc.msg})") from None
    for node in ast.walk(tree):
        if not isinstance(node, NODES):
            raise ClaimError(f"{text!r} uses {type(node).__name__}, which checks do not allow")
        if isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, str)):
            raise ClaimError(f"{text!r} holds a constant checks do not allow ({node.value!r})")
        if isinstance(node, ast.Call) and (not isinstance(node.func, ast.Name) or node.keywords):
            raise ClaimError(f"{text!r}: a check calls a function by name with plain arguments only")
        if isinstance(node, ast.Name) and node.id != STEP and node.id not in functions:
            raise ClaimError(f"{text!r} names {node.id!r}; a check can use {STEP}, {', '.join(sorted(functions))}")
    return tree


@dataclass(frozen=True)
class Check:
    """One check of a stop: the expression, the kind its author declares ("" for a bare string: the kind is the
    one it reads) and the narration's marks whose sentences it holds."""

    claim: str
    kind: str = ""
    backs: tuple[str, ...] = ()


def checks(raw: Any, functions: set[str] | Mapping[str, Any]) -> tuple[Check, ...]:
    """A stop's `checks` list, each a string or a table { check, kind, backs }; ClaimError naming a bad one."""
    out = []
    for item in raw:
        table = item if isinstance(item, dict) else {"check": item}
        if extra := sorted(set(table) - {"check", "kind", "backs"}):
            raise ClaimError(f"a check is a string or a table {{ check, kind, backs }}, not one with {extra[0]!r}")
        text, kind, backs = table.get("check"), table.get("kind", ""), table.get("backs", [])
        backs = [backs] if isinstance(backs, str) else backs
        if kind not in ("", *KINDS):
            raise ClaimError(f"a check's kind is one of {', '.join(KINDS)}, not {kind!r}")
        if not isinstance(backs, list) or not all(isinstance(b, str) and re.fullmatch(r"[a-z0-9_]+", b) for b in backs):
            raise ClaimError(f"a check's 'backs' names marks of the narration (a-z, 0-9, _), not {backs!r}")
        if not isinstance(text, str):
            raise ClaimError(f"a check's 'check' is an expression in quotes, not {text!r}")
        parse(text, functions)
        out.append(Check(" ".join(text.split()), kind, tuple(backs)))
    return tuple(out)


def marked(narration: Any) -> tuple[Any, tuple[tuple[str, tuple[str, ...]], ...]]:
    """The narration with its marks stripped, and each sentence (as shown) with the marks it carries."""
    if not isinstance(narration, str):
        return narration, ()
    said = [s for s in SENTENCE.split(" ".join(narration.split())) if s]
    sentences = tuple((MARK.sub("", s), tuple(MARK.findall(s))) for s in said)
    return MARK.sub("", narration), sentences


@dataclass(frozen=True)
class Verdict:
    """A check on one stop's data: whether it holds (None: it could not be decided), the figures read and the kind
    of the most measured of them ("" when it read none)."""

    claim: str
    holds: bool | None
    figures: tuple[tuple[str, Any], ...] = ()
    error: str = ""
    kind: str = ""

    def line(self) -> str:
        """'holds     measured    accepted(step) >= 1  [accepted(step) = 3]'."""
        mark = {True: "holds", False: "FAILS", None: "UNDECIDED"}[self.holds]
        read = "; ".join(f"{k} = {_fmt(v)}" for k, v in self.figures)
        return f"{mark:9} {self.kind or '-':10}  {self.claim}  [{self.error or read}]"

    def sentence(self) -> str:
        """What the app says on the stop when a check fails: 'On this run: … does not hold (…)'."""
        read = ", ".join(f"{k} = {_fmt(v)}" for k, v in self.figures)
        return f"On this run: `{self.claim}` does not hold ({self.error or read})."


def _fmt(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


Kinds = Mapping[str, "str | Callable[..., str]"]  # a function's kind, or its kind given its arguments


def evaluate(
    text: str, functions: Mapping[str, Callable[..., Any]], step: Any = None, kinds: Kinds | None = None
) -> Verdict:
    """Decide one check over a stop's functions (and the step it shows); never raises for a bad check."""
    read: dict[str, Any] = {}
    seen: set[str] = set()
    try:
        tree = parse(text, functions)
        value = _walk(tree.body, text.strip(), functions, step, (read, seen, kinds or {}))
    except (ClaimError, ArithmeticError, TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        return Verdict(text, None, tuple(read.items()), str(exc) or type(exc).__name__, _strongest(seen))
    except (MemoryError, RecursionError) as exc:  # a check, or a function it calls, too large to decide
        why = f"too large to decide ({type(exc).__name__})"
        return Verdict(text, None, tuple(read.items()), why, _strongest(seen))
    if not isinstance(value, bool):
        return Verdict(text, None, tuple(read.items()), "a check must compare, not give a number", _strongest(seen))
    return Verdict(text, value, tuple(read.items()), kind=_strongest(seen))


def value(
    text: str, functions: Mapping[str, Callable[..., Any]], step: Any = None, kinds: Kinds | None = None
) -> tuple[Any, str]:
    """An expression's value (a number to show, not a comparison) and the kind of what it read; ClaimError with
    the reason when the data cannot give it."""
    read: dict[str, Any] = {}
    seen: set[str] = set()
    try:
        tree = parse(text, functions)
        return _walk(tree.body, text.strip(), functions, step, (read, seen, kinds or {})), _strongest(seen)
    except ClaimError:
        raise
    except (ArithmeticError, TypeError, ValueError, KeyError, IndexError, AttributeError, MemoryError,
            RecursionError) as exc:  # fmt: skip
        raise ClaimError(str(exc) or type(exc).__name__) from None


def _strongest(seen: set[str]) -> str:
    return next((k for k in KINDS if k in seen), "")


def _arith(op: ast.operator, left: Any, right: Any) -> Any:
    """left op right; a string repeated past MAX_TEXT characters is refused before it is built."""
    text, times = (left, right) if isinstance(left, str) else (right, left)
    if isinstance(op, ast.Mult) and isinstance(text, str) and isinstance(times, int) and len(text) * times > MAX_TEXT:
        raise ClaimError(f"a check builds strings of at most {MAX_TEXT} characters")
    return ARITH[type(op)](left, right)


Read = tuple[dict[str, Any], set[str], Kinds]  # the figures read, the kinds read, each function's kind


def _walk(node: ast.AST, src: str, fns: Mapping[str, Callable[..., Any]], step: Any, state: Read) -> Any:
    walk: Callable[[ast.AST], Any] = lambda n: _walk(n, src, fns, step, state)  # noqa: E731
    read, seen, kinds = state
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if step is None:
            raise ClaimError("this stop shows no step")
        return step
    if isinstance(node, ast.Call):
        name, args = node.func.id, [walk(a) for a in node.args]  # type: ignore[attr-defined]
        value = fns[name](*args)
        read[ast.get_source_segment(src, node) or name] = value
        kind = kinds.get(name, "")
        seen.add(kind(*args) if callable(kind) else kind)
        return value
    if isinstance(node, ast.UnaryOp):
        value = walk(node.operand)
        return (not value) if isinstance(node.op, ast.Not) else -value
    if isinstance(node, ast.BinOp):
        return _arith(node.op, walk(node.left), walk(node.right))
    if isinstance(node, ast.BoolOp):
        values = [bool(walk(v)) for v in node.values]
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.Compare):
        left, ok = walk(node.left), True
        for op, right_node in zip(node.ops, node.comparators):
            right = walk(right_node)
            ok, left = ok and COMPARE[type(op)](left, right), right
        return ok
    raise ClaimError(f"{type(node).__name__} is not allowed")


def audit(
    sentences: Sequence[tuple[str, tuple[str, ...]]], stated: Sequence[Check], verdicts: Sequence[Verdict]
) -> tuple[list[str], list[str]]:
    """What fails `lesson check` beyond a check that does not hold (a marked sentence no check backs, a check
    backing a mark no sentence carries, a kind declared other than the one read), and the unmarked sentences
    that state a number or a comparison (listed: a sentence no check holds should state no measured fact)."""
    marks = {m for _text, ms in sentences for m in ms}
    backed = {b for c in stated for b in c.backs} | {"told"}  # a sentence told from the data: lesson.told
    problems = [f"no check backs the sentence marked [#{m}]: {text!r}" for text, ms in sentences for m in ms
                if m not in backed]  # fmt: skip
    problems += [f"`{c.claim}` backs [#{b}], which no sentence carries" for c in stated for b in c.backs
                 if b not in marks]  # fmt: skip
    problems += [
        f"`{c.claim}` is declared {c.kind} but reads {v.kind} figures"
        for c, v in zip(stated, verdicts)
        if c.kind and v.kind and c.kind != v.kind
    ]
    unmarked = [text for text, ms in sentences if not ms and STATES.search(NAMED.sub("", text))]
    return problems, unmarked
