"""The operator commands' argument parser and error line: a bad flag raises ValueError, and `guard` prints one line
and exits 2.

Every number is checked before any work: `count(lo, hi)` and `number(lo, hi)` are argparse types for an integer
or a finite float in range, and `Parser` refuses any float option that is not finite (argparse's float() takes
"nan" and "inf", and a NaN compares false with every bound a command checks later).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from typing import Any, NoReturn


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so bad input becomes one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        """Raise the message as a ValueError (argparse would print usage and exit)."""
        raise ValueError(message)

    def parse_args(self, args: Any = None, namespace: Any = None) -> Any:  # type: ignore[override]
        """The options, every float among them finite (ValueError naming the first that is not)."""
        ns = super().parse_args(args, namespace)
        for name, value in vars(ns).items():
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"--{name.replace('_', '-')} must be a finite number, got {value}.")
        return ns


def count(lo: int = 1, hi: int = 1 << 30) -> Callable[[str], int]:
    """An argparse type: an integer from lo to hi."""

    def parse(text: str) -> int:
        if not (text.strip().lstrip("-").isascii() and text.strip().lstrip("-").isdigit()):
            raise argparse.ArgumentTypeError(f"must be an integer from {lo} to {hi}, got {text[:40]!r}")
        if not lo <= (value := int(text)) <= hi:
            raise argparse.ArgumentTypeError(f"must be an integer from {lo} to {hi}, got {value}")
        return value

    return parse


def fail(message: str) -> int:
    """Print one error line; exit code 2."""
    print(f"specviz: error: {message}", file=sys.stderr)
    return 2


def guard(fn: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a command; known failures (bad input, missing data or model, a file) become one line and exit code 2."""
    from specviz.core.model import ModelError

    try:
        return fn(argv)
    except (ValueError, ModelError, OSError) as exc:
        return fail(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
