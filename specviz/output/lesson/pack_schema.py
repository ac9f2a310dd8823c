"""What a recorded lesson pack may hold, declared beside its fields and checked once when it is read: every key and
type, sizes (traces, stops, a stored figure's values, string lengths) and finite numbers within their ranges.

A pack is a file anyone can upload, so it is held to a trace's standard (core.schema, core.trace): the raw bytes
are counted before they are parsed, the parsed data is checked against PACK before anything is built from it,
and what the schema cannot say (a stop naming a group the pack lacks, fewer plain-decoding runs than a method's)
is checked by `problem`. Every refusal is one sentence (SchemaError).
"""

from __future__ import annotations

import json
import re
from typing import Any

from specviz.core.schema import Between, MapOf, Nullable, Row, SchemaError, Text, check, check_size

MAX_PACK_BYTES = 8 << 20  # a pack file or upload (the shipped one: 3.3 MB)
MAX_PACK_VALUES = 1 << 20  # , : and [ in its bytes, counted before parsing: a bound on its values (shipped: 381 K)
MAX_PACK_DEPTH = 20  # nesting: pack, groups, runs, a trace (12 of its own)
MAX_GROUPS = 16  # prompts × temperatures (shipped: 3)
MAX_METHODS = 32  # methods run in one group (shipped: 9)
MAX_RUNS = 16  # interleaved runs of one method in one group (shipped: 3)
MAX_PACK_TRACES = 128  # traces in the whole pack (shipped: 45); each is read by Trace.from_dict
MAX_STOPS = 128  # stops (shipped: 23)
MAX_STORED = 8  # builds re-grown when recorded, on one stop (shipped: 1)
MAX_FIGURE_CHARS = 256 << 10  # one stored figure's plotly JSON (shipped: at most 21 KB)
MAX_FIGURE_VALUES = 20_000  # values in one stored figure: points, labels, layout (shipped: at most 924)
MAX_FIGURE_DEPTH = 12  # nesting inside one stored figure (shipped: 6)
# the tags a stored figure's text may keep (plotly draws them): a link (<a href>), a style or any other is dropped
_TAG = re.compile(r"<(?!/?(?:br|b|i|em|sup|sub|extra)\s*/?>)/?[a-z][^<>]*>", re.IGNORECASE)
# the most memory one parsed pack may take while it is read (tests/output/test_hostile_packs.py measures the worst case:
# 136 MB for MAX_PACK_VALUES small objects), and read and fitted to its lesson with every figure the lesson draws at
# its caps (tests/output/test_pack_fit.py); a recording of 128-token answers holds 381 K values, past the 512 K cap with
# the 230 K of an upload's extra figures
MAX_PACK_MEMORY = 160 << 20

NAME, LINE, NOTE = Text(64), Text(200), Text(4000)  # an id or key; a line of provenance; where a figure was measured
NUMBER = Between("float", -1e9, 1e9)  # finite and in range: a speedup, a rate, a p-value
COUNT = Between("int", 0, 1 << 30)
FIGURE = Text(MAX_FIGURE_CHARS)

PROVENANCE = {
    "cpu": LINE,
    "cores": Between("int", 0, 1 << 16),
    "device": LINE,
    "date": Text(40),
    "commit": Text(64),
    "load": Between("float", -1, 1e6),
    "torch?": Text(64),
    "cpu_flags?": Text(400),
    "memory_gb?": Between("float", 0, 1 << 30),
    "machine_id?": Text(64),
}
SETTINGS = {
    "model": LINE,
    "max_new_tokens": Between("int", 1, 1 << 16),
    "repeats": Between("int", 1, MAX_RUNS),
    "warmup?": Between("int", 0, 100),
    "threads?": Between("int", 0, 1 << 16),
}
LESSON = {"title": LINE, "file": LINE, "sha256": Text(64)}
GROUP = {
    "key": Text(100),
    "prompt": NAME,
    "temperature": Between("float", 0, 10),
    "configs": MapOf({"rule?": NAME}, MAX_METHODS),  # method -> its Config's fields (check_size bounds the rest)
    "numbers?": {},  # for a person reading the file: the app recomputes them from the runs
    "runs": MapOf([{}, MAX_RUNS], MAX_METHODS),  # method -> its runs, each read by Trace.from_dict
}
# what a stop drawn from no run keeps for its checks (lesson.facts._stored_functions reads each shape)
DATA = {
    "categories?": MapOf(MapOf(NUMBER, MAX_METHODS), 32),  # prompt kind -> method -> speedup
    "axis?": NAME,
    "points?": [Row((NAME, COUNT, NUMBER, NUMBER, NUMBER)), 1024],  # method, batch or context, speedup, A, r
    "rules?": MapOf({k: NUMBER for k in ("accept_rate", "tv", "tv_exact", "p_value")}, 8),
    "draft?": NAME,
    "n?": COUNT,
    "ks?": [Between("float", 1, 1 << 20), 64],  # the cost curve: tokens in one pass, and its milliseconds
    "ms?": [Between("float", 1e-6, 1e9), 64],
    "contended?": LINE,
    "methods?": MapOf({k: NUMBER for k in ("speedup", "A", "r")}, 64),  # the lineage's bench
}
STOP = {
    "group?": Text(100),
    "computed?": "bool",
    "figure?": FIGURE,
    "measured?": NOTE,
    "data?": DATA,
    "stored?": MapOf(FIGURE, MAX_STORED),
    "told?": {"numbers": [Text(40), 64], "choices": ["bool?", 32]},  # the narration as recorded (lesson.told)
}
PRICED = {"forward_tokens": COUNT, "A": NUMBER, "r": NUMBER, "speedup": NUMBER}
FIT = {  # the fit the recording ran at (lesson.fitted.summary)
    "device": LINE,
    "ks": [Between("float", 1, 1 << 20), 64],
    "ms": [Between("float", 1e-6, 1e9), 64],
    "plain_ms": NUMBER,
    "knee": Nullable(Between("float", 0, 1 << 20)),
    "methods": MapOf(
        PRICED | {"fields": MapOf(COUNT, 8), "paper?": PRICED, "widths": [Row((COUNT, NUMBER, NUMBER, NUMBER)), 512]},
        16,
    ),
}
PACK = {
    "format": Text(64),
    "lesson": LESSON,
    "provenance": PROVENANCE,
    "load_after": Between("float", -1, 1e6),
    "settings": SETTINGS,
    "groups": [GROUP, MAX_GROUPS],
    "stops": MapOf(STOP, MAX_STOPS),
    "fit?": FIT,
}


def parse(raw: bytes, name: str) -> Any:
    """A pack's JSON, its size and its count of values bounded before it is parsed; SchemaError otherwise."""
    if len(raw) > MAX_PACK_BYTES:
        raise SchemaError(f"{name} is larger than a pack may be ({MAX_PACK_BYTES >> 20} MB).")
    if raw.count(b",") + raw.count(b":") + raw.count(b"[") > MAX_PACK_VALUES:
        raise SchemaError(f"{name} holds more than {MAX_PACK_VALUES} values, more than a pack may hold.")
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, UnicodeDecodeError, too many digits, too deep
        raise SchemaError(f"{name} is not valid JSON ({type(exc).__name__}).") from None
    check_size(data, name, depth=MAX_PACK_DEPTH)
    return data


def problem(data: dict[str, Any], known: set[str]) -> str | None:
    """What the schema cannot say about a pack that fits PACK, or None: its runs are of methods this checkout
    `known`s, plain decoding runs at least as often as every method, its traces are few enough, and a stop names
    only groups the pack has and figures of bounded size."""
    keys, traces = [g["key"] for g in data["groups"]], 0
    if len(set(keys)) != len(keys):
        return "two of its groups share a key"
    for g in data["groups"]:
        runs = g["runs"]
        if unknown := sorted(set(runs) - known):
            return f"group {g['key']!r} holds runs of a method this app does not have ({unknown[0][:40]!r})"
        if not runs.get("ar") or any(len(ts) > len(runs["ar"]) or not ts for ts in runs.values()):
            return f"group {g['key']!r} needs a run of plain decoding ('ar') for every run of each method"
        traces += sum(len(ts) for ts in runs.values())
    if traces > MAX_PACK_TRACES:
        return f"it holds {traces} traces; a pack holds at most {MAX_PACK_TRACES}"
    for sid, stop in data["stops"].items():
        if sum(k in stop for k in ("group", "figure", "computed")) != 1:
            return f"stop {sid[:40]!r} should hold one of a group, a figure or computed"
        if "group" in stop and stop["group"] not in keys:
            return f"stop {sid[:40]!r} names a group the pack does not hold"
        curve = stop.get("data", {})
        if len(curve.get("ks", ())) != len(curve.get("ms", ())) or curve.get("ks") == []:
            return f"stop {sid[:40]!r} has a cost curve whose tokens and times differ in number"
    return None


def figure_data(text: str, where: str) -> dict[str, Any]:
    """A stored figure's plotly JSON as data, bounded in values and nesting; SchemaError otherwise."""
    try:
        fig = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise SchemaError(f"{where} is not a figure's JSON ({type(exc).__name__}).") from None
    check(fig, {"data": [{}, 256], "layout?": {}}, where)
    check_size(fig, where, depth=MAX_FIGURE_DEPTH, values=MAX_FIGURE_VALUES)
    if _untagged(fig) > MAX_FIGURE_VALUES:
        raise SchemaError(f"{where} holds more than {MAX_FIGURE_VALUES} values in its typed arrays.")
    return fig


def _untagged(fig: Any) -> int:
    """Drop every tag but a line break, bold, italics, super- and subscripts from the figure's text, so a visitor's
    stored figure draws no link or styled text in the app's own page; the values its typed arrays (plotly's
    {"dtype", "bdata"}: one string, many numbers) hold. Iterative: the figure's size was checked."""
    todo, packed = [fig], 0
    while todo:
        node = todo.pop()
        if isinstance(node, dict) and isinstance(node.get("bdata"), str):
            size = int(next((c for c in str(node.get("dtype", "")) if c.isdigit()), "1"))
            packed += len(node["bdata"]) * 3 // 4 // size
        for key, value in node.items() if isinstance(node, dict) else enumerate(node):
            if isinstance(value, str) and "<" in value:
                node[key] = _TAG.sub("", value)
            elif isinstance(value, (dict, list)):
                todo.append(value)
    return packed
