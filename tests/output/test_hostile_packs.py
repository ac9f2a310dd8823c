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
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from specviz.__main__ import main
from specviz.output.lesson import claims
from specviz.output.lesson.facts import check, figure, numbers
from specviz.output.lesson.model import LESSON_FILE, LessonError, load_lesson
from specviz.output.lesson.pack import PACK_FILE, Pack, fit, from_bytes, from_dict
from specviz.output.lesson.pack_schema import (
    MAX_FIGURE_VALUES,
    MAX_PACK_BYTES,
    MAX_PACK_MEMORY,
    MAX_PACK_TRACES,
    MAX_PACK_VALUES,
)
from specviz.output.lesson.slides import answers

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
    """The pack `data` makes (written as JSON writes it, NaN and Infinity too), fitted to the shipped lesson as the
    app fits an upload (its figures the lesson draws validated then), or the sentence refusing it."""
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    try:
        return fit(from_bytes(raw, name), lesson())
    except LessonError as exc:
        return one_sentence(str(exc))


def replay(pack: Pack) -> list[str]:
    """Every stop (and build) of the shipped lesson drawn from `pack` along the app's path (ui.lesson.pack: route,
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
            said += [a for _q, a in answers(stop.at(stop.frames - 1), group)]  # the four questions, answered
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

    with pytest.raises(LessonError, match=f"holds 165 traces; a pack holds at most {MAX_PACK_TRACES}"):
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


def test_a_stored_figure_of_typed_arrays_is_counted_by_its_values():
    """Plotly's typed arrays hold many numbers in one base64 string: 95,000 points in 127 KB were one value."""
    import base64

    packed = {"dtype": "i1", "bdata": base64.b64encode(bytes(95_000)).decode()}
    fig = json.dumps({"data": [{"type": "scatter", "x": packed, "y": packed}]})
    got = load(changed(lambda d: d["stops"]["flat"].update(figure=fig)))
    assert isinstance(got, str) and "typed arrays" in got, got


def test_a_stored_figure_at_its_cap_draws_under_a_second_per_rerun():
    """The largest figure a pack may store is validated and relabelled once, when fitted to the lesson; each rerun
    copies it."""
    n = (MAX_FIGURE_VALUES - 40) // 2
    fig = json.dumps({"data": [{"type": "scatter", "x": ["ar"] * n, "y": [0.5] * n}], "layout": {}})
    pack = load(changed(lambda d: d["stops"]["flat"].update(figure=fig)))
    assert isinstance(pack, Pack), pack
    stop = next(s for s in lesson().stops if s.id == "flat")
    for _ in range(3):
        start = time.perf_counter()
        drawn, _measured = figure(pack, stop)
        assert time.perf_counter() - start < 1.0
    assert drawn.data[0].x[0] == "plain decoding", "relabelled when fitted"
    drawn.update_layout(height=10)
    assert figure(pack, stop)[0].layout.height != 10, "each rerun gets its own copy"


def _worst(kind: str) -> bytes:
    """The shape that parses into the most memory per byte, as many values as the pre-count lets through."""
    n = MAX_PACK_VALUES - 8
    item = {"objects": b"{}", "floats": b"0.5", "strings": b'"abcdef"'}[kind]
    return b"[" + b",".join([item] * n) + b"]"


@pytest.mark.full  # tracemalloc over a parse of the largest pack the pre-count lets through: ~10 s
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
    from specviz.output.lesson.formulas import computed, flat_until

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


def test_the_cli_prints_a_packs_provenance_without_terminal_control_codes(tmp_path, capsys):
    """`lesson check` printed a pack's provenance as it came: a visitor's pack could move the cursor, clear the
    screen or rewrite the line above in the lecturer's terminal."""

    def marked(d: dict) -> None:
        d["provenance"] |= {"cpu": "\x1b[2J\x1b[1;1HAll checks hold\r", "commit": "\x07\x1b]0;title\x07"}

    path = tmp_path / "marked.json"
    path.write_text(json.dumps(changed(marked)))
    main(["lesson", "check", str(path)])
    first = capsys.readouterr().out.splitlines()[0]
    assert "All checks hold" in first and not any(c in first for c in "\x1b\x07\r"), repr(first)


CONTROL = "\x1b[2J\x9b31m\x07\x08\r\x1b]8;;https://e.vil\x1b\\link\x1b]8;;\x1b\\"  # clear, CSI, BEL, BS, CR, OSC-8


def test_the_cli_escapes_every_line_it_prints_from_a_pack(tmp_path, capsys):
    """Issue 63: the kinds stop's category keys reached the terminal raw through its checks' figures (a method named
    by its codes wins `best("extraction")`): every line now shows each control character as its escape."""

    def marked(d: dict) -> None:
        d["stops"]["kinds"]["data"]["categories"]["extraction"][CONTROL] = 99.0
        d["provenance"]["cpu"] = CONTROL

    path = tmp_path / "marked.json"
    path.write_text(json.dumps(changed(marked)))
    assert main(["lesson", "check", str(path)]) == 1  # best("extraction") is that key now: the check fails
    out = capsys.readouterr().out
    raw = [line for line in out.split("\n") if any(not c.isprintable() for c in line)]
    assert not raw and "\r" not in out, raw
    shown = next(line for line in out.split("\n") if 'best("extraction") = ' in line)
    assert r"\x1b[2J\x9b31m\x07\x08\r\x1b]8;;https://e.vil\x1b\link" in shown, shown


# --- the fuzz: the shipped pack with one hostile change somewhere, at any level, replayed through every stop ---

LINK, HTML = "[Sign in again](https://e.vil/login)", "<b>bold</b><img src=x onerror=alert(1)>"
VALUES = st.one_of(
    st.sampled_from([None, True, 0, -1, 1 << 63, 10**30, 1e308, -1e308, float("inf"), float("nan"), 1e-300]),
    st.sampled_from(["", [], {}, [[]], {"": {}}, {"group": 1}, [None] * 3, LINK, HTML, "**x** $y$ :red[z]"]),
    st.sampled_from(["[" * 5000, '{"data": ' * 3000, "x" * 300_000, "ar " * 1000, "\x00\x1b[31m"]),
    st.text(max_size=40),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
)
OPS = ("replace", "delete", "repeat", "empty", "like", "like")
LIKE = {  # a value of the same kind ("like"): past the schema more often, into the drawing with odd values
    str: st.sampled_from([LINK, HTML, "", "ar", "x" * 199, "0", "nope@0"]),
    bool: st.booleans(),
    int: st.sampled_from([0, 1, 2, 64, 8191]),
    float: st.sampled_from([0.0, 1e-9, 0.5, 1.0, 1e6]),
}


def _at(data: Any, path: list, op: str, value: Any, times: int) -> Any:
    """`data` with the value at `path` replaced, deleted, its list repeated `times` times or emptied; only the
    containers along the path are copied."""
    if not path:
        if op == "like":
            return value
        if op == "repeat" and isinstance(data, (list, str)):  # past the byte cap, not into gigabytes of test data
            return data * min(times, max(2, 2 * MAX_PACK_BYTES // max(1, len(json.dumps(data)))))
        if op == "empty" and isinstance(data, (list, dict, str)):
            return type(data)()
        return value
    head, rest = path[0], path[1:]
    out = copy.copy(data)
    if op == "delete" and not rest and isinstance(out, dict):
        del out[head]
        return out
    out[head] = _at(data[head], rest, op, value, times)
    return out


@st.composite
def hostile_packs(draw) -> Case:
    """The shipped pack with one change at a level drawn as a walk from the top (each step: stop or go into one
    of the container's keys or items), so every level is as likely to be reached as the one above allows."""
    node, path = shipped(), []
    while isinstance(node, (dict, list)) and node and draw(st.booleans()):
        key = draw(st.sampled_from(list(node) if isinstance(node, dict) else range(len(node))))
        path.append(key)
        node = node[key]
    op = draw(st.sampled_from(OPS))
    value, times = draw(LIKE.get(type(node), VALUES) if op == "like" else VALUES), draw(st.sampled_from([2, 20, 2000]))
    return Case((_at(shipped(), path, op, value, times), f"{op} {_short(value)} at {path[:8]} (x{times})"))


class Case(tuple):
    """(pack data, what was changed), shown by what was changed: a failing example names its change, not 3 MB."""

    def __repr__(self) -> str:
        return self[1]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}… ({len(text)} characters)"


def _replayed_or_refused(data: Any) -> None:
    """Refused in one sentence or drawn at every stop, within SECONDS of this process's CPU (the machine's other
    work does not count: on a shared 2-core box a wall clock measured the neighbours)."""
    raw = json.dumps(data).encode()  # the visitor's file (its writing is not timed)
    start = time.process_time()
    got = load(raw)
    event("drawn at every stop" if isinstance(got, Pack) else "refused at load")
    if isinstance(got, Pack):
        for reason in replay(got):  # the app shows each in one sentence (ui.lesson.pack.refused)
            assert reason.split(":")[0].isidentifier(), reason
    assert time.process_time() - start < SECONDS, time.process_time() - start


@settings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
@given(hostile_packs())
def test_fuzz_a_hostile_pack_is_drawn_or_refused_in_one_sentence(case):
    """Wrong types at every level, huge and tiny sizes, non-finite and overflowing numbers, markdown and HTML, deep
    nesting inside strings: each pack is refused at load in one sentence or drawn at every stop, within SECONDS."""
    _replayed_or_refused(case[0])


@pytest.mark.soak
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(hostile_packs())
def test_fuzz_hundreds_of_hostile_packs(case):
    _replayed_or_refused(case[0])


def test_a_stored_figure_draws_no_link_or_styled_text():
    """Plotly draws <a href> in a title or an annotation as a link: a visitor's stored figure keeps only line
    breaks, bold, italics, super- and subscripts."""
    link = '<a href="https://e.vil/login">Sign in again</a> <span style="font-size:99px">big</span>'
    fig = {"data": [{"type": "bar", "x": ["ar"], "y": [1], "name": link}], "layout": {"title": {"text": link}}}
    fig["layout"]["annotations"] = [{"text": f"<b>kept</b><br>{link}", "x": 0, "y": 0}]
    pack = load(changed(lambda d: d["stops"]["flat"].update(figure=json.dumps(fig))))
    assert isinstance(pack, Pack), pack
    drawn = figure(pack, next(s for s in lesson().stops if s.id == "flat"))[0]
    assert drawn.layout.title.text == drawn.data[0].name == "Sign in again big"
    assert drawn.layout.annotations[0].text == "<b>kept</b><br>Sign in again big"
