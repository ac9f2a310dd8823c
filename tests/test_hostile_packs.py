"""Hostile lesson packs (issue 52): the shipped pack with one thing changed, refused at load in one sentence by
lesson_pack_schema or drawn at every stop along the app's own path; within SECONDS and MAX_PACK_MEMORY; and the
CLI's exit codes on them."""

from __future__ import annotations

import copy
import json
import time
import tracemalloc
from functools import cache
from typing import Any

import pytest

from specviz.__main__ import main
from specviz.output import lesson_claims as claims
from specviz.output.lesson import LESSON_FILE, LessonError, load_lesson
from specviz.output.lesson_facts import check, figure, numbers
from specviz.output.lesson_pack import PACK_FILE, Pack, from_bytes, from_dict
from specviz.output.lesson_pack_schema import (
    MAX_FIGURE_VALUES,
    MAX_PACK_BYTES,
    MAX_PACK_MEMORY,
    MAX_PACK_TRACES,
    MAX_PACK_VALUES,
)

SECONDS = 10.0  # to read one hostile pack and replay every stop of it (the shipped one: about 3 s here)


@cache
def shipped() -> dict[str, Any]:
    return json.loads(PACK_FILE.read_bytes())


@cache
def lesson():
    return load_lesson(LESSON_FILE)


def one_sentence(message: str) -> str:
    assert message.endswith(".") and "\n" not in message and "Traceback" not in message, message
    assert len(message) <= 400, message
    return message


def load(data: Any, name: str = "upload.json") -> Pack | str:
    """The pack `data` makes (written as JSON writes it, NaN and Infinity too), or the sentence refusing it."""
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    try:
        return from_bytes(raw, name)
    except LessonError as exc:
        return one_sentence(str(exc))


def replay(pack: Pack) -> list[str]:
    """Every stop (and build) of the shipped lesson drawn from `pack` along the app's path (ui.lesson_pack: route,
    banner, focus); the one-line reasons of those the app shows as refused. Anything else raised fails the test."""
    from ui.lesson_pack import PACK_ERRORS

    said = [pack.brief(), pack.where()]
    refused = []
    for stop in lesson().stops:
        try:
            pack.nearest(stop)
            for b in range(stop.frames):
                figure(pack, stop.at(b))
            group = pack.group(stop)
            verdicts = check(pack, stop)
            said += [v.sentence() for v in verdicts] + (numbers(stop, group) if group is not None else [])
        except PACK_ERRORS as exc:
            refused.append(f"{type(exc).__name__}: {exc}")
    assert all(isinstance(s, str) for s in said)
    return refused


def changed(edit) -> dict[str, Any]:
    data = copy.deepcopy(shipped())
    edit(data)
    return data


def _fewer_plain(d: dict) -> None:
    d["groups"][0]["runs"]["ar"] = d["groups"][0]["runs"]["ar"][:1]


def _big_figure(points: int) -> str:
    return json.dumps({"data": [{"type": "scatter", "x": list(range(points)), "y": [0.5] * points}], "layout": {}})


HOSTILE = {  # the issue's classes: what the pack holds -> a word of the sentence refusing it
    "settings is a list": (lambda d: d.update(settings=[]), "settings"),
    "a stop entry is a string": (lambda d: d["stops"].update(race="x"), "stops['race']"),
    "a stop names no group": (lambda d: d["stops"]["race"].update(group="nope@0"), "names a group"),
    "a stop of nothing": (lambda d: d["stops"].update(race={}), "one of a group, a figure or computed"),
    "fewer plain runs than a method's": (_fewer_plain, "plain decoding"),
    "an unknown method's runs": (lambda d: d["groups"][0]["runs"].update(nope=d["groups"][0]["runs"]["ar"]), "nope"),
    "cores overflow": (lambda d: d["provenance"].update(cores=float("inf")), "cores"),
    "memory overflows": (lambda d: d["provenance"].update(memory_gb=1e300), "memory_gb"),
    "the load is NaN": (lambda d: d.update(load_after=float("nan")), "load_after"),
    "a zero in the cost curve": (lambda d: d["stops"]["flat"]["data"]["ms"].__setitem__(0, 0), "ms"),
    "a cost curve of other lengths": (lambda d: d["stops"]["flat"]["data"]["ms"].pop(), "differ in number"),
    "a figure nested in its string": (lambda d: d["stops"]["flat"].update(figure="[" * 100_000), "not a figure"),
    "a figure's string too long": (lambda d: d["stops"]["flat"].update(figure="x" * (300 << 10)), "characters"),
    "a figure of 12,000 points": (lambda d: d["stops"]["flat"].update(figure=_big_figure(12_000)), "values"),
    "a provenance string too long": (lambda d: d["provenance"].update(cpu="x" * 5000), "cpu"),
    "a method's repeats beyond any": (lambda d: d["groups"][0]["runs"]["ar"].extend([{}] * 20), "runs"),
    "a category not a number": (lambda d: d["stops"]["kinds"]["data"]["categories"]["chat"].update(ar="1"), "chat"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_hostile_pack_is_refused_in_one_sentence_at_load(name):
    """Each class used to raise AttributeError, KeyError, ValueError or ZeroDivisionError past from_dict, or in
    Pack.group, brief() or numbers() on every rerun: now the schema refuses it once, naming the field."""
    edit, says = HOSTILE[name]
    start = time.perf_counter()
    got = load(changed(edit))
    assert isinstance(got, str) and says in got, got
    assert time.perf_counter() - start < SECONDS


def test_the_shipped_pack_replays_every_stop():
    pack = load(shipped())
    assert isinstance(pack, Pack) and replay(pack) == []


def test_many_traces_are_refused():
    """1,500 small traces loaded in 16 s (+280 MB): a pack holds at most MAX_PACK_TRACES."""

    def copies(d: dict) -> None:
        big = max(d["groups"], key=lambda g: sum(map(len, g["runs"].values())))
        d["groups"] += [big | {"key": f"copy{i}"} for i in range(4)]

    with pytest.raises(LessonError, match=f"holds 150 traces; a pack holds at most {MAX_PACK_TRACES}"):
        from_dict(changed(copies), "upload.json")  # past the bytes' pre-count: the parsed data's own cap


@pytest.mark.parametrize(("points", "labels"), [(5_000_000, False), (1_100_000, True)])
def test_a_stored_figure_of_millions_of_points_is_refused_within_a_second(points, labels):
    """5 million points (11 MB) took 26 s of GIL on every rerun, 1.1 million labels 23 s: refused now, once."""
    ys = [f"a{i}" for i in range(points)] if labels else [0.5] * points
    fig = json.dumps({"data": [{"type": "scatter", "x": list(range(points)), "y": ys}], "layout": {}})
    data = changed(lambda d: d["stops"]["flat"].update(figure=fig))
    raw = json.dumps(data).encode()
    start = time.perf_counter()
    got = load(raw)
    assert isinstance(got, str) and time.perf_counter() - start < 1.0, (got, time.perf_counter() - start)
    assert f"{MAX_PACK_BYTES >> 20} MB" in got or str(MAX_PACK_VALUES) in got


def test_a_stored_figure_at_its_cap_draws_under_a_second_per_rerun():
    """The largest figure a pack may store is validated and relabelled once, when read; each rerun copies it."""
    n = (MAX_FIGURE_VALUES - 40) // 2
    fig = json.dumps({"data": [{"type": "scatter", "x": ["ar"] * n, "y": [0.5] * n}], "layout": {}})
    pack = load(changed(lambda d: d["stops"]["flat"].update(figure=fig)))
    assert isinstance(pack, Pack), pack
    stop = next(s for s in lesson().stops if s.id == "flat")
    for _ in range(3):
        start = time.perf_counter()
        drawn, _measured = figure(pack, stop)
        assert time.perf_counter() - start < 1.0
    assert drawn.data[0].x[0] == "plain decoding", "relabelled when read"
    drawn.update_layout(height=10)
    assert figure(pack, stop)[0].layout.height != 10, "each rerun gets its own copy"


def _worst(kind: str) -> bytes:
    """The shape that parses into the most memory per byte, as many values as the pre-count lets through."""
    n = MAX_PACK_VALUES - 8
    item = {"objects": b"{}", "floats": b"0.5", "strings": b'"abcdef"'}[kind]
    return b"[" + b",".join([item] * n) + b"]"


@pytest.mark.parametrize("kind", ["objects", *(pytest.param(k, marks=pytest.mark.soak) for k in ("floats", "strings"))])
def test_the_memory_a_pack_may_take_while_read_is_bounded(kind):
    """40 MB of small objects took +943 MB and stayed in session state: the bytes are sized and their values
    counted before parsing, so a pack takes at most MAX_PACK_MEMORY while read, and keeps only the checked Pack."""
    raw = _worst(kind)
    assert len(raw) <= MAX_PACK_BYTES
    tracemalloc.start()
    try:
        got = load(raw)
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert isinstance(got, str) and peak < MAX_PACK_MEMORY, (got, peak >> 20)
    over = b"[" + b",".join([b"0"] * (MAX_PACK_VALUES + 1)) + b"]"
    assert "more than" in load(over)


def test_a_zero_cost_curve_is_one_sentence_not_a_division_by_zero():
    from specviz.output.lesson_math import computed, flat_until

    with pytest.raises(ValueError, match="positive time"):
        computed("gpu_whatif", {"flat": {"data": {"ks": [1, 2], "ms": [0.0, 1.0]}}})
    with pytest.raises(ValueError, match="positive time"):
        flat_until([1, 2], [0.0, 1.0])


def test_a_check_never_raises():
    """'x' * 999999999 * 4 allocated 4 GB; MemoryError and RecursionError escaped evaluate."""
    start = time.perf_counter()
    v = claims.evaluate("'x' * 999999999 * 4 == 'y'", {})
    assert v.holds is None and "at most" in v.error and time.perf_counter() - start < 1

    def boom(kind):
        raise {"memory": MemoryError, "deep": RecursionError}[kind]()

    for kind in ("memory", "deep"):
        assert claims.evaluate(f"speedup('{kind}') > 1", {"speedup": boom}).holds is None
    assert claims.evaluate("'ab' * 3 == 'ababab'", {}).holds is True


def test_the_cli_refuses_a_pack_in_one_line_with_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(changed(HOSTILE["settings is a list"][0])))
    for path in (str(bad), "/dev/zero", str(tmp_path)):
        assert main(["lesson", "check", path]) == 2, path
        err = capsys.readouterr().err.strip()
        assert err.startswith("specviz: error: ") and "\n" not in err, err
    assert main(["lesson", "check", str(PACK_FILE), "--lesson-file", "/dev/zero"]) == 2
    assert "not a regular file" in capsys.readouterr().err
