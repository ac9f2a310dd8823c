"""A visitor's uploads, prompt sets, lesson paths and names shown back: capped per visitor, parsed once, refused in
one sentence, kept inside the shipped folders and escaped (issue 41's medium and low findings)."""

from __future__ import annotations

import json

import pytest
from streamlit.testing.v1 import AppTest

from specviz.core.prompts import MAX_SET, PromptError, parse_prompt_lines
from specviz.output.lesson.visitor import LESSONS, escaped, lesson_file


def uploads_script() -> None:
    """ui.common.uploads on fake uploaded files (name, size, file_id, getvalue), counting the parses."""
    from types import SimpleNamespace

    import streamlit as st

    import ui.common as common

    calls = st.session_state.setdefault("parses", [])
    real = common.load_traces
    common.load_traces = lambda raw, *a: calls.append(1) or real(raw, *a)
    try:
        n, size = st.session_state["n"], st.session_state.get("size", 2)  # size: what each file claims
        files = [
            SimpleNamespace(name=f"f{i}.json", size=size, file_id=f"id{i}", getvalue=lambda: b"{}") for i in range(n)
        ]
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
    at = AppTest.from_function(uploads_script, default_timeout=60)
    at.session_state["n"], at.session_state["size"] = 3, 7 << 20  # under 8 MB each, over 16 MB together
    at.run()
    assert [e.startswith("not read") for _, _, e in at.session_state["out"]] == [False, False, True]


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
    assert lesson_file("lesson.toml") == lesson_file("specviz/output/lesson/lesson.toml") == LESSONS / "lesson.toml"


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


@pytest.mark.parametrize("spec", ["/etc", "/nonexistent-a1b2", "~/.ssh", "../..", "models/../..", "a/b/c", "/tmp/x"])
def test_the_model_box_answers_one_neutral_sentence_outside_the_allowed_folders(spec):
    """The box answered whether any server path existed ('… has no config.json' for /etc, 'neither a folder nor a
    hub id' for a missing one): now every spec outside 'default', models/ and 'org/name' gets the same sentence."""
    from specviz.core.model_files import ModelError
    from specviz.output.lesson.visitor import NEUTRAL, visitor_model

    with pytest.raises(ModelError) as err:
        visitor_model(spec, lambda s: pytest.fail(f"loaded {s}"))
    assert str(err.value) == NEUTRAL


def test_the_model_box_estimates_memory_before_loading_and_loads_one_at_a_time(tmp_path, monkeypatch):
    """3B parameters ≈ 12 GB in fp32, two cached (more while loading): the size is now checked against the free
    memory before any weights are read, and a second visitor's model waits for the first."""
    import specviz.output.lesson.visitor as visitor
    from specviz.core.model_files import ModelError

    (tmp_path / "models" / "big").mkdir(parents=True)
    sizes = {"vocab_size": 49152, "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 24}
    config = {"model_type": "llama", "max_position_embeddings": 4096, **sizes}
    (tmp_path / "models" / "big" / "config.json").write_text(json.dumps(config))
    monkeypatch.setattr(visitor, "MODELS", tmp_path / "models")
    monkeypatch.setattr(visitor, "available_memory", lambda: 2 << 30)
    with pytest.raises(ModelError, match="GiB of memory to load"):
        visitor.visitor_model("models/big", lambda s: pytest.fail("loaded past the memory check"))
    monkeypatch.setattr(visitor, "available_memory", lambda: 64 << 30)
    assert visitor.visitor_model("models/big", lambda s: s) == str(tmp_path / "models" / "big")
    with visitor._LOADING, pytest.raises(ModelError, match="Another visitor's model is loading"):
        visitor.visitor_model("models/big", lambda s: s)


def test_a_hub_download_does_not_stay_on_the_servers_disk(tmp_path, monkeypatch):
    """Hub downloads never left the disk: a visitor could fill it one 3B model at a time."""
    import specviz.output.lesson.visitor as visitor

    config = {"model_type": "llama", "max_position_embeddings": 2048, "vocab_size": 100, "hidden_size": 64}
    config |= {"intermediate_size": 128, "num_hidden_layers": 2}
    monkeypatch.setattr(visitor, "HF_HUB_CACHE", str(tmp_path))
    monkeypatch.setattr(visitor, "hub_config", lambda spec: config)

    def download(spec: str) -> str:
        (tmp_path / "models--org--tiny" / "blobs").mkdir(parents=True)
        return spec

    assert visitor.visitor_model("org/tiny", download) == "org/tiny"
    assert not (tmp_path / "models--org--tiny").exists()
    (tmp_path / "models--org--kept").mkdir()  # an operator's cached model is left alone
    assert visitor.visitor_model("org/kept", lambda s: s) == "org/kept" and (tmp_path / "models--org--kept").exists()


def test_live_deck_notes_do_not_date_cached_runs_by_the_decks_build():
    """The live deck's notes read 'Measured: <the deck's build time, its load>' for runs cached from any session."""
    from specviz.core.measure import provenance
    from specviz.output.deck import notes_text

    notes = notes_text(provenance("cpu · float32"), "m", {}, live=True)
    assert "Measured: on this server since it booted; deck built 20" in notes
