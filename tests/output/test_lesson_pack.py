"""A lesson measured once and replayed: the recorder and the checker on the tiny model, one number per method,
and the claims language (a whitelist walked over `ast`, never eval)."""

from __future__ import annotations

import json

import pytest

from specviz.__main__ import main
from specviz.output.lesson import claims
from specviz.output.lesson.facts import check, figure, numbers
from specviz.output.lesson.model import LessonError, load_lesson, parse_lesson
from specviz.output.lesson.pack import plan, read
from specviz.output.lesson.record import record, write
from tests.output.test_lesson import lesson_text, stop

pytestmark = pytest.mark.xdist_group("app")  # one worker records the module's pack once, beside the app's AppTests

PACKED = lesson_text(
    stop("serial", "timeline", "timeline_at", 'methods = ["ar", "pld"]\nsettings = { "timeline.methods" = ["pld"] }'
         '\nchecks = ["tps(\\"ar\\") > 0", "prefill_share() < 1"]'),
    stop("medusa", "medusa", "medusa_tree",
         'methods = ["medusa"]\nchecks = ["accepted(step) >= 0", "A(\\"medusa\\") >= 1"]'),
    stop("race", "timeline", "timeline_at", 'methods = ["medusa", "pld"]\n'
         'settings = { "timeline.methods" = ["medusa", "pld"] }\nchecks = ["speedup(\\"pld\\") > 0"]'),
    stop("lineage", "lineage", "lineage", 'checks = ["speedup(\\"eagle\\") > 0.5 * speedup(\\"pld\\")"]'),
    stop("wrong", "timeline", "tokens_over_time", 'methods = ["pld"]\nsettings = { "timeline.methods" = ["pld"] }\n'
         'checks = ["r(\\"pld\\") < 0"]'),
)  # fmt: skip


@pytest.fixture(scope="module")
def packed(tmp_path_factory, app_lm, app_cache):
    """The small lesson recorded once on the tiny model (3 repeats, 8 tokens): (lesson, pack file)."""
    folder = tmp_path_factory.mktemp("pack")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPECVIZ_CACHE", str(app_cache))
        (folder / "lesson.toml").write_text(PACKED, encoding="utf-8")
        lesson = load_lesson(folder / "lesson.toml")
        path = write(record(app_lm, lesson, repeats=3, note=lambda _m: None), folder / "pack.json")
    return lesson, path


def test_a_pack_replays_every_stop_with_one_number_per_method(packed):
    lesson, path = packed
    pack = read(path)
    assert len(pack.groups) == 1, "the stops on one prompt and temperature share one set of interleaved runs"
    group = next(iter(pack.groups.values()))
    assert all(len(ts) == 3 for ts in group.runs.values()) and set(group.runs) == {"ar", "pld", "medusa"}
    said: dict[str, set[str]] = {}
    for s in lesson.stops:
        fig, measured = figure(pack, s)  # no model: from the pack's runs, or its stored figure
        assert fig.to_dict()["data"], s.id
        assert (measured != "") == (s.figure == "lineage")
        for line in numbers(s, group) if pack.group(s) else []:
            said.setdefault(line.split(":")[0], set()).add(line)
    assert said["Prompt lookup"] and all(len(lines) == 1 for lines in said.values()), said
    assert "3 runs" in next(iter(said["Medusa"]))
    data = json.loads(path.read_text())
    assert data["provenance"]["cpu"] and data["settings"]["repeats"] == 3 and "load_after" in data


def test_lesson_check_prints_each_figure_and_fails_on_a_refuted_claim(packed, capsys):
    lesson, path = packed
    assert main(["lesson", "check", str(path), "--lesson-file", lesson.source]) == 1
    out = capsys.readouterr().out
    assert 'FAILS     measured    r("pld") < 0  [r("pld") = ' in out
    assert 'holds     measured    A("medusa") >= 1  [A("medusa") = ' in out
    assert "2. medusa: 2 check(s), 2 measured on this recording" in out
    assert "6 of 7 checks hold (6 measured on this recording); 0 stop(s) without a check; 0 problem(s)" in out
    verdicts = {s.id: check(read(path), s) for s in lesson.stops}
    assert all(v.holds for v in verdicts["medusa"]) and verdicts["wrong"][0].sentence().startswith("On this run: ")


def test_a_pack_holds_one_setting_per_method_and_prompt():
    eagle = {"id": "e", "title": "E", "page": "eagle", "figure": "eagle_growth", "narration": "One. Two."}
    two = [eagle | {"settings": {"eagle.depth": 2}}, eagle | {"id": "f", "settings": {"eagle.depth": 3}}]
    with pytest.raises(LessonError, match="runs eagle with other settings than stop 'e' on the same prompt"):
        plan(parse_lesson({"stop": two}))


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("__import__('os')", "names '__import__'"),
        ("speedup('pld').real > 1", "uses Attribute"),
        ("[1][0] > 0", "uses Subscript"),
        ("2 ** 999999 > 1", "uses Pow"),
        ("(lambda: 1)() > 0", "calls a function by name"),
        ("speedup(name='pld') > 1", "plain arguments only"),
        ("speedup('pld') >", "is not an expression"),
    ],
)
def test_a_check_outside_the_language_is_refused(text, says):
    with pytest.raises(claims.ClaimError, match=says.replace("(", r"\(")):
        claims.parse(text, claims.FUNCTIONS)


def test_a_check_reads_its_figures():
    fns = {"speedup": {"pld": 2.5, "eagle": 1.2}.__getitem__, "accepted": lambda s: s}
    v = claims.evaluate("speedup('pld') > 2 * speedup('eagle') and accepted(step) >= 1", fns, 3)
    assert v.holds and dict(v.figures) == {"speedup('pld')": 2.5, "speedup('eagle')": 1.2, "accepted(step)": 3}
    assert claims.evaluate("accepted(step) >= 1", fns).holds is None  # a stop that shows no step
    assert claims.evaluate("speedup('pld')", fns).error == "a check must compare, not give a number"
    assert claims.evaluate("speedup('nope') > 1", fns).holds is None


def test_the_app_replays_a_pack_with_no_model(packed, monkeypatch, app_lm, app_cache):
    from streamlit.testing.v1 import AppTest

    import ui.lesson_pack
    import ui.resources as resources
    from specviz.output.lesson.model import ENV
    from tests.apptest import APP, chart_specs

    lesson, path = packed
    monkeypatch.setenv(ENV, lesson.source)
    monkeypatch.setattr(ui.lesson_pack, "PACK_FILE", path)
    loads: list[str] = []
    monkeypatch.setenv("SPECVIZ_CACHE", str(app_cache))
    monkeypatch.setattr(resources, "load_model", lambda spec="default", **_k: loads.append(spec) or app_lm)
    resources.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["lesson"], at.query_params["pack"] = "1", ""
    at.run()
    assert not at.exception and not at.error, [e.value for e in at.exception]
    assert at.session_state["sidebar.present"], "the lesson opens in presentation mode"
    decks = [b.proto.label for b in at.get("download_button")]
    assert any(label.startswith("Slide deck of the lesson (5 slides") for label in decks), decks
    assert any(c.value.startswith("Recorded on ") and "interleaved runs each" in c.value for c in at.caption)
    assert any(m.value.startswith("Plain decoding: A 1.00, ") and "(3 runs)" in m.value for m in at.markdown)
    lanes = [d.get("name", "") for d in chart_specs(at)[0]["data"]]
    assert not any(n.startswith("ar ") for n in lanes), "display names, not ids"
    assert len(chart_specs(at)) == 1 and not at.title, "a recorded stop is its slide: no page below unless asked"
    at.toggle(key="lesson.page_below").set_value(True)
    at.button(key="lesson_next").click().run()  # Medusa's page, drawn from the recording's runs
    assert not at.exception and not at.error
    assert at.title and len(chart_specs(at)) > 1, "its page below, asked for, runs under the slide"
    group = next(iter(read(path).groups.values()))
    said = f"{group.numbers('medusa')['speedup'].median:.2f}×"
    assert any(m.value == said for m in at.metric), "the page's median is the banner's"
    assert any(said in m.value for m in at.markdown) and not loads, "no model for a recorded stop"
    from specviz.output.lesson.facts import shown_step

    drafted = [x for x in group.median("medusa").steps if x.detail is not None]
    shown = drafted.index(shown_step(lesson.stops[1], group))
    assert len(drafted) < 2 or at.slider(key="medusa.step").value == shown, "the page opens on the stop's step"
    at.session_state["medusa.repeats"] = 1  # one live run is enough to show the label (the app's default is 3)
    at.button(key="lesson.measure").click().run()  # live again, labelled live
    assert any(c.value.startswith("**Live**") for c in at.caption) and loads
    resources.clear()


def test_the_deck_is_written_from_the_recording(packed, tmp_path, monkeypatch, capsys):
    import specviz.__main__ as cli
    import specviz.output.lesson.cli as lesson_cli
    from specviz.output import deck
    from tests.output.test_deck import fake_png
    from tests.output.test_lesson import read_back

    lesson, path = packed
    monkeypatch.setattr(deck, "render_png", fake_png)
    monkeypatch.setattr(lesson_cli, "PACK_FILE", path)
    monkeypatch.setattr(cli, "_load", lambda a: pytest.fail("a recorded deck loads no model"))
    out = tmp_path / "deck.pptx"
    assert main(["export", "--lesson", str(out), "--lesson-file", lesson.source]) == 0
    assert capsys.readouterr().out.strip().endswith(f"recorded) to {out}")
    slides = read_back(out.read_bytes())
    assert len(slides) == len(lesson.stops) and all(s["pictures"] == 1 for s in slides)
    notes = {s.id: back["notes"] for s, back in zip(lesson.stops, slides)}
    assert notes["serial"].splitlines()[1].startswith("Recorded on ") and "Plain decoding: A 1.00" in notes["serial"]
    assert 'Check: FAILS     measured    r("pld") < 0' in notes["wrong"]
    assert "From a stored measurement" in notes["lineage"]


def test_the_shipped_recording_holds_every_check_with_one_number_per_method():
    from specviz.output.lesson.facts import STEP_FIGURES
    from specviz.output.lesson.model import LESSON_FILE
    from specviz.output.lesson.pack import PACK_FILE

    lesson, pack = load_lesson(LESSON_FILE), read(PACK_FILE)
    assert pack.settings["repeats"] >= 3 and pack.provenance.load >= 0, "the load is noted"
    said: dict[str, set[str]] = {}
    for s in lesson.stops:
        verdicts = check(pack, s)
        assert verdicts and all(v.holds for v in verdicts), [v.line() for v in verdicts]
        declared = verdicts[: len(s.checks)]  # then the narration as recorded against as told now (lesson.told)
        assert [c.kind for c in s.checks] == [v.kind for v in declared], (s.id, "each declares what it reads")
        if s.figure in STEP_FIGURES:  # a method stop's claims are measured on the recording's runs
            assert any(v.kind == "measured" for v in verdicts), s.id
        group = pack.group(s)
        for line in numbers(s, group) if group else []:
            said.setdefault(line.split(":")[0], set()).add(line)
    assert len(said) >= 5 and all(len(lines) == 1 for lines in said.values()), said


@pytest.mark.full  # two more app runs
@pytest.mark.parametrize(("name", "warns"), [("other", False), ("../pack", True)])
def test_the_address_names_a_recording_beside_the_shipped_one(
    packed, monkeypatch, tmp_path, app_lm, app_cache, name, warns
):
    import shutil

    from streamlit.testing.v1 import AppTest

    import ui.lesson_pack
    import ui.resources as resources
    from specviz.output.lesson.model import ENV
    from tests.apptest import APP

    lesson, path = packed
    shutil.copy(path, tmp_path / "other.json")
    monkeypatch.setenv(ENV, lesson.source)
    monkeypatch.setenv("SPECVIZ_CACHE", str(app_cache))
    monkeypatch.setattr(ui.lesson_pack, "PACK_FILE", tmp_path / "pack.json")  # absent: only the named one
    loads: list[str] = []
    monkeypatch.setattr(resources, "load_model", lambda spec="default", **_k: loads.append(spec) or app_lm)
    resources.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["pack"] = name  # ?pack alone starts the lesson
    at.run()
    assert not at.exception and at.session_state["lesson.on"] and bool(loads) == warns
    assert any("interleaved runs each" in c.value for c in at.caption) != warns
    assert any("No recording '../pack' here" in w.value for w in at.warning) == warns


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"format": "specviz-lesson-pack/1"},
        {"format": "specviz-lesson-pack/1", "groups": [1], "stops": {}, "provenance": {}, "load_after": 0},
        {"format": "specviz-lesson-pack/1", "groups": [], "stops": [], "provenance": "x", "load_after": "y"},
    ],
)
def test_a_pack_that_cannot_be_used_is_one_sentence(data, tmp_path):
    from specviz.output.lesson.pack import from_dict

    with pytest.raises(LessonError) as err:
        from_dict(data, "upload.json")
    assert "upload.json" in str(err.value) and "\n" not in str(err.value)
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(LessonError, match=r"deep\.json is not valid JSON"):
        read(deep)
