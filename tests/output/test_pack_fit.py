"""A pack priced by what its lesson uses (issue 63): the stops and stored figures the lesson does not have are
dropped, with a word, before any figure is validated, so a 2.3 MB pack of 900 extra figures no longer costs 28 s and
684 MB; and a pack that does not fit the lesson says which stops it lacks and which it holds instead, in the library,
the CLI's `lesson check` and the app, where an upload that lacks a stop never turns that stop live."""

from __future__ import annotations

import json
import re
import time
import tracemalloc

import pytest

from specviz.__main__ import main
from specviz.output.lesson import pack_schema
from specviz.output.lesson.pack import fit, from_bytes
from specviz.output.lesson.pack_schema import MAX_PACK_MEMORY, MAX_STORED
from tests.output.test_hostile_packs import changed, lesson, shipped
from tests.ui.test_hostile_packs_app import opened, sidebar_drawn, upload

EMPTY = json.dumps({"data": [{}] * 256, "layout": {}})  # the schema's most traces in one figure, each empty
LOOK_ALIKE = "fl\u0430t"  # 'flat' with a Cyrillic a


def _extras(d: dict) -> None:
    """100 stops the lesson does not have, each with a figure and MAX_STORED stored builds (the issue's pack)."""
    for i in range(100):
        d["stops"][f"extra{i}"] = {"figure": EMPTY, "stored": {f"b{k}": EMPTY for k in range(MAX_STORED)}}


def _worst_of_the_lesson(d: dict) -> None:
    """Every figure the lesson draws at the schema's caps: each stop drawn from no run, and every stop's own figure
    and builds as stored ones."""
    for s in lesson().stops:
        entry = d["stops"][s.id]
        if "group" not in entry and "computed" not in entry:
            entry["figure"] = EMPTY
        entry["stored"] = {f: EMPTY for f in list(dict.fromkeys([s.figure, *(b.figure for b in s.builds)]))[:8]}


def _renamed(d: dict) -> None:
    d["stops"][LOOK_ALIKE] = d["stops"].pop("flat")


def _counting(monkeypatch) -> list[str]:
    """Where plotly is asked to validate a stored figure: the schema's bounds run first, on each one."""
    seen: list[str] = []
    real = pack_schema.figure_data
    monkeypatch.setattr(pack_schema, "figure_data", lambda text, where: seen.append(where) or real(text, where))
    return seen


def test_a_pack_is_priced_by_the_lesson_not_by_the_stops_it_carries(monkeypatch, tmp_path):
    """The issue's pack: 100 extra stops, 900 stored figures of 256 traces each, every one validated by plotly
    when read (28 s, 684 MB in `lesson check`): now dropped, named, before any figure is validated."""
    seen = _counting(monkeypatch)
    raw = json.dumps(changed(_extras)).encode()
    start = time.process_time()
    pack = fit(from_bytes(raw, "big.json"), lesson())
    assert time.process_time() - start < 10.0
    shipped_figures = sum(("figure" in e) + len(e.get("stored", {})) for e in shipped()["stops"].values())
    assert len(set(seen)) == len(seen) == len(pack.figures) == shipped_figures, seen
    assert not any("extra" in s for s in pack.stops) and not pack.lacks
    said = pack.note()
    assert said.startswith("big.json holds 100 stop(s) the lesson does not have ('extra0', 'extra1'"), said
    assert "… and 96 more" in said and "900 stored figure(s)" in said, said
    seen.clear()
    path = tmp_path / "big.json"
    path.write_bytes(raw)
    assert main(["lesson", "check", str(path)]) == 0
    assert not any("extra" in w for w in seen), seen


@pytest.mark.full  # tracemalloc over every figure the lesson draws at its caps: ~15 s
def test_the_figures_a_lesson_draws_stay_within_the_schemas_memory_bound():
    """Every figure the lesson draws at its caps, beside the 900 it does not: read and fitted within
    MAX_PACK_MEMORY (the schema's own figure), where validating them all took 684 MB."""
    data = changed(_extras)
    _worst_of_the_lesson(data)
    raw = json.dumps(data).encode()
    tracemalloc.start()
    try:
        pack = fit(from_bytes(raw, "worst.json"), lesson())
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert len(pack.figures) > 30 and peak < MAX_PACK_MEMORY, (len(pack.figures), peak >> 20)


def test_a_pack_with_a_renamed_stop_says_which_it_lacks_and_which_it_holds():
    """A stop id with one look-alike character, or another lesson's pack, was ignored without a word."""
    pack = fit(from_bytes(json.dumps(changed(_renamed)).encode(), "upload.json"), lesson())
    assert pack.lacks == ("flat",) and pack.dropped == (LOOK_ALIKE,)
    assert pack.note() == (
        f"upload.json does not fit the lesson: it lacks 1 of its stops ('flat') and holds 1 stop(s) the lesson does "
        f"not have ({LOOK_ALIKE!r})."
    )


def _said(elements) -> list[str]:
    return [re.sub(r"\\(.)", r"\1", e.value) for e in elements]  # the app escapes a visitor's text


def test_an_upload_that_does_not_fit_says_so_and_its_stops_keep_the_recording(tiny_app):
    """The renamed pack was taken as it came, and every stop of the lesson then ran live (the model loaded and
    ran): it is refused now, saying what it lacks and holds, and the stop keeps the recording it had. A pack of
    the lesson and more is replayed, the stops it holds beyond the lesson named under the uploader."""
    at = opened("flat")
    upload(at, "renamed.json", json.dumps(changed(_renamed)).encode())
    sidebar_drawn(at)
    said = _said(at.sidebar.error)
    assert len(said) == 1 and "lacks 1 of its stops ('flat')" in said[0] and repr(LOOK_ALIKE) in said[0], said
    assert "stops keep the recording" in said[0], said
    shown = [c.value for c in at.caption]
    assert any(c.startswith("From the recording") for c in shown) and not any("**Live**" in c for c in shown), shown
    upload(at, "more.json", json.dumps(changed(_extras)).encode())
    sidebar_drawn(at)
    assert not at.sidebar.error
    noted = _said(at.sidebar.caption)
    assert any(n.startswith("more.json holds 100 stop(s) the lesson does not have") for n in noted), noted
    assert any(c.value.startswith("From the recording") for c in at.caption)
