"""A small schema for plain JSON data read from files (traces, head configs): types, ranges, sizes and nesting.

A spec is a kind name ("int", "float", "str", "bool", "any"; a trailing "?" allows None), a `Between`
(a number within bounds), a `OneOf` (a string among a few), a `Text` (a string of at most n characters),
`Nullable(spec)`, `[spec]` or `[spec, n]` (a list of such items, at most n), a `Row` (a short list whose items
fit specs in turn), `{key: spec}` (an object holding those keys; a key ending in "?" may be absent, other keys
are left alone) or a `MapOf` (an object of at most n short keys, every value fitting one spec).
Every check is iterative or follows the spec, never the data, so deep or huge input fails with one sentence
instead of a RecursionError.
"""

from __future__ import annotations

import json
import math
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

MAX_DEPTH = 16  # nesting of lists and objects; a bundle of traces needs 12
MAX_LIST = 1 << 16  # items of one list or object
MAX_STR = 1 << 18  # characters of one string
MAX_VALUES = 1 << 22  # values in one document
MAX_INT = 1 << 53  # |int| (JSON's safe integers)


class SchemaError(ValueError):
    """Data that does not fit its schema; the message names where and what was expected."""


@dataclass(frozen=True)
class Between:
    """A number of `kind` ("int" or "float") in [lo, hi]."""

    kind: str
    lo: float
    hi: float


@dataclass(frozen=True)
class OneOf:
    """A string among `values` (a status a figure colours by name)."""

    values: tuple[str, ...]


@dataclass(frozen=True)
class Text:
    """A string of at most `most` characters."""

    most: int


@dataclass(frozen=True)
class Row:
    """A list of exactly len(specs) items, each fitting its spec in turn (a stored point: method, x, values)."""

    specs: tuple[Any, ...]


@dataclass(frozen=True)
class MapOf:
    """An object of at most `most` keys of at most `key` characters, every value fitting `spec`."""

    spec: Any
    most: int = 64
    key: int = 64


@dataclass(frozen=True)
class Nullable:
    """A spec that also allows None."""

    spec: Any


KINDS = {"int": "an integer", "float": "a finite number", "str": "a string", "bool": "true or false", "any": "a value"}


def check_size(data: Any, where: str = "The data", depth: int = MAX_DEPTH, values: int = MAX_VALUES) -> None:
    """SchemaError unless `data` nests at most `depth` deep and holds at most `values` values (no recursion)."""
    nested = (list, tuple, dict)
    todo, seen, most = [(data, 1)], 0, depth
    while todo:
        value, depth = todo.pop()
        seen += 1
        if isinstance(value, nested):
            if depth > most:
                raise SchemaError(f"{where} nests deeper than {most} levels.")
            items = value.values() if isinstance(value, dict) else value
            inner = [v for v in items if isinstance(v, nested)]  # a scalar is counted here, never stacked
            seen += len(items) - len(inner)
            todo.extend((v, depth + 1) for v in inner)
        if seen > values:
            raise SchemaError(f"{where} holds more than {values} values.")


def _scalar_ok(value: Any, kind: str) -> bool:
    if kind == "any":
        return True
    if kind == "bool":
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if kind == "int":
        return isinstance(value, int) and abs(value) <= MAX_INT
    if kind == "float":
        return isinstance(value, (int, float)) and math.isfinite(value)
    return isinstance(value, str) and len(value) <= MAX_STR


def _shown(value: Any) -> str:
    text = repr(value) if isinstance(value, (int, float, str, bool)) or value is None else type(value).__name__
    return text if len(text) <= 40 else text[:37] + "..."


def check(value: Any, spec: Any, where: str, path: str = "") -> None:
    """SchemaError unless value fits spec (see the module docstring); the message names `where` and the path."""
    if isinstance(spec, Nullable):
        if value is not None:
            check(value, spec.spec, where, path)
    elif isinstance(spec, list):
        most = spec[1] if len(spec) > 1 else MAX_LIST
        if not isinstance(value, (list, tuple)) or len(value) > most:
            raise SchemaError(f"{_at(where, path)} should be a list of at most {most} items, got {_shown(value)}.")
        for i, item in enumerate(value):
            check(item, spec[0], where, f"{path}[{i}]")
    elif isinstance(spec, dict):
        check_object(value, spec, where, path)
    elif isinstance(spec, MapOf):
        _check_map(value, spec, where, path)
    elif isinstance(spec, Row):
        _check_row(value, spec, where, path)
    else:
        _check_one(value, spec, where, path)


def _check_row(value: Any, spec: Row, where: str, path: str) -> None:
    """SchemaError unless value is a list of len(spec.specs) items, each fitting its spec."""
    if not isinstance(value, (list, tuple)) or len(value) != len(spec.specs):
        raise SchemaError(f"{_at(where, path)} should be a list of {len(spec.specs)} items, got {_shown(value)}.")
    for i, (item, sub) in enumerate(zip(value, spec.specs)):
        check(item, sub, where, f"{path}[{i}]")


def _check_map(value: Any, spec: MapOf, where: str, path: str) -> None:
    """SchemaError unless value is an object of at most spec.most short keys whose values fit spec.spec."""
    if not isinstance(value, dict) or len(value) > spec.most:
        raise SchemaError(f"{_at(where, path)} should be an object of at most {spec.most} keys, got {_shown(value)}.")
    for key, item in value.items():
        if len(key) > spec.key:
            raise SchemaError(f"{_at(where, path)} has a key longer than {spec.key} characters.")
        check(item, spec.spec, where, f"{path}[{key!r}]")


def _check_one(value: Any, spec: str | Between | OneOf | Text, where: str, path: str) -> None:
    """SchemaError unless a single value fits a kind name, a Between, a OneOf or a Text."""
    if isinstance(spec, Text):
        if not isinstance(value, str) or len(value) > spec.most:
            raise SchemaError(
                f"{_at(where, path)} should be a string of at most {spec.most} characters, got {_shown(value)}."
            )
    elif isinstance(spec, str):
        kind, nullable = spec.removesuffix("?"), spec.endswith("?")
        if not (value is None and nullable) and not _scalar_ok(value, kind):
            limit = f" of at most {MAX_STR} characters" if kind == "str" else ""
            raise SchemaError(f"{_at(where, path)} should be {KINDS[kind]}{limit}, got {_shown(value)}.")
    elif isinstance(spec, Between):
        _check_one(value, spec.kind, where, path)
        if not spec.lo <= value <= spec.hi:
            raise SchemaError(f"{_at(where, path)} should be between {spec.lo:g} and {spec.hi:g}, got {_shown(value)}.")
    elif value not in spec.values:
        raise SchemaError(f"{_at(where, path)} should be one of {', '.join(spec.values)}, got {_shown(value)}.")


def check_object(value: Any, spec: dict[str, Any], where: str, path: str = "") -> None:
    """SchemaError unless value is an object with every key of spec (those ending in "?" optional) fitting it."""
    if not isinstance(value, dict) or len(value) > MAX_LIST:
        raise SchemaError(f"{_at(where, path)} should be an object, got {_shown(value)}.")
    for key, sub in spec.items():
        name = key.removesuffix("?")
        if name in value:
            check(value[name], sub, where, f"{path}.{name}" if path else name)
        elif not key.endswith("?"):
            raise SchemaError(f"{_at(where, path)} is missing the field {name!r}.")


def _at(where: str, path: str) -> str:
    """'The trace' and 'steps[0].wall_s' -> "The trace's field steps[0].wall_s"."""
    return f"{where}'s field {path}" if path else where


def annotation_spec(annotation: str) -> Any:
    """The spec of a dataclass field's (string) annotation: 'list[list[int]] | None' -> [['int']] allowing None."""
    parts = [p.strip() for p in annotation.split("|")]
    rest = [p for p in parts if p != "None"]
    if len(rest) != 1:
        raise TypeError(f"No schema for the annotation {annotation!r}.")
    spec = _one(rest[0])
    return Nullable(spec) if "None" in parts else spec


def _one(a: str) -> Any:
    if a.startswith("list[") and a.endswith("]"):
        return [_one(a[5:-1])]
    if a == "list":
        return ["any"]
    if a == "dict" or a.startswith("dict["):
        return {}
    if a in KINDS:
        return a
    raise TypeError(f"No schema for the annotation {a!r}.")


def build(cls: type[T], data: Any, specs: dict[str, Any] | None = None, name: str = "") -> T:
    """A dataclass from a JSON object: every field checked by `specs` or its annotation; unknown keys ignored."""
    name = name or cls.__name__
    if not isinstance(data, dict):
        raise SchemaError(f"{name} should be a JSON object, got {_shown(data)}.")
    values = {}
    for f in fields(cls):  # type: ignore[arg-type]
        if f.name not in data:
            if f.default is MISSING and f.default_factory is MISSING:
                raise SchemaError(f"{name} is missing the field {f.name!r}.")
            continue
        spec = (specs or {}).get(f.name) or annotation_spec(str(f.type))
        check(data[f.name], spec, name, f.name)
        values[f.name] = _plain(data[f.name], spec)
    return cls(**values)


def _plain(value: Any, spec: Any) -> Any:
    """Tuples (from Python callers) as lists, the way JSON gives them; an integer where a float is meant, a float."""
    if isinstance(value, tuple):
        return list(value)
    floaty = spec in ("float", "float?") or (isinstance(spec, Between) and spec.kind == "float")
    return float(value) if floaty and isinstance(value, int) else value


def read_json(path: Path, max_bytes: int, what: str) -> Any:
    """The JSON in a file of at most max_bytes; SchemaError with one sentence when it is larger, unreadable or
    not JSON, or nests too deep."""
    if not path.is_file():
        raise SchemaError(f"{path} is not a file.")
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise SchemaError(f"{path} is {size} bytes; {what} is at most {max_bytes}.")
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise SchemaError(f"Cannot read {path} ({exc.strerror}).") from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
        if isinstance(exc, SchemaError):
            raise
        raise SchemaError(f"{path} is not valid JSON ({str(exc)[:80]}).") from None
    check_size(data, str(path))
    return data


MAX_TRACE_IDS = 8192  # prompt ids, and output ids, of one trace (the built-in model's context)
MAX_TOKEN_ID = (1 << 20) - 1  # ids beyond any vocabulary specviz loads; a known vocabulary bounds them tighter
# a trace's config["sampling"], as core.sampling.Sampling checks it (T = 0 is greedy, else 0.01 to 10)
SAMPLING = {
    "max_new_tokens?": Between("int", 1, 1 << 16),
    "temperature?": Between("float", 0, 10),
    "top_p?": Between("float", 1e-9, 1),
    "seed?": Between("int", 0, MAX_INT),
}


def trace_schema(vocab: int | None = None) -> dict[str, Any]:
    """The schema a trace's JSON must fit: every field's type, list sizes, id ranges (steps' details: core.details)."""
    token = Between("int", 0, (vocab or MAX_TOKEN_ID + 1) - 1)
    ids, count, seconds = [token, MAX_TRACE_IDS], Between("int", 0, MAX_TRACE_IDS), "float"  # seconds: core.trace
    step = {
        "index": count,
        "committed": ids,
        "texts": ["str", MAX_TRACE_IDS],
        "forward_tokens": count,
        "propose_s": seconds,
        "verify_s": seconds,
        "wall_s": seconds,
        "prob": "float",
        "entropy": "float",
        "proposed?": count,
        "accept_s?": seconds,
        "commit_s?": seconds,
        "root_from?": "str",
        "top?": [{"id": token, "text": "str", "prob": "float"}, 64],
    }
    config = {"sampling": SAMPLING, "method": {}}  # methods.base.Run.trace: the sampling settings, the method's
    texts = {k: "str" for k in ("method", "model", "device", "prompt", "text", "stopped")}
    sizes = {"prompt_ids": ids, "config": config, "steps": [step, MAX_TRACE_IDS], "output_ids": ids}
    return {**texts, **sizes, "total_s": seconds, "prefill_s": seconds}


def bad_tree(parents: list[int], *indices: list[int]) -> str | None:
    """Why `parents` is not a rooted tree in topological order (each parent an earlier node), or why an index
    list names a node it does not have; None when all is well."""
    n = len(parents)
    if not n:
        return "its tree is empty"
    if n and (parents[0] != -1 or any(not 0 <= p < i for i, p in enumerate(parents) if i)):
        return "its tree's parents are not earlier nodes"
    if any(not 0 <= i < n for idx in indices for i in idx):
        return f"it names a node outside its tree of {n}"
    return None


def bad_depths(parents: list[int], depth: list[int]) -> str | None:
    """Why a drafted tree's depths are not its parents' plus one (the root at 0), or None."""
    if depth[0] != 0 or any(depth[i] != depth[p] + 1 for i, p in enumerate(parents) if i):
        return "its depths do not follow its parents"
    return None


def bad_lengths(**lists: list) -> str | None:
    """Why lists that should run side by side do not (their lengths differ), or None."""
    if len({len(v) for v in lists.values()}) > 1:
        return f"{', '.join(lists)} differ in length"
    return None
