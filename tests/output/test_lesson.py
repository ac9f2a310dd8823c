"""The lesson as data: the shipped file loads, a bad file is one clear sentence (in the CLI one line and exit 2),
and the deck writes one slide per stop (picture, narration, notes with provenance) that python-pptx reads back."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from pptx import Presentation

from specviz.__main__ import main
from specviz.output import deck
from specviz.output.lesson.deck import write_lesson_deck
from specviz.output.lesson.model import ENV, LESSON_FILE, PAGES, LessonError, load_lesson, parse_lesson
from specviz.output.lesson.settings import configs
from tests.output.test_deck import fake_png

STOP = """
[[stop]]
id = "{id}"
title = "A stop"
page = "{page}"
figure = "{figure}"
narration = "Two sentences. About one figure."
{extra}
"""


def lesson_text(*stops: str, head: str = 'title = "Test"\nmax_new_tokens = 8\n') -> str:
    return head + "".join(stops)


def stop(id="s1", page="timeline", figure="timeline_at", extra="") -> str:
    return STOP.format(id=id, page=page, figure=figure, extra=extra)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "lesson.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_shipped_lesson_walks_every_chapter():
    from specviz.output.lesson.facts import STEP_FIGURES, shown_step
    from specviz.output.lesson.pack import group_key, plan, read

    lesson, pack = load_lesson(LESSON_FILE), read()
    groups = plan(lesson)  # the shipped lesson can be recorded: one setting per method and prompt
    pages = [s.page for s in lesson.stops]
    # every page has a stop but What data buys, whose curves a stop of Acceptance decisions builds from formulas
    assert set(pages) == set(PAGES) - {"data"}, "every page has at least one stop"
    assert pages[0] == "timeline" and pages[-1] == "lineage"
    for s in lesson.stops:
        assert s.figure in PAGES[s.page].names
        assert 2 <= s.narration.count(". ") + 1 <= 4, (s.id, "two or three sentences")
        assert all(k.startswith(f"{s.page}.") for k in s.widget_values())
        configs(s)  # every stop's runs can be configured without a model
        key = group_key(s, lesson)
        told_here = any(not isinstance(p, str) for p in s.spoken)  # its numbers and choices held by its data
        assert s.checks or told_here, (s.id, "every stop states its facts as checks or tells them from its data")
        # each check declares its kind; one backing no sentence holds what must hold on any device (the output
        # identical to plain decoding's, the speedup against A / r, the fitted tree)
        assert all(c.kind for c in s.checks), (s.id, "each check declares its kind")
        if s.figure in STEP_FIGURES and key is not None:  # a method stop shows a step where drafts pass
            step = shown_step(s, pack.groups[key])
            assert step is not None and step.drafts_accepted >= 1, s.id
        assert key is None or set(s.methods) - {"ar"} <= set(groups[key].configs), s.id


def test_a_preset_stands_for_the_sliders_it_fills():
    medusa = {"id": "m", "title": "M", "page": "medusa", "figure": "medusa_tree", "narration": "One. Two."}
    lesson = parse_lesson({"stop": [medusa | {"settings": {"medusa.preset": "paper", "medusa.hydra": False}}]})
    assert lesson.stops[0].widget_values() == {"medusa.heads": 4, "medusa.total_tokens": 64, "medusa.hydra": False}
    assert configs(lesson.stops[0])[0]["medusa"].total_tokens == 64


BAD = [
    ("not = [valid", "is not valid TOML"),
    (lesson_text(), "at least one [[stop]]"),
    (lesson_text(stop(page="nowhere")), "'page' 'nowhere' is not a page; choose from home, timeline"),
    (lesson_text(stop(figure="timeline_x")), "is not one the timeline page can focus; choose from timeline_race"),
    (lesson_text(stop(extra='prompt = "no-such"')), "'prompt' 'no-such' is not a shipped prompt"),
    (lesson_text(stop(extra='methods = ["warp"]')), "'methods' must list methods among"),
    (lesson_text(stop(extra='colour = "red"')), "unknown key 'colour'"),
    (lesson_text(stop(extra='settings = { "medusa.budget" = 4 }')), "the timeline page has no setting 'medusa.budget'"),
    (lesson_text(stop(extra='settings = { "timeline.methods" = "medusa" }')), "'timeline.methods' must be a list"),
    (
        lesson_text(stop(page="medusa", figure="medusa_tree", extra='settings = { "medusa.total_tokens" = 99 }')),
        "setting 'medusa.total_tokens' must be a whole number from 1 to 65, not 99",
    ),
    (  # the key before total_tokens is gone (no committed lesson used it)
        lesson_text(stop(page="medusa", figure="medusa_tree", extra='settings = { "medusa.budget" = 4 }')),
        "the medusa page has no setting 'medusa.budget'",
    ),
    (
        lesson_text(stop(page="medusa", figure="medusa_tree", extra='settings = { "medusa.preset" = "best" }')),
        "'medusa.preset' must be one of fitted, paper",
    ),
    (lesson_text(stop(), stop()), "the id 's1' is used by an earlier stop"),
    (lesson_text(stop(), head="max_new_tokens = 0\n"), "'max_new_tokens' must be a whole number from 1 to 512"),
    (lesson_text(stop(), head="speed = 2\n"), "unknown key 'speed' at the top"),
    (lesson_text(stop().replace("Two sentences. About one figure.", "x" * 800)), "at most 700 fit a stop"),
    # shapes that escaped as tracebacks (issue 41): a list where a prompt's name goes, arrays nested 5,000 deep
    (lesson_text(stop(), head='prompt = ["code-hints"]\n'), "'prompt' ['code-hints'] is not a shipped prompt"),
    (lesson_text(stop(extra='prompt = ["a", "b"]')), "'prompt' ['a', 'b'] is not a shipped prompt"),
    ("x = " + "[" * 5000 + "]" * 5000, "nests its values too deeply"),
    # a check as a table: its kind one of three, the marks it backs plain names, its expression text
    (lesson_text(stop(extra='checks = [{ check = \'A("pld") > 1\', kind = "guessed" }]')), "kind is one of measured"),
    (
        lesson_text(stop(extra='checks = [{ check = \'A("pld") > 1\', backs = ["A B"] }]')),
        "names marks of the narration",
    ),
    (lesson_text(stop(extra="checks = [{ check = 3 }]")), "a check's 'check' is an expression in quotes, not 3"),
]


@pytest.mark.parametrize(("text", "says"), BAD)
def test_a_bad_lesson_is_one_clear_sentence(tmp_path, text, says):
    path = write(tmp_path, text)
    with pytest.raises(LessonError) as err:
        load_lesson(path)
    message = str(err.value)
    assert says in message and "\n" not in message, message
    assert str(path) in message or "lesson" in message


def test_missing_file_and_the_environment(tmp_path, monkeypatch):
    with pytest.raises(LessonError, match="could not be read"):
        load_lesson(tmp_path / "nowhere.toml")
    with pytest.raises(LessonError, match="could not be read"):  # a NUL byte in the path (ValueError from stat)
        load_lesson(str(tmp_path / "bad\0name.toml"))
    own = write(tmp_path, lesson_text(stop(id="mine")))
    monkeypatch.setenv(ENV, str(own))
    assert [s.id for s in load_lesson().stops] == ["mine"]  # $SPECVIZ_LESSON replaces the shipped lesson
    assert load_lesson(LESSON_FILE).stops[0].id != "mine"  # a path given wins


def test_cli_refuses_a_bad_lesson_in_one_line(tmp_path, capsys, monkeypatch):
    import specviz.__main__ as cli

    monkeypatch.setattr(cli, "_load", lambda a: pytest.fail("the model must not load for a bad lesson"))
    bad = write(tmp_path, lesson_text(stop(figure="nope")))
    assert main(["export", "--lesson", str(tmp_path / "d.pptx"), "--lesson-file", str(bad)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("specviz: error:") and "'figure' 'nope'" in err[0]
    good = write(tmp_path, lesson_text(stop()))
    assert main(["export", "--lesson", str(tmp_path / "d.ppt"), "--lesson-file", str(good)]) == 2
    assert "must name a .pptx file" in capsys.readouterr().err


# one stop per kind of figure source: runs on the page's settings, a stored bench, the probe, the lineage, the lab
DECK = lesson_text(
    stop("serial", "timeline", "timeline_at", 'methods = ["ar", "pld"]\nsettings = { "timeline.methods" = ["pld"] }'),
    stop("flat", "home", "latency_curve"),
    stop("alone", "timeline", "timeline_race", 'settings = { "timeline.methods" = [] }'),
    stop("medusa", "medusa", "medusa_tree", 'methods = ["medusa"]\nprompt = "extract-json"'),
    stop("eagle", "eagle", "eagle_growth", 'methods = ["eagle"]\nsettings = { "eagle.preset" = "paper" }'),
    stop("window", "lookahead", "lookahead_window", 'settings = { "lookahead.preset" = "paper" }'),
    stop("sps", "acceptance", "acceptance_decisions", 'settings = { "acceptance.depth" = 2 }'),
    stop("lab", "acceptance", "acceptance_lab", 'settings = { "acceptance.depth" = 2, "acceptance.samples" = 1000 }'),
    stop("a_r", "compare", "a_and_r", 'settings = { "compare.on.pld" = true, "compare.on.eagle" = false }'),
    stop("batch", "compare", "speedup_vs_batch"),
    stop("lineage", "lineage", "lineage"),
)


def read_back(data: bytes) -> list[dict]:
    out = []
    for slide in Presentation(io.BytesIO(data)).slides:
        texts = [s.text_frame.text for s in slide.shapes if s.has_text_frame]
        pics = [s for s in slide.shapes if s.shape_type == 13]  # MSO_SHAPE_TYPE.PICTURE
        out.append({"texts": texts, "pictures": len(pics), "notes": slide.notes_slide.notes_text_frame.text})
    return out


@pytest.mark.full  # every stop's methods run live on the tiny model: ~12 s (the deck from a pack: test_lesson_pack)
def test_the_lesson_deck_has_a_slide_per_stop(tiny_app, tmp_path, monkeypatch):
    monkeypatch.setattr(deck, "render_png", fake_png)  # kaleido's chromium is the full tier's (test_deck)
    lesson = load_lesson(write(tmp_path, DECK))
    path = write_lesson_deck(tmp_path / "lesson.pptx", tiny_app, lesson)
    slides = read_back(path.read_bytes())
    assert len(slides) == len(lesson.stops)
    for s, back in zip(lesson.stops, slides):
        assert back["pictures"] == 1, s.id
        assert back["texts"][0].splitlines()[0] == s.title and s.narration in back["texts"], s.id
        notes = back["notes"]
        assert "Model: tiny-random" in notes and "Device: tiny-random · cpu" in notes and "Measured: " in notes
        assert f"({s.id}), the {PAGES[s.page].title} page, figure {s.figure}" in notes
        assert "Prompt: " in notes and ("(shipped, id extract-json)" in notes) == (s.id == "medusa")
    by_id = dict(zip([s.id for s in lesson.stops], slides))
    assert "From a stored measurement, batched-batch-" in by_id["batch"]["notes"]
    serial = by_id["serial"]["notes"]
    assert "Settings (pld)" in serial and "Live numbers: Plain decoding: A 1.00" in serial
    assert "; Prompt lookup: A " in serial and "× plain decoding (one run each)" in serial
    # the Config each stop ran, its shape filled (Medusa's by the device's fit; EAGLE's stop asks for the paper's)
    assert (
        re.search(r'"total_tokens": [1-9]', by_id["medusa"]["notes"])
        and '"total_tokens": 0' not in by_id["medusa"]["notes"]
    )
    assert '"total_tokens": 60' in by_id["eagle"]["notes"]
    assert "; the roofline from float32 peaks measured on " in by_id["flat"]["notes"]


@pytest.mark.full  # a deck slide through the home page's figure builders: seconds
def test_the_cost_curve_slide_has_the_home_pages_roofline(tiny_app):
    from specviz.output.lesson.figures import latency

    drawn = latency(tiny_app)
    names = [str(t["name"]) for t in drawn.figure.to_dict()["data"]]
    assert any(n.startswith("memory floor") for n in names) and any(n.startswith("compute ceiling") for n in names)
    assert "the roofline from" in drawn.measured


@pytest.mark.full  # the export command over the live lesson (the deck from a pack: test_lesson_pack, fast)
def test_the_export_command_writes_the_lesson(tiny_app, tmp_path, monkeypatch, capsys):
    import specviz.__main__ as cli

    monkeypatch.setattr(deck, "render_png", fake_png)
    monkeypatch.setattr(cli, "_load", lambda a: tiny_app)  # the command's own model loader, on the tiny model
    own = write(tmp_path, lesson_text(stop("a", extra='methods = ["ar"]'), stop("b", "lineage", "lineage")))
    out = tmp_path / "deck.pptx"
    assert main(["export", "--lesson", str(out), "--lesson-file", str(own)]) == 0
    assert capsys.readouterr().out.strip() == f"wrote 2 slides (the lesson {own}) to {out}"
    slides = read_back(out.read_bytes())
    assert [s["pictures"] for s in slides] == [1, 1]
    assert "Live numbers: Plain decoding: A 1.00" in slides[0]["notes"] and "Measured: " in slides[0]["notes"]
