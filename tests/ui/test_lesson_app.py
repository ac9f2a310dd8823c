"""The lesson runner under AppTest on the tiny model: it starts from the address, ◀ / ▶ move across pages with each
stop's settings and prompt, the sidebar's own settings survive the switches, and a bad lesson file is a message."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from specviz.core.prompts import preset_prompts
from specviz.output.lesson.model import ENV
from tests.apptest import APP, chart_specs, chart_title
from tests.output.test_lesson import lesson_text, stop, write

MEDUSA = 'settings = { "medusa.total_tokens" = 7, "medusa.hydra" = false, "medusa.repeats" = 1 }'
LESSON = lesson_text(
    stop("serial", "timeline", "timeline_at", 'methods = ["ar", "pld"]\nsettings = { "timeline.methods" = ["pld"] }'),
    stop("flat", "home", "latency_curve"),
    stop("tree", "medusa", "medusa_tree", 'methods = ["medusa"]\nprompt = "extract-json"\n' + MEDUSA),
    stop("lineage", "lineage", "lineage"),
)


TITLES = {  # each page's own title, as it starts
    "Serial versus parallel": "timeline.py",
    "Why parallel decoding": "home.py",
    "Medusa": "medusa.py",
    "Where the methods come from": "lineage.py",
}


def page_of(at: AppTest) -> str:
    """The page running now (AppTest knows only the page it was sent to, not one the app switched to)."""
    title = at.title[0].value if at.title else ""
    return next((page for start, page in TITLES.items() if title.startswith(start)), title)


def problems(at: AppTest) -> list[str]:
    return [str(e.value) for e in at.exception] + [e.value for e in at.error]


def banner(at: AppTest) -> str:
    return next((m.value for m in at.markdown if m.value.startswith("**Stop ")), "")


def focused(at: AppTest) -> str:
    """The title of the first figure (the stop's, at the top), checked to be one the page itself drew below."""
    titles = [chart_title(s) for s in chart_specs(at)]
    assert titles and titles[0] in titles[1:], titles
    return titles[0]


def lesson_app(tmp_path, monkeypatch, text: str = LESSON) -> AppTest:
    monkeypatch.setenv(ENV, str(write(tmp_path, text)))
    at = AppTest.from_file(APP, default_timeout=600)
    at.session_state["sidebar.seed"] = 7  # a sidebar setting of the visitor's, to be kept across the stops' pages
    at.query_params["lesson"] = "1"
    return at.run()


@pytest.mark.full  # live lesson pages under AppTest (the fast tier replays a pack: test_lesson_pack)
def test_the_lesson_walks_across_pages(tiny_app, tmp_path, monkeypatch):
    at = lesson_app(tmp_path, monkeypatch)
    assert not problems(at), problems(at)
    assert page_of(at) == "timeline.py" and banner(at).startswith("**Stop 1 of 4** · **A stop**")
    assert focused(at).startswith("All lanes at t =")
    assert at.session_state["timeline.methods"] == ["pld"] and at.session_state["sidebar.max_new_tokens"] == 8
    assert any("Prompt lookup: A " in m.value and "× plain decoding" in m.value for m in at.markdown)
    assert at.button(key="lesson_prev").disabled

    at.button(key="lesson_next").click().run()
    assert not problems(at) and page_of(at) == "home.py" and banner(at).startswith("**Stop 2 of 4**")
    assert focused(at).startswith("Cost of one forward pass")
    assert any(
        c.value.startswith("From a stored measurement, measured on") and "the computer running specviz" in c.value
        for c in at.caption
    )

    at.button(key="lesson_next").click().run()
    assert not problems(at) and page_of(at) == "medusa.py"
    assert focused(at).startswith("Candidate tree")
    assert (
        at.session_state["medusa.total_tokens"] == 7 and at.session_state["sidebar.seed"] == 7
    )  # kept over 2 switches
    json_prompt = next(p.text for p in preset_prompts() if p.id == "extract-json")
    assert at.session_state["sidebar.prompt"] == json_prompt  # this stop chose its own shipped prompt
    assert any(c.value.endswith("Prompt: extraction · Order to JSON (shipped, this stop's own).") for c in at.caption)

    at.button(key="lesson_prev").click().run()
    assert page_of(at) == "home.py" and banner(at).startswith("**Stop 2 of 4**")
    at.button(key="lesson_next").click().run().button(key="lesson_next").click().run()
    assert not problems(at) and page_of(at) == "lineage.py" and focused(at).startswith("From blockwise")
    assert at.button(key="lesson_next").disabled and at.session_state["lesson.on"]


@pytest.mark.full  # live lesson pages under AppTest (the fast tier replays a pack: test_lesson_pack)
def test_the_keys_are_bound_and_the_switch_starts_it(tiny_app, tmp_path, monkeypatch):
    monkeypatch.setenv(ENV, str(write(tmp_path, LESSON)))
    at = AppTest.from_file(APP, default_timeout=600)
    at.switch_page("views/lineage.py").run()
    assert not banner(at)
    at.sidebar.toggle(key="lesson.on").set_value(True).run()  # the sidebar's switch: the first stop, on its page
    assert page_of(at) == "timeline.py" and banner(at).startswith("**Stop 1 of 4**")
    script = " ".join(str(h.proto) for h in at.get("html"))
    assert "PageDown" in script and "lesson_next" in script and "lesson_prev" in script
    decks = [str(d.proto.label) for d in at.get("download_button")]
    assert "Slide deck of the lesson (4 slides, .pptx)" in decks, decks


def test_a_bad_lesson_file_is_a_message(tiny_app, tmp_path, monkeypatch):
    at = lesson_app(tmp_path, monkeypatch, lesson_text(stop(figure="the_race")))
    assert not at.exception
    said = [e.value for e in at.error]
    assert any(e.startswith("The lesson cannot run:") and "'figure' 'the_race'" in e for e in said), said


@pytest.mark.parametrize(
    "typed", [pytest.param(t, marks=pytest.mark.full) for t in ("/etc/passwd", "../../pyproject.toml", "~/x.toml")]
)
def test_a_typed_lesson_path_names_a_shipped_lesson_only(tiny_app, tmp_path, monkeypatch, typed):
    """A visitor's box on a shared server: any text but a shipped lesson's name is one sentence (the same whether
    or not such a file exists), and nothing outside the shipped lessons' folder is read."""
    at = lesson_app(tmp_path, monkeypatch)
    at.session_state["lesson.file"] = typed
    at.run()
    said = [e.value for e in at.error]
    assert not at.exception and any("is not a lesson shipped with the app" in e for e in said), said
