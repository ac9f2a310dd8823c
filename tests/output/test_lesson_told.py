"""A narration told from its data (lesson.told): numbers filled and formatted, a sentence chosen per outcome, what a
pack stored compared with what its data tells now, and a narration that cannot be read refused in one sentence."""

from __future__ import annotations

import pytest

from specviz.output.lesson import claims, told
from specviz.output.lesson.model import LessonError, parse_lesson

TEXT = (
    'EAGLE-2 ran {{ speedup("eagle") | .2f }}× plain decoding; it {{? speedup("eagle") > 1 }}wins here, A '
    '{{ A("eagle") }}{{:}}loses here{{/}}. $$\\frac{A}{r}$$ stays.'
)


def fns(speedup: float) -> dict:
    return {"speedup": lambda name: speedup, "A": lambda name: 2.5}


def test_numbers_are_filled_and_the_sentence_is_chosen_by_the_data():
    parts = told.parse(TEXT)
    won = told.tell(parts, fns(1.234))
    assert won.text == "EAGLE-2 ran 1.23× plain decoding; it wins here, A 2.50. $$\\frac{A}{r}$$ stays."
    assert won.numbers == ("1.23", "2.50") and won.choices == (True,)
    lost = told.tell(parts, fns(0.871))
    assert lost.text == "EAGLE-2 ran 0.87× plain decoding; it loses here. $$\\frac{A}{r}$$ stays."
    assert lost.numbers == ("0.87",) and lost.choices == (False,)
    assert told.skeleton(parts) == "EAGLE-2 ran …× plain decoding; it …. $$\\frac{A}{r}$$ stays."


def test_what_the_data_cannot_give_is_shown_as_a_dash_and_a_choice_undecided():
    parts = told.parse(TEXT)
    none = told.tell(parts, {"speedup": lambda name: {}["missing"], "A": lambda name: 1.0})
    assert none.numbers == (told.UNREAD,) and none.choices == (None,)
    assert "—" in none.text


def test_a_stored_narration_fails_when_its_data_tells_otherwise():
    parts = told.parse(TEXT)
    recorded = told.tell(parts, fns(1.234)).stored()
    assert all(v.holds for v in told.verdicts(parts, told.tell(parts, fns(1.234)), recorded))
    changed = told.verdicts(parts, told.tell(parts, fns(1.236)), recorded)  # the same choice, another number
    assert [v.holds for v in changed] == [True, False] and "1.23 recorded, 1.24 now" in changed[1].line()
    flipped = told.verdicts(parts, told.tell(parts, fns(0.9)), recorded)
    assert flipped[0].holds is False and flipped[1].holds is False
    assert told.verdicts(parts, told.tell(parts, fns(1.2)), None)[0].holds is None, "a pack without its narration"
    assert told.verdicts(told.parse("No number here."), told.tell(told.parse("No number here."), {}), None) == []


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{{? speedup('x') > 1 }}open", "never closed"),
        ("a {{/}} b", "without the"),
        ("{{? A('x') > 1 }}a{{? A('x') > 2 }}b{{/}}{{/}}", "do not nest"),
        ("{{ unknown(1) }}", "names 'unknown'"),
        ("{{ A('x') | zz }}", "not a number's format"),
        ("{{ __import__('os') }}", "names '__import__'"),
    ],
)
def test_a_narration_that_cannot_be_told_is_refused(text, says):
    with pytest.raises((told.ToldError, claims.ClaimError), match=says):
        told.parse(text)


def test_a_lesson_file_with_a_bad_template_is_refused_in_one_sentence():
    stop = {
        "id": "a",
        "title": "A",
        "page": "home",
        "figure": "latency_curve",
        "narration": "It costs {{ cost(8) | q }}.",
    }
    with pytest.raises(LessonError, match="the narration cannot be told"):
        parse_lesson({"title": "t", "stop": [stop]})
    stop["narration"] = "It costs {{ cost(8) | .2f }} passes."
    lesson = parse_lesson({"title": "t", "stop": [stop]})
    assert lesson.stops[0].tell({"cost": lambda k: 1.5}).text == "It costs 1.50 passes."
    assert lesson.stops[0].sentences[0][1] == (told.HELD,), "a sentence told from the data is held by it"
