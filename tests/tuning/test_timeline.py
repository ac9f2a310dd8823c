"""The timeline's race: every lane pays the same warm-up, and the race is drawn finished on arrival."""

from __future__ import annotations

from specviz.core.prompts import prepare
from specviz.core.sampling import Sampling
from specviz.output.viz.timeline import race_title, timeline_animation
from specviz.tuning import compare
from specviz.tuning.compare import race

PROMPT = "Name three rivers in Europe and one fact about each."


def test_every_lane_is_warmed_up_before_any_timed_run(tiny_lm, monkeypatch):
    """A cold process's first forward is slower (allocation, kernel choice): unwarmed, the first lane (plain
    decoding) paid it in its timed prefill. Every lane runs a short untimed warm-up before the first timed run,
    and the timed runs are whole (checked by the order of the runs, not by the clock)."""
    calls: list[tuple[str, int]] = []
    run_once = compare.run_once

    def spy(lm, name, ids, sampling, *args, **kwargs):
        calls.append((name, sampling.max_new_tokens))
        return run_once(lm, name, ids, sampling, *args, **kwargs)

    monkeypatch.setattr(compare, "run_once", spy)
    ids, s = prepare(tiny_lm, PROMPT), Sampling(max_new_tokens=8)
    lanes = race(tiny_lm, ids, {"pld": None, "lookahead": None}, s, prompt=PROMPT)
    assert [t.method for t in lanes] == ["ar", "pld", "lookahead"]
    assert all(t.new_tokens == 8 for t in lanes)  # the timed runs are whole, not the warm-up's few tokens
    warm = [n for n, k in calls[:3]]
    assert sorted(warm) == ["ar", "lookahead", "pld"] and all(k < 8 for _, k in calls[:3]), calls


def test_the_race_is_drawn_finished_and_replays_from_the_start(tiny_lm):
    ids, s = prepare(tiny_lm, PROMPT), Sampling(max_new_tokens=6)
    lanes = race(tiny_lm, ids, {"pld": None}, s, prompt=PROMPT)
    fig = timeline_animation(lanes)
    spec = fig.to_dict()
    drawn = sum(len(b.get("x", ())) for b in spec["data"] if b["type"] == "bar")  # not the legend's key
    bars = [
        1 + len(t.steps) + sum((x.proposed > 0) * ((x.propose_s > 0) + (x.accept_s > 0)) for x in t.steps)
        for t in lanes
    ]
    assert drawn == sum(bars)  # every bar
    first = spec["frames"][0]["data"]
    keyed = [d["name"] for d in spec["data"] if d["type"] == "scatter"]
    assert keyed[:3] == ["prefill (the prompt)", "ar", "pld"]  # every lane's colour named, whatever a frame drew
    assert sum(len(b.get("x", ())) for b in first) < drawn  # ▶ replays from t ≈ 0
    assert spec["layout"]["sliders"][0]["active"] == len(spec["frames"]) - 1  # the slider sits at the finish
    # whichever lane ends first, the title holds: greedy lanes write one answer
    assert race_title(lanes) == "The same answer, each lane one method" and "sooner" not in race_title(lanes[:1])
