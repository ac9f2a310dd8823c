"""Figures built once for a whole class: a replayed stop's figure depends only on the recording's runs and the
page's settings, so ten visitors pressing through the same stops need it built once, not ten times (building a
plotly figure is most of a press's time on the server, and the server's threads share one interpreter lock).

A shared figure is never changed: whoever needs it changed (a height, a font size) changes a `private` copy.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

T = TypeVar("T")
SIZE = 96  # figures kept (a whole lesson's stops and their pages below, twice over)
_LOCK = threading.Lock()
_KEPT: OrderedDict[Hashable, tuple[tuple[object, ...], Any]] = OrderedDict()
_VARIANTS: dict[tuple[int, str], tuple[Any, Any]] = {}  # (id of a kept value, what) -> (that value, its variant)


def shared(key: Hashable, inputs: Sequence[object], build: Callable[[], T]) -> T:
    """`build()`'s value for `key`, built once while the same `inputs` objects (runs, a recording) are given:
    an entry holds its inputs, so an input is never mistaken for another that took its place in memory."""
    with _LOCK:
        kept = _KEPT.get(key)
        if kept is not None and len(kept[0]) == len(inputs) and all(a is b for a, b in zip(kept[0], inputs)):
            _KEPT.move_to_end(key)
            return kept[1]
    value = build()  # outside the lock: two visitors may build one figure at once, never wait on each other
    with _LOCK:
        _KEPT[key] = (tuple(inputs), value)
        _KEPT.move_to_end(key)
        while len(_KEPT) > SIZE:
            _forget(_KEPT.popitem(last=False)[1][1])
    return value


def variant(value: Any, what: str, make: Callable[[Any], T]) -> T:
    """`make(value)`, kept beside `value` while it is a kept (shared) value; made anew for any other value."""
    with _LOCK:
        kept = _VARIANTS.get((id(value), what))
        if kept is not None and kept[0] is value:
            return kept[1]
        held = any(v is value for _inputs, v in _KEPT.values())
    made = make(value)
    if held:
        with _LOCK:
            _VARIANTS[id(value), what] = (value, made)
    return made


def _forget(value: Any) -> None:
    for key in [k for k, (v, _made) in _VARIANTS.items() if v is value]:
        del _VARIANTS[key]


def private(fig: Any) -> Any:
    """A copy of a (shared) figure to change: its data as plotly gave it, not validated again (a tenth the time)."""
    import plotly.graph_objects as go

    return go.Figure(fig.to_dict(), _validate=False)


def clear() -> None:
    with _LOCK:
        _KEPT.clear()
        _VARIANTS.clear()
