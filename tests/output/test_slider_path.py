"""The slider's short path (DESIGN.md, "From a slider to the verify step"): a method page's module only declares,
its Configs built in pages/page.py from its Controls alone, and a Config with nothing to measure of the device
(EAGLE's with its shape given) starts its runs without going through the probe or the fit, while prompt lookup's
still gets its curve and a shape left unset gets the fit's."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

import pytest

from specviz.core.drafting import VerifyLatency
from specviz.methods import eagle, pld
from specviz.methods.base import unmeasured
from specviz.output.pages import eagle as eagle_page
from specviz.tuning import compare, fit, probe

PAGE = eagle_page.PAGE
CURVE = VerifyLatency((1, 4), (30.0, 33.0))
NO_LM: Any = None  # the probe and the runs are stubbed: no model runs


def test_the_eagle_page_declares_and_page_py_builds():
    assert PAGE.runs is None and not callable(getattr(eagle_page, "runs", None))  # no rule of its own
    for c in PAGE.controls:  # every Config field a control sets reaches the Config, through Page.configs only
        if c.field and c.kind == "int":
            value = int(c.low) + 1 if c.field != "min_tokens" else 3
            cfgs, _ = PAGE.configs({"eagle.total_tokens": 8, c.key: value})
            assert getattr(cfgs["eagle"], c.field) == value, c.key


def test_the_budget_floor_is_fitted_by_the_config():
    cfgs, t = PAGE.configs({"eagle.total_tokens": 5, "eagle.min_tokens": 12, "eagle.temperature": 0.4})
    assert (cfgs["eagle"].total_tokens, cfgs["eagle"].min_tokens, t) == (5, 5, 0.4)
    assert PAGE.configs({"eagle.min_tokens": 1})[0]["eagle"].min_tokens == 2
    assert PAGE.configs({"eagle.min_tokens": 4, "eagle.tree": "static"})[0]["eagle"].min_tokens == 0


def test_methods_beside_run_by_their_toggle_or_when_shown():
    assert set(PAGE.configs({})[0]) == {"eagle"}
    assert set(PAGE.configs({"eagle.eagle3": True})[0]) == {"eagle", "eagle3"}
    assert set(PAGE.configs({}, shows=("hybrid",))[0]) == {"eagle", "hybrid"}
    assert set(PAGE.configs({}, "hybrid_origins")[0]) == {"eagle", "hybrid"}


def test_a_config_with_nothing_to_measure_never_enters_the_probe(monkeypatch):
    def refuse(_lm, cfg):
        raise AssertionError(f"{type(cfg).__module__} went through the probe")

    monkeypatch.setattr(fit, "measured", refuse)
    cfg = eagle.Config(depth=2, top_k=4, total_tokens=9)  # every field the fit chooses given: nothing to fit
    assert unmeasured(cfg) == [] and unmeasured(None) == []
    assert compare.steered(NO_LM, cfg) is cfg
    seen = []
    monkeypatch.setattr(compare, "run_once", lambda _lm, name, _ids, _s, config=None, prompt="": seen.append(config))
    locked = SimpleNamespace(lock=threading.Lock())  # only its lock is read (its line of jobs: tuning.turns)
    compare.interleaved_runs(locked, [1], {"eagle": cfg}, NO_LM, repeats=1, warmup=False)
    assert seen == [None, cfg] and seen[1] is cfg


def test_prompt_lookup_still_gets_this_devices_verify_cost(monkeypatch):
    monkeypatch.setattr(probe, "verify_cost", lambda _lm: CURVE)
    assert unmeasured(pld.Config()) == ["latency"]
    assert compare.steered(NO_LM, pld.Config()).latency == CURVE
    fixed = pld.Config(adaptive=False)
    assert compare.steered(NO_LM, fixed) is fixed  # a fixed draft steers by nothing: nothing to measure


@pytest.mark.parametrize("name", ["eagle", "pld"])
def test_prepare_fills_the_curve_and_the_fitted_shape(monkeypatch, name):
    monkeypatch.setattr(probe, "verify_cost", lambda _lm: CURVE)
    monkeypatch.setattr(fit, "fitted_fields", lambda _lm, _m: {"depth": 3, "top_k": 5, "total_tokens": 7})
    cfg = fit.prepare(NO_LM, {}, [name])[name]
    assert getattr(cfg, "latency", CURVE) == CURVE
    if name == "eagle":  # the shape the fit chose; a field given keeps its value
        assert (cfg.depth, cfg.top_k, cfg.total_tokens) == (3, 5, 7)
        given = fit.prepare(NO_LM, {"eagle": eagle.Config(total_tokens=4)})["eagle"]
        assert (given.depth, given.top_k, given.total_tokens) == (3, 5, 4)


def test_the_head_module_sees_the_heads_folder_and_dtype_not_the_config(tiny_lm, monkeypatch):
    from specviz.core.sampling import Sampling

    calls = []
    for name in ("head_for", "drafter"):  # where EAGLE-2's begin builds its proposer
        real = getattr(eagle, name)
        monkeypatch.setattr(eagle, name, lambda *a, _real=real: calls.append(a) or _real(*a))
    res = eagle.tiny_resources(tiny_lm)
    trace = eagle.generate(tiny_lm, [5, 6, 7], Sampling(max_new_tokens=3), res["config"], head=res["head"])
    assert trace.steps and len(calls) == 2
    assert not any(isinstance(x, eagle.Config) for a in calls for x in a)  # only cfg.head and cfg.head_dtype
