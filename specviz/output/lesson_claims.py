"""Claims as checks: a stop's narration states its facts as small expressions over the stop's own data.

The language is Python's expression syntax cut down to a whitelist, parsed with `ast` and walked here (never
`eval`): numbers and quoted strings, the stop's functions called with them, + − × ÷, comparisons, and / or /
not. E.g. `accepted(step) >= 1`, `speedup("hybrid") > speedup("eagle")`, `r("pld", 8064) <= 1.1 * r("pld", 128)`.
Evaluating one gives a Verdict: whether it holds and every figure that decided it.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
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
             "best_speedup", "alpha_for", "knee", "flat", "top1"}  # fmt: skip  # what some stop can read (lesson_facts)


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
class Verdict:
    """A check on one stop's data: whether it holds (None: it could not be decided) and the figures read."""

    claim: str
    holds: bool | None
    figures: tuple[tuple[str, Any], ...] = ()
    error: str = ""

    def line(self) -> str:
        """'holds  accepted(step) >= 1  [accepted(step) = 3]'."""
        mark = {True: "holds", False: "FAILS", None: "UNDECIDED"}[self.holds]
        read = "; ".join(f"{k} = {_fmt(v)}" for k, v in self.figures)
        return f"{mark:9} {self.claim}  [{self.error or read}]"

    def sentence(self) -> str:
        """What the app says on the stop when a check fails: 'On this run: … does not hold (…)'."""
        read = ", ".join(f"{k} = {_fmt(v)}" for k, v in self.figures)
        return f"On this run: `{self.claim}` does not hold ({self.error or read})."


def _fmt(v: Any) -> str:
    return f"{v:.3g}" if isinstance(v, float) else str(v)


def evaluate(text: str, functions: Mapping[str, Callable[..., Any]], step: Any = None) -> Verdict:
    """Decide one check over a stop's functions (and the step it shows); never raises for a bad check."""
    read: dict[str, Any] = {}
    try:
        tree = parse(text, functions)
        value = _walk(tree.body, text.strip(), functions, step, read)
    except (ClaimError, ArithmeticError, TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        return Verdict(text, None, tuple(read.items()), str(exc) or type(exc).__name__)
    except (MemoryError, RecursionError) as exc:  # a check, or a function it calls, too large to decide
        return Verdict(text, None, tuple(read.items()), f"too large to decide ({type(exc).__name__})")
    if not isinstance(value, bool):
        return Verdict(text, None, tuple(read.items()), "a check must compare, not give a number")
    return Verdict(text, value, tuple(read.items()))


def _arith(op: ast.operator, left: Any, right: Any) -> Any:
    """left op right; a string repeated past MAX_TEXT characters is refused before it is built."""
    text, times = (left, right) if isinstance(left, str) else (right, left)
    if isinstance(op, ast.Mult) and isinstance(text, str) and isinstance(times, int) and len(text) * times > MAX_TEXT:
        raise ClaimError(f"a check builds strings of at most {MAX_TEXT} characters")
    return ARITH[type(op)](left, right)


def _walk(node: ast.AST, src: str, fns: Mapping[str, Callable[..., Any]], step: Any, read: dict[str, Any]) -> Any:
    walk: Callable[[ast.AST], Any] = lambda n: _walk(n, src, fns, step, read)  # noqa: E731
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        if step is None:
            raise ClaimError("this stop shows no step")
        return step
    if isinstance(node, ast.Call):
        value = fns[node.func.id](*(walk(a) for a in node.args))  # type: ignore[attr-defined]
        read[ast.get_source_segment(src, node) or node.func.id] = value  # type: ignore[attr-defined]
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
