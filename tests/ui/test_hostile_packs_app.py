"""Hostile lesson packs in the app (issue 52): an upload refused in one sentence under the uploader, whatever a
checked pack can still raise said on the stop, the sidebar drawn every time (its switch turns the replay off), and
every string a visitor controls shown as text, never as the app's own markdown."""

from __future__ import annotations

import json
import re

import pytest
from streamlit.testing.v1 import AppTest

from tests.apptest import APP
from tests.output.test_hostile_packs import HOSTILE, changed, shipped

UPLOAD, SWITCH = "lesson.pack_file", "lesson.pack"
LINK, HTML = "[Sign in again](https://e.vil/login)", "<b>bold</b><img src=x onerror=alert(1)>"


def opened(stop: str = "1") -> AppTest:
    """The app on the lesson (at `stop`), replaying the shipped recording."""
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params["lesson"], at.query_params["pack"] = stop, ""
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def sidebar_drawn(at: AppTest) -> None:
    """The run ended without an exception, with the replay's switch and the uploader in the sidebar."""
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.toggle(key=SWITCH) is not None and at.sidebar.file_uploader(key=UPLOAD) is not None


def upload(at: AppTest, name: str, data: bytes) -> AppTest:
    return at.file_uploader(key=UPLOAD).set_value((name, data, "application/json")).run()


def plain(text: str) -> bool:
    """No link, image or tag of the visitor's text survives as markdown or HTML: with every escaped character
    taken out, no bracket of a link and no '<' of a tag is left."""
    bare = re.sub(r"\\.", "", text)
    return "[Sign in again" not in bare and "](" not in bare and "<" not in bare


FAST = ["settings is a list", "fewer plain runs than a method's"]  # an AttributeError and a ValueError before


@pytest.mark.parametrize("names", [FAST, pytest.param(list(HOSTILE), marks=pytest.mark.soak)])
def test_every_refused_upload_leaves_the_sidebar_to_switch_it_off(tiny_app, names):
    """A settings list, a string stop or a missing plain run raised AttributeError or KeyError in lesson.route before
    the sidebar was drawn, on every rerun: the uploader and the switch were gone until a reload."""
    at = opened()
    for name in names:
        upload(at, f"{name}.json", json.dumps(changed(HOSTILE[name][0])).encode())
        sidebar_drawn(at)
        said = [e.value for e in at.sidebar.error]
        assert len(said) == 1 and HOSTILE[name][1].replace("'", "\\'")[:4] in said[0] and "\n" not in said[0], said
        assert any(c.value.startswith("Recorded on ") for c in at.caption), "the shipped recording still replays"
    assert at.toggle(key=SWITCH).value and not at.toggle(key=SWITCH).disabled, "the switch can turn the replay off"


@pytest.mark.parametrize(
    "raises",
    [  # route and focus; the banner (the stop then runs live: no focus from the pack); numbers() in focus
        {"nearest": RecursionError, "figure": ZeroDivisionError},
        {"brief": AttributeError},
        {"numbers": ValueError},
    ],
)
def test_what_a_checked_pack_can_still_raise_is_one_sentence_on_the_stop(tiny_app, monkeypatch, raises):
    """route, banner and focus caught LessonError only (focus a few more, numbers() outside its try): now each
    catches what a checked pack can still raise, and says it in one sentence."""
    from specviz.output.lesson import facts as lesson_facts
    from specviz.output.lesson.pack import Pack
    from ui import memo

    def raiser(kind):
        def boom(*_a, **_k):
            raise kind("from a hostile pack")

        return boom

    for name, kind in raises.items():
        monkeypatch.setattr(Pack if name in ("nearest", "brief") else lesson_facts, name, raiser(kind))
    memo.clear()  # a stop's figure, checks and numbers are built once for all visitors: build them with the raisers
    at = opened()
    sidebar_drawn(at)
    said = [w.value for w in at.warning if "cannot draw the stop" in w.value]
    assert len(said) == len(raises) and all(kind.__name__ in s for s, kind in zip(said, raises.values())), said
    assert all("\n" not in s for s in said)


def test_visitor_strings_are_shown_as_text(tiny_app):
    """?pack=[Sign in again](https://…) rendered a link in the app's own warning; an uploaded pack's provenance,
    its stored measurement's note and the file name went into captions, help and errors unescaped."""
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params["pack"] = LINK
    at.run()
    sidebar_drawn(at)
    notes = [w.value for w in at.warning if "No recording" in w.value]
    assert notes and all(plain(n) for n in notes) and "Sign in again" in notes[0], notes

    upload(at, f"{LINK}{HTML}.json", b'{"format": 1}')
    said = [e.value for e in at.sidebar.error]
    assert said and all(plain(e) for e in said) and "Sign in again" in said[0], said

    def marked(d: dict) -> None:
        d["provenance"] |= {"cpu": LINK, "commit": HTML, "device": f"**{LINK}**"}
        d["stops"]["flat"]["measured"] = f"{LINK} {HTML}"

    at = opened("flat")
    upload(at, "marked.json", json.dumps(changed(marked)).encode())
    sidebar_drawn(at)
    shown = [c.value for c in at.caption] + [str(c.proto.help) for c in at.caption]
    assert any("Sign in again" in s for s in shown) and all(plain(s) for s in shown), shown
    at.button(key="lesson_prev").click().run()  # a stop on the pack's runs: where it was recorded, in the banner
    sidebar_drawn(at)
    shown = [c.value for c in at.caption] + [str(c.proto.help) for c in at.caption]
    assert any(s.startswith("Recorded on ") and "Sign in again" in s for s in shown), shown
    assert all(plain(s) for s in shown), shown


def test_an_upload_is_read_once_not_per_rerun(tiny_app, monkeypatch):
    """A stored figure was parsed, validated and relabelled on every rerun of the visitor's page: the upload is read
    once, its stored figures checked then, and the same file uploaded by another visitor is not read again."""
    import specviz.output.lesson.pack as lesson_pack
    import ui.resources as resources

    reads: list[str] = []
    real = lesson_pack.from_bytes
    monkeypatch.setattr(resources, "from_bytes", lambda raw, name: reads.append(name) or real(raw, name))
    resources.uploaded_pack.clear()
    raw = json.dumps(shipped()).encode()
    at = opened("flat")
    upload(at, "again.json", raw)
    for _ in range(2):
        at.run()
    sidebar_drawn(at)
    assert at.session_state["lesson.pack_loaded"].fits, "fitted to the lesson (the figures it draws checked) once"
    upload(opened("flat"), "again.json", raw)  # another visitor, the same file
    assert reads == ["again.json"]
    resources.uploaded_pack.clear()


def test_a_badged_stored_figure_names_its_machine_on_the_badge_and_not_again_in_the_caption(tiny_app):
    """The kinds stop said where it was measured three times (the figure's subtitle, its badge, the caption's
    whole account): the caption now points at the badge, the account one hover away."""
    at = opened("kinds")
    said = [c for c in at.caption if c.value.startswith("From a stored measurement")]
    assert len(said) == 1 and "the badge names" in said[0].value, [c.value for c in said]
    assert "Xeon" not in said[0].value, "the machine is named on the badge, not again here"
    assert "Xeon" in str(said[0].proto.help), "the whole account on hover"
