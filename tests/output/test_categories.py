"""The 'where each method wins' figure on plain bench data, and the stored measurement it is drawn from."""

from __future__ import annotations

import math

import pytest

from specviz.core.measure import Provenance
from specviz.core.paths import PROMPT_KINDS_BENCH
from specviz.core.prompts import prompt_kinds
from specviz.output.viz.categories import method_order, winners, wins_figure
from specviz.output.viz.stored import category_bench, category_labels, kind_of

BENCH = {
    "max_new_tokens": 64,
    "temperature": 0.0,
    "prompts": 4,
    "repeats": 1,
    "methods": {"ar": {"speedup": 1.0}, "pld": {"speedup": 1.3}, "eagle": {"speedup": 1.4}},
    "categories": {
        "code": {"ar": 1.0, "pld": 1.6, "eagle": 1.2},
        "chat": {"ar": 1.0, "pld": 0.9, "eagle": 1.25},
    },
}


def test_winners_and_order():
    assert method_order(BENCH) == ["eagle", "pld"]  # fastest overall first, plain decoding left out
    assert winners(BENCH) == {"code": ("pld", 1.6), "chat": ("eagle", 1.25)}


def test_heatmap_marks_each_kinds_winner():
    fig = wins_figure(
        BENCH,
        where="measured on the computer running specviz, AMD EPYC, on 2026-12-01",
        labels={"chat": "Chat", "code": "Code"},
    )
    hm = fig.data[0]
    assert list(hm.y) == ["Chat", "Code"] and list(hm.x) == ["eagle", "pld"]  # the labels' order
    assert [list(r) for r in hm.text] == [["★ 1.25×", "0.90×"], ["1.20×", "★ 1.60×"]]
    assert hm.zmid == 0.0 and hm.z[1][1] == pytest.approx(math.log2(1.6))  # colour is log2(speedup)
    assert "the computer running specviz" in fig.layout.title.text and "64 new tokens" in fig.layout.title.text


def test_stored_category_bench_has_provenance_and_a_hint_per_category():
    """The Compare tab draws the prompt kinds' bench when stored, else the newest Spec-Bench result."""
    found = category_bench()
    if found is None:
        pytest.skip("no stored bench result with categories")
    path, data = found
    Provenance.from_dict(data["provenance"])  # where and when it was measured
    kinds = list(prompt_kinds())
    assert all(kind_of(c, kinds) for c in data["categories"])  # each category has a kind, so a hint
    if path == PROMPT_KINDS_BENCH:
        assert set(data["categories"]) == set(kinds)  # every shipped kind was measured
    labels = category_labels(data, {k: k.title() for k in kinds})
    assert set(labels) == set(data["categories"])
    assert data["temperature"] == 0 and all(m["identical"] == m["total"] for m in data["methods"].values())
