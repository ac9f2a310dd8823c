"""Two lectures, builds and the four questions: the shipped lesson's order and parts, the README's table, the
clicker's walk through builds, the deck's slides (builds consecutive, titles, no text box over another), and the
lesson's arithmetic (why speculative sampling is exact, its cost model, the formulas as plain text)."""

from __future__ import annotations

import io
import itertools
import math
from typing import Any, cast

import pytest
from pptx import Presentation

from specviz.output import deck
from specviz.output.lesson import formulas
from specviz.output.lesson.model import LESSON_FILE, LessonError, load_lesson, parse_lesson
from specviz.output.lesson.parts import QUESTIONS, walk
from tests.output.test_deck import fake_png

METHOD_FIGURES = {"medusa": "medusa_mask", "eagle": "eagle_verify", "lookahead": "lookahead_verify",
                  "sps": "sps_residual"}  # fmt: skip  # the verification each method stop walks to


def test_two_lectures_in_the_order_of_the_story():
    lesson = load_lesson(LESSON_FILE)
    how, when = lesson.lecture("how"), lesson.lecture("when")
    assert len(how.stops) <= 15 and len(when.stops) <= 10  # a lecture of about an hour, at 3-4 minutes a stop
    lectured = [s.id for s in (*how.stops, *when.stops)]
    assert len(set(lectured)) == len(lectured) and set(lectured) <= {s.id for s in lesson.stops}, "each in one"
    rest = [s.id for s in lesson.stops if s.id not in lectured]
    assert rest == ["tree_sampling"], "one stop beyond the lectures: the index's More stops, the deck's last"
    ids = [s.id for s in how.stops]
    assert ids[:3] == ["race", "serial", "flat"], "the race first, then serial decoding and the flat curve"
    flat = lesson.stops[lesson.index("flat")].narration
    assert "A be the tokens" in flat and "\\frac{A}{r}" in flat, "A and r defined where the cost curve is"
    assert ids.index("typical") < ids.index("lossless"), "typical acceptance before the lab that judges it"
    eagle = lesson.stops[lesson.index("eagle")]
    frames = [eagle.at(b).figure for b in range(eagle.frames)]
    assert frames.index("eagle_features") < frames.index("eagle_growth"), "EAGLE's why before its how"
    in_file = [s.id for s in lesson.stops if s.id in lectured]
    assert in_file == ids + [s.id for s in when.stops], "the file's order is the lectures'"
    with pytest.raises(LessonError, match="no lecture 'why'"):
        lesson.lecture("why")


def test_every_method_stop_answers_the_four_questions_and_shows_its_verification():
    lesson = load_lesson(LESSON_FILE)
    asked = {s.id for s in lesson.stops if s.questions}
    assert {"sps", "pld", "medusa", "hydra", "eagle", "eagle3", "jacobi", "lookahead", "hybrid"} <= asked
    for s in lesson.stops:
        assert not s.questions or [q for q, _ in s.questions] == list(QUESTIONS)
    for sid, figure in METHOD_FIGURES.items():
        stop = lesson.stops[lesson.index(sid)]
        assert figure in [stop.at(b).figure for b in range(stop.frames)], sid


def test_the_readme_table_is_the_one_the_lesson_file_writes():
    from specviz.output.lesson.readme import block, current

    assert current() == block(load_lesson(LESSON_FILE)), "run: python -m specviz lesson readme"


def test_the_readme_tells_the_shipped_recording_as_its_pack_does():
    from specviz.output.lesson.pack import PACK_FILE, read
    from specviz.output.lesson.readme import RECORDING, current, recording

    pack = read(PACK_FILE)
    told = current(markers=RECORDING) or ""
    assert told == recording(pack), "run: python -m specviz lesson readme"
    assert pack.provenance.date[:10] in told and pack.provenance.cpu in told and f"{pack.load_after:.1f}" in told


def test_the_clicker_walks_builds_then_stops():
    counts = [1, 3, 2]
    at, seen = (0, 0), [(0, 0)]
    for _ in range(6):
        at = walk(counts, at, 1)
        seen.append(at)
    assert seen == [(0, 0), (1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 1)], "on, through builds, stays at the end"
    assert walk(counts, (2, 0), -1) == (1, 2) and walk(counts, (0, 0), -1) == (0, 0), "back to the last build"


STOP = {"id": "s", "title": "T", "page": "medusa", "figure": "medusa_tree", "narration": "One. Two."}


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        ({"builds": [{"figure": "eagle_growth"}]}, "a build is"),
        ({"questions": {"drafts": "x"}}, "must answer all four"),
        ({"lecture": [{"id": "a", "title": "A", "stops": ["nope"]}]}, "must list stop ids"),
        (
            {"lecture": [{"id": "a", "title": "A", "stops": ["s"]}, {"id": "b", "title": "B", "stops": ["s"]}]},
            "already",
        ),
    ],
)
def test_a_bad_part_is_one_sentence(extra, says):
    top = {k: v for k, v in extra.items() if k == "lecture"}
    stop = STOP | {k: v for k, v in extra.items() if k != "lecture"}
    with pytest.raises(LessonError, match=says) as exc:
        parse_lesson({"stop": [stop], **top})
    assert "\n" not in str(exc.value)


def test_a_stop_at_a_build_takes_its_figure_and_title():
    stop = parse_lesson({"stop": [STOP | {"builds": [{"figure": "medusa_mask", "title": "The mask"}]}]}).stops[0]
    assert stop.frames == 2 and stop.at(0) is stop
    assert (stop.at(1).figure, stop.at(1).title, stop.at(1).id) == ("medusa_mask", "The mask", "s")


def test_speculative_sampling_gives_p_exactly_on_three_tokens():
    parts = formulas.exact_parts()
    out = [a + r for a, r in zip(parts["accepted"], parts["resampled"], strict=True)]
    assert all(math.isclose(o, p) for o, p in zip(out, parts["p"], strict=True))
    assert max(abs(f - p) for f, p in zip(parts["flawed"], parts["p"], strict=True)) > 0.05, "the flawed rule is off"
    assert math.isclose(sum(parts["flawed"]), 1.0), "it is still a distribution, just not p"


def test_the_cost_model():
    assert formulas.expected_tokens(0.0, 4) == 1.0 and formulas.expected_tokens(1.0, 4) == 5.0
    assert math.isclose(formulas.expected_tokens(0.5, 2), 1.75)
    assert formulas.best(0.05, 0.2) == (0, 1.0), "a poor draft: do not draft at all"
    needed = formulas.alpha_for(1.3, 0.2)
    assert 0 < needed < 1 and formulas.best(needed, 0.2)[1] >= 1.3 > formulas.best(needed - 0.02, 0.2)[1]
    found, meta = formulas.drafts()
    assert {d.name for d in found} == {"trained", "layers"} and meta["provenance"]
    assert all(0 < d.alpha < 1 and 0 < d.c < 1 for d in found)


def test_formulas_read_as_plain_text():
    text = formulas.plain_math(r"gives $$\mathbb{E} = \frac{1-\alpha^{\gamma+1}}{1-\alpha}$$ on average")
    assert text == "gives\n    E = (1-αᵞ⁺¹) / (1-α)\non average"
    assert formulas.plain_math(r"$$\text{speedup} \approx \frac{A}{r}$$") == "speedup ≈ A / r"


def _boxes(data: bytes) -> list[tuple[str, list[tuple[int, int, str]]]]:
    """Per slide: its title and every shape's (top, bottom, kind) in EMU."""
    out = []
    for slide in Presentation(io.BytesIO(data)).slides:
        shapes = [(s.top, s.top + s.height, "text" if s.has_text_frame else "picture") for s in slide.shapes]
        title = next(cast(Any, s).text_frame.text.splitlines()[0] for s in slide.shapes if s.has_text_frame)
        out.append((title, sorted(shapes)))
    return out


@pytest.mark.full  # draws the 22 stops' figures from the shipped recording (about 15 s)
def test_the_deck_writes_both_lectures_builds_as_consecutive_slides(monkeypatch):
    from specviz.output.lesson.deck import pack_slides
    from specviz.output.lesson.pack import read

    lesson = load_lesson(LESSON_FILE)
    monkeypatch.setattr(deck, "render_png", fake_png)
    slides = _boxes(deck.deck_bytes(pack_slides(read(), lesson)))
    titles = [t for t, _ in slides]
    for want in ("tree-attention mask", "Medusa's verification", "EAGLE-2's verification", "Lookahead's verification",
                 "residual", "Why it is exact", "cost model", "Hydra", "EAGLE-3", "KV cache", "GPUs", "When they pay",
                 "How the methods work", "four questions", "What data buys", "fixed tree against EAGLE-2",
                 "Sampling in a tree"):  # fmt: skip
        assert any(want in t for t in titles), want
    sps = titles.index("Speculative sampling: draft, then accept with min(1, p/q)")
    assert "residual" in titles[sps + 1] and "KV cache" in titles[sps + 2], "a build is the next slide"
    for title, shapes in slides:  # every box ends above the next one's top: no text box runs over another
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(shapes)), title


@pytest.mark.full  # the shipped lesson's pages under AppTest, replayed from the shipped recording (~20 s)
def test_the_app_walks_a_stops_builds_and_questions_and_jumps_by_the_index(monkeypatch, app_lm, app_cache):
    from streamlit.testing.v1 import AppTest

    import ui.resources as resources
    from tests.apptest import APP

    loads: list[str] = []
    monkeypatch.setenv("SPECVIZ_CACHE", str(app_cache))
    monkeypatch.setattr(resources, "load_model", lambda spec="default", **_k: loads.append(spec) or app_lm)
    resources.clear()
    at = AppTest.from_file(APP, default_timeout=300)
    at.query_params["lesson"], at.query_params["pack"] = "sps", ""
    at.run()

    def head() -> str:
        assert not at.exception and not at.error, [e.value for e in (*at.exception, *at.error)]
        return next(m.value for m in at.markdown if m.value.startswith("**Stop "))

    assert head().startswith("**Stop 4 of 26** · 1 of 4 · **Speculative sampling")
    assert any("\n$$\n" in m.value for m in at.markdown), "the formula as display math"
    at.button(key="lesson_next").click().run()
    assert "2 of 4 · **At the rejection" in head()
    at.button(key="lesson_next").click().run().button(key="lesson_next").click().run()
    assert "4 of 4 · **Speculative sampling: the four questions**" in head()
    said = next(m.value for m in at.markdown if m.value.startswith("**Where do the drafts come from?**"))
    assert "Measured (speculative sampling): propose" in said and "drafts accepted" in said
    at.button(key="lesson_next").click().run()
    assert head().startswith("**Stop 5 of 26** · **Why it is exact")
    at.button(key="lesson.index.cost_model").click().run()
    assert head().startswith("**Stop 19 of 26** · 1 of 2 · **The cost model")
    at.slider(key="lesson.alpha").set_value(0.9).run()
    assert any("speculation pays" in m.value for m in at.markdown), "a high α pays in the model"
    at.button(key="lesson.index.gpu").click().run()
    assert head().startswith("**Stop 25 of 26** · 1 of 2 · **GPUs") and not loads, "replayed: no model"


@pytest.mark.full  # reads the shipped recording (about 1 s)
def test_every_click_of_the_shipped_lesson_holds_its_checks():
    """A build reads the stop's own checks: no click of the lesson says 'On this run: … does not hold'."""
    from specviz.output.lesson.facts import check
    from specviz.output.lesson.pack import read

    lesson, pack = load_lesson(LESSON_FILE), read()
    for s in lesson.stops:
        for b in range(s.frames):
            assert all(v.holds for v in check(pack, s.at(b))), (s.id, b, [v.line() for v in check(pack, s.at(b))])


def test_a_stop_in_no_lecture_still_gets_its_slide(monkeypatch):
    from specviz.output.lesson import slides as lesson_slides

    lesson = parse_lesson(
        {
            "lecture": [{"id": "a", "title": "A", "stops": ["s"]}],
            "stop": [STOP, STOP | {"id": "t", "title": "Outside"}],
        }
    )
    monkeypatch.setattr(lesson_slides, "stop_slides", lambda pack, lesson, stop, k: [stop.title])
    assert lesson_slides.pack_slides(None, lesson)[1:] == ["T", "Outside"]  # type: ignore[arg-type]
    assert lesson_slides.pack_slides(None, lesson, "a")[1:] == ["T"]  # type: ignore[arg-type]
