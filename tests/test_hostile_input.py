"""A visitor's uploads, prompt sets, lesson paths and names shown back: capped per visitor, parsed once, refused in
one sentence, kept inside the shipped folders and escaped (issue 41's medium and low findings)."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from specviz.core.prompts import MAX_SET, PromptError, parse_prompt_lines
from specviz.output.visitor import LESSONS, escaped, lesson_file


def uploads_script() -> None:
    """ui.common.uploads on fake uploaded files (name, size, file_id, getvalue), counting the parses."""
    from types import SimpleNamespace

    import streamlit as st

    import ui.common as common

    calls = st.session_state.setdefault("parses", [])
    real = common.load_traces
    common.load_traces = lambda raw, *a: calls.append(1) or real(raw, *a)
    try:
        n = st.session_state["n"]
        files = [SimpleNamespace(name=f"f{i}.json", size=2, file_id=f"id{i}", getvalue=lambda: b"{}") for i in range(n)]
        st.session_state["out"] = common.uploads(files)
    finally:
        common.load_traces = real


def test_uploads_are_capped_per_visitor_and_parsed_once():
    """Any number of 8 MB files stayed in session state and every rerun parsed them all again (8 MB ≈ 3 s and
    +76 MB each): now at most MAX_UPLOADS files are read, each once, and the rest are refused unread."""
    from ui.common import MAX_UPLOADS

    at = AppTest.from_function(uploads_script, default_timeout=60)
    at.session_state["n"] = MAX_UPLOADS + 3
    at.run()
    at.run()  # a rerun (any widget touched) parses nothing again
    assert not at.exception
    assert len(at.session_state["parses"]) == MAX_UPLOADS
    refusals = [error for _, _, error in at.session_state["out"]]
    assert all("not a specviz trace" in e for e in refusals[:MAX_UPLOADS])
    assert all(e.startswith("not read: one visitor may load at most") for e in refusals[MAX_UPLOADS:])


def test_a_prompt_set_is_capped_and_refused_in_one_sentence():
    """Compare's prompt set had no cap (8 MB ≈ 250k prompts benchmarked on one click, the model lock held for
    hours), a deeply nested line escaped as RecursionError, and a nested category was str()-ed whole."""
    lines = "\n".join(json.dumps({"prompt": f"p{i}"}) for i in range(MAX_SET + 1))
    assert len(parse_prompt_lines(lines)) == MAX_SET + 1  # an operator's file (the CLI's bench) is not capped
    with pytest.raises(PromptError, match=f"more than {MAX_SET} prompts"):
        parse_prompt_lines(lines, MAX_SET)
    for bad in ("[" * 100_000 + "]" * 100_000, '{"prompt": "a", "id": 1' + "0" * 5000 + "}", '{"turns": [[[1]]]}'):
        with pytest.raises(PromptError, match="Line 1") as err:
            parse_prompt_lines(bad, MAX_SET)
        assert "\n" not in str(err.value)
    deep = {"prompt": "a", "category": json.loads("[" * 500 + "]" * 500)}
    assert parse_prompt_lines(json.dumps(deep))[0].category == "prompt"


@pytest.mark.parametrize(
    "typed",
    ["/etc/passwd.toml", "~/.config/x.toml", "../../pyproject.toml", "specviz/output/../../x.toml", "a\x00.toml", ""],
)
def test_a_typed_lesson_path_stays_inside_the_shipped_lessons(typed):
    """The Lesson file box read any *.toml on the server (relative to the working directory, ~ included) and
    echoed its values; a NUL byte escaped as a ValueError traceback. Only shipped lesson names resolve now."""
    with pytest.raises(ValueError, match="not a lesson shipped with the app") as err:
        lesson_file(typed)
    assert "\n" not in str(err.value) and "\x00" not in str(err.value)


def test_a_shipped_lesson_resolves_by_its_name():
    assert lesson_file("lesson.toml") == lesson_file("specviz/output/lesson.toml") == LESSONS / "lesson.toml"


def test_visitors_text_is_escaped_before_it_is_shown():
    """`?lesson=` text and uploaded file or method names were rendered as markdown inside the app's own boxes."""
    shown = escaped("**x** [click](http://e.vil) <b>:red[y]</b> $z$\n- " + "a" * 200)
    for mark in ("**", "[click]", "(http", "<b>", ":red[", "$z"):
        assert mark not in shown.replace("\\" + mark[0], "")
    assert "\n" not in shown and len(shown) < 130
    assert escaped("- a") == "\\- a" and escaped("12. a") == "12\\. a"


def test_the_machine_id_is_this_boots_not_the_images():
    """The id hashed /etc/machine-id, which every machine made from one image shares (a 2-core EPYC's γ sweep and a
    Xeon's bench both carried f5c0d4b9bf3a784b): it hashes this boot's id now, so 'this machine' is only ever
    said of what was measured here since the machine booted."""
    from pathlib import Path

    from specviz.core import measure

    boot, image = Path("/proc/sys/kernel/random/boot_id"), Path("/etc/machine-id")
    if not boot.is_file():
        pytest.skip("no kernel boot id on this platform (the id is then empty: never 'this machine')")
    assert measure.machine_id() == measure.machine_id((str(boot),)) != ""
    if image.is_file() and image.read_text().strip():
        assert measure.machine_id() != measure.machine_id((str(image),))
