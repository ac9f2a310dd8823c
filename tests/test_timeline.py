"""The timeline's race: every lane pays the same warm-up, and the race is drawn finished on arrival."""

from __future__ import annotations

import time

from specviz import methods
from specviz.core.prompts import prepare
from specviz.core.sampling import Sampling
from specviz.output.viz.timeline import timeline_animation
from specviz.tuning.compare import race
from tests.apptest import app_on, chart_specs, titled
from tests.conftest import make_tiny

PROMPT = "Name three rivers in Europe and one fact about each."
COLD_S = 0.3  # what the first forward of a cold process costs on top, here made explicit and large
NOISE_S = 0.15  # a tiny model's prefill is milliseconds; this leaves room for a loaded 2-core machine


def cold_model(tokenizer):
    """A fresh tiny model whose first forward is COLD_S slower, as a cold process's first prefill is."""
    lm = make_tiny(tokenizer, seed=3)
    forward, calls = lm.forward, []

    def first_is_cold(*args, **kwargs):
        if not calls:
            time.sleep(COLD_S)
        calls.append(1)
        return forward(*args, **kwargs)

    lm.forward = first_is_cold  # type: ignore[method-assign]
    return lm


def test_a_cold_start_biases_the_first_lane_when_nothing_warms_it(tokenizer):
    """The control: lanes run one after another, unwarmed, and plain decoding (first) pays the cold start."""
    lm = cold_model(tokenizer)
    ids, s = prepare(lm, PROMPT), Sampling(max_new_tokens=8)
    ar, pld = (methods.get(n).generate(lm, ids, s, None, prompt=PROMPT) for n in ("ar", "pld"))
    assert ar.prefill_s > pld.prefill_s + COLD_S - NOISE_S


def test_the_race_holds_plain_decodings_prefill_to_the_others(tokenizer):
    lm = cold_model(tokenizer)
    ids, s = prepare(lm, PROMPT), Sampling(max_new_tokens=8)
    lanes = race(lm, ids, {"pld": None, "lookahead": None}, s, prompt=PROMPT)
    assert [t.method for t in lanes] == ["ar", "pld", "lookahead"]
    assert all(t.new_tokens == 8 for t in lanes)  # the timed runs are whole, not the warm-up's few tokens
    others = [t.prefill_s for t in lanes[1:]]
    assert lanes[0].prefill_s < max(others) + NOISE_S, [t.prefill_s for t in lanes]


def test_the_race_is_drawn_finished_and_replays_from_the_start(tiny_lm):
    ids, s = prepare(tiny_lm, PROMPT), Sampling(max_new_tokens=6)
    lanes = race(tiny_lm, ids, {"pld": None}, s, prompt=PROMPT)
    fig = timeline_animation(lanes)
    spec = fig.to_dict()
    drawn = sum(len(b.get("x", ())) for b in spec["data"])
    bars = [1 + len(t.steps) + sum((x.propose_s > 0) + (x.accept_s > 0) for x in t.steps) for t in lanes]
    assert drawn == sum(bars)  # every bar
    first = spec["frames"][0]["data"]
    assert sum(len(b.get("x", ())) for b in first) < drawn  # ▶ replays from t ≈ 0
    assert spec["layout"]["sliders"][0]["active"] == len(spec["frames"]) - 1  # the slider sits at the finish


def test_the_timeline_page_shows_the_finished_race_on_arrival(tiny_app):
    at = app_on("views/timeline.py", max_new_tokens=8)
    assert not at.exception
    spec = titled(chart_specs(at), "race")
    assert sum(len(d.get("x", ())) for d in spec["data"]) > 0, "the race chart is empty on arrival"
