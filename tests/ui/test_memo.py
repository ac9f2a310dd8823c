"""Figures built once for a class (ui.memo): the same inputs give the kept figure, another input object of equal
value builds anew, the oldest entries go first, and a variant is kept only beside a kept figure."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from ui import memo


@pytest.fixture(autouse=True)
def empty():
    memo.clear()
    yield
    memo.clear()


def test_the_same_inputs_build_once_and_an_equal_new_input_builds_again():
    built: list[int] = []
    runs = [[1, 2], [3]]

    def build() -> list[int]:
        built.append(1)
        return [len(built)]

    first = memo.shared(("page", "x"), runs, build)
    assert memo.shared(("page", "x"), runs, build) is first and len(built) == 1
    again = memo.shared(("page", "x"), [[1, 2], [3]], build)  # equal lists, other objects: a new recording
    assert again is not first and len(built) == 2
    assert memo.shared(("page", "x"), runs[:1], build) is not again  # fewer inputs: not the same figure


def test_the_oldest_entries_go_first_and_a_failed_build_keeps_nothing(monkeypatch):
    monkeypatch.setattr(memo, "SIZE", 2)
    keep = object()
    a = memo.shared("a", [keep], lambda: ["a"])
    memo.shared("b", [keep], lambda: ["b"])
    assert memo.shared("a", [keep], lambda: ["a2"]) is a  # used again: now the newest
    memo.shared("c", [keep], lambda: ["c"])  # "b" leaves, not "a"
    assert memo.shared("a", [keep], lambda: ["a3"]) is a
    assert memo.shared("b", [keep], lambda: ["b2"]) == ["b2"]

    def fails() -> list[str]:
        raise ValueError("a visitor's recording")

    with pytest.raises(ValueError):
        memo.shared("d", [keep], fails)
    assert memo.shared("d", [keep], lambda: ["d"]) == ["d"]


def test_a_variant_is_kept_beside_a_kept_figure_only_and_never_changes_it():
    fig = memo.shared("f", [], lambda: go.Figure(go.Bar(y=[1, 2]), layout={"font": {"size": 13}}))
    made: list[int] = []

    def big(f: go.Figure) -> go.Figure:
        made.append(1)
        return memo.private(f).update_layout(font={"size": 22})

    shown = memo.variant(fig, "big", big)
    assert memo.variant(fig, "big", big) is shown and len(made) == 1
    assert shown.layout.font.size == 22 and fig.layout.font.size == 13  # the shared figure unchanged
    fresh = go.Figure(go.Bar(y=[3]))
    assert memo.variant(fresh, "big", big) is not memo.variant(fresh, "big", big)  # not kept: made each time
