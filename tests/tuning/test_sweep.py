"""Tuning sweeps: settings timed against plain decoding, interleaved; the rows the pages draw."""

from __future__ import annotations

import json

from specviz.methods import ar, lookahead, sps
from specviz.output.viz.lookahead import sweep_figure
from specviz.tuning import draft_sweep, sweep


def test_interleaved_counts_identity_and_accepted_length(tiny_lm):
    calls = []

    def gen(lm, ids, s, cfg):
        calls.append(cfg)
        return lookahead.generate(lm, ids, s, cfg)

    cfgs = [lookahead.Config(window=1, ngram=2, guesses=2), lookahead.Config(window=3, ngram=2, guesses=2)]
    measured, plain = sweep.interleaved(
        tiny_lm, ["Say hi.", "Count to five."], cfgs, gen, max_new_tokens=6, repeats=2, progress=lambda _m: None
    )
    assert calls == cfgs * 4  # 2 repeats x 2 prompts, every setting after its plain run
    assert len(plain) == 2 and all(len(m.traces) == 2 for m in measured)
    for m in measured:
        assert m.identical == 2 and m.speedup > 0
        forwards = [s for t in m.traces for s in t.steps if s.forward_tokens]  # measure's A
        assert round(sum(len(s.committed) for s in forwards) / len(forwards), 4) == m.A


def test_interleaved_reports_a_setting_that_changes_the_output(tiny_lm):
    """A 'method' that decodes fewer tokens than plain decoding is counted as not identical."""
    from dataclasses import replace

    def short(lm, ids, s, _cfg):
        return ar.generate(lm, ids, replace(s, max_new_tokens=2))

    measured, _ = sweep.interleaved(tiny_lm, ["Say hi."], [None], short, max_new_tokens=6, progress=lambda _m: None)
    assert measured[0].identical == 0 and measured[0].A == 1.0  # plain decoding, cut short: still 1 per forward


def test_lookahead_sweep_rows_feed_its_figure(tiny_lm):
    out = sweep.measure_lookahead(
        tiny_lm, ["Say hi."], windows=(1, 2), shapes=((2, 2),), max_new_tokens=6, progress=lambda _m: None
    )
    assert [r["window"] for r in out["rows"]] == [1, 2] and all(r["identical"] == 1 for r in out["rows"])
    assert {"command", "device", "threads", "prompts", "best", "chosen"} <= set(out)
    fig = sweep_figure(out)
    assert list(fig.data[0].x) == [1, 2]


def test_the_draft_sweep_measures_every_gamma_and_the_untrained_prefix(tiny_lm, monkeypatch):
    """`calibrate draft`'s rows: one per γ for the trained draft (here a copy of the tiny target's first two layers
    over its whole vocabulary), the untrained prefix beside them, greedy-identical, with the share of drafts kept."""

    import torch

    from specviz.heads import draft as draft_head
    from specviz.methods import sps

    model = draft_head.from_target(tiny_lm, [0, 1], torch.arange(tiny_lm.hf.config.vocab_size)).to(tiny_lm.dtype)
    monkeypatch.setattr(sps, "cached_draft", lambda _lm: model)
    res = draft_sweep.measure_sps(tiny_lm, ["Say hi.", "Count."], (1, 3), "0", 8, 1, lambda _m: None)
    json.dumps(res, allow_nan=False)
    assert [(r["draft"], r["gamma"]) for r in res["rows"]] == [("trained", 1), ("trained", 3), ("layers", 3)]
    assert all(r["identical"] == 2 and 0.0 <= r["accept_rate"] <= 1.0 for r in res["rows"])
    assert res["best"]["draft"] == "trained" and res["provenance"] and res["prompts"] == ["Say hi.", "Count."]


def test_sweep_prompts_are_held_out_and_past_the_curves(monkeypatch):
    from specviz.tuning import draft_sweep as module

    monkeypatch.setattr(module, "heldout_prompts", lambda n: [f"held {i}" for i in range(n)])
    assert module.sweep_prompts(3) == ["held 64", "held 65", "held 66"]


def test_swept_gamma_reads_the_sweeps_best_and_refuses_what_it_cannot_use(tmp_path):
    path = tmp_path / "gamma_sweep.json"
    assert sps.swept_gamma(path) is None  # no sweep
    path.write_text(json.dumps({"best": {"draft": "trained", "gamma": 2}}))
    assert sps.swept_gamma(path) == 2
    for bad in ("{", json.dumps({"best": {"gamma": 99}}), json.dumps({"best": {"gamma": "3"}}), "[]"):
        path.write_text(bad)
        assert sps.swept_gamma(path) is None, bad
