"""What a first visit shows with default settings: Lookahead's 2-D window and a step with both branches at work,
every step in the tokens-per-step chart with the current one marked, and Compare's fastest methods toggled on."""

from __future__ import annotations

import pytest

from specviz.core.details import LookaheadDetail
from specviz.core.sampling import Sampling
from specviz.methods import ar
from specviz.methods import lookahead as la
from specviz.output.focus import telling
from specviz.output.viz.steps import steps_figure
from specviz.trees.ngram_pool import NgramPool
from specviz.tuning import presets
from tests.apptest import app_on, chart_specs, titled


def test_the_telling_step_has_both_branches_at_work(tiny_lm):
    """A pool seeded with the true continuation: step 0 verifies it but its window has harvested nothing yet."""
    cfg = la.Config(window=3, ngram=3, guesses=2)
    ids, s = tiny_lm.encode_prompt("Hello there"), Sampling(max_new_tokens=16)
    pool = NgramPool(cfg.ngram, cfg.guesses)
    pool.seed(ar.generate(tiny_lm, ids, s).output_ids)
    trace = la.finish(*la.start(tiny_lm, ids, s, cfg, pool=pool))
    first = trace.steps[0].detail
    assert isinstance(first, LookaheadDetail) and not first.harvested  # the empty step the page opened on
    shown = telling(trace.drafted_steps)[0]  # the page's pool of steps to focus on (pages.page.focus)
    d = shown.detail
    assert shown.index > 0 and isinstance(d, LookaheadDetail) and d.candidates and d.harvested
    unseeded = la.generate(tiny_lm, tiny_lm.encode_prompt("Count to five"), s, cfg)  # no pooled n-gram matches
    d = telling(unseeded.drafted_steps)[0].detail
    assert isinstance(d, LookaheadDetail) and d.harvested  # at least the window's harvest


def test_the_steps_chart_shows_every_step_and_marks_the_current(tiny_lm):
    ids, s = tiny_lm.encode_prompt("Count to five"), Sampling(max_new_tokens=12)
    trace = la.generate(tiny_lm, ids, s, la.Config(window=3, ngram=3, guesses=2))
    spec = steps_figure(trace, ar.generate(tiny_lm, ids, s), current=2).to_dict()
    bars = spec["data"][0]
    assert list(bars["x"]) == [x.index for x in trace.steps]  # all of them, not the steps up to the slider
    assert [o == 1.0 for o in bars["marker"]["opacity"]] == [x.index == 2 for x in trace.steps]
    assert any(a["text"] == "step 2" for a in spec["layout"]["annotations"])


@pytest.mark.full  # a second AppTest of a page the fast tier opens (tests/ui/test_pages_fast.py): the full tier
def test_lookahead_opens_on_a_two_level_window_at_a_telling_step(tiny_app):
    at = app_on("views/lookahead.py", max_new_tokens=10)
    assert not at.exception and not at.error
    start = presets.start("lookahead").config
    assert start.ngram >= 3 and at.slider(key="lookahead.ngram").value == start.ngram
    assert at.radio(key="lookahead.preset").value == presets.WINDOW
    window = titled(chart_specs(at), "Jacobi window")
    levels = {y for d in window["data"] if d.get("mode") == "markers+text" for y in d["y"]}
    assert {"level 0", "level 1", "new (this pass)"} <= levels, levels
    steps = titled(chart_specs(at), "Tokens per step")
    shown = int(at.slider(key="lookahead.step").value)  # type: ignore[arg-type]
    assert len(steps["data"][0]["x"]) > 1 + shown  # every step, not the steps up to the slider


@pytest.mark.full  # a second AppTest of a page the fast tier opens (tests/ui/test_pages_fast.py): the full tier
def test_lookahead_moves_to_a_telling_step_when_the_run_changes(tiny_app):
    at = app_on("views/lookahead.py", max_new_tokens=12)
    at.radio(key="lookahead.preset").set_value(presets.PAPER).run()  # N 5: the window fills over three steps
    assert not at.exception and not at.error
    window = titled(chart_specs(at), "Jacobi window")
    levels = {y for d in window["data"] if d.get("mode") == "markers+text" for y in d["y"]}
    assert "level 3" in levels, levels  # the full four-level window, not step 0's one level
