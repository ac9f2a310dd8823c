"""The room stays responsive (issue 63): a run asked to stop ends between two steps, a job waiting for the model says
where it stands and leaves the line when asked, and a live run is priced from the device's cost and refused above the
server's bound with a sentence saying what to lower."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest

from specviz import methods
from specviz.core.sampling import Sampling
from specviz.methods import eagle
from specviz.methods.base import Stopped
from specviz.tuning import budget, compare, fit, turns

KS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64]
IDS = [1, 9906, 1528, 253, 2374, 30, 1345]  # a few real-vocabulary ids: nothing to template


def cost(per_token: float = 0.1, base: float = 30.0) -> fit.DeviceCost:
    """A synthetic device: a forward of k tokens costs base·(1 + per_token·(k-1)); EAGLE's steps timed at SAMPLES."""
    ms = [base * (1 + per_token * (k - 1)) for k in KS]
    samples = {
        "eagle": [
            fit.StepSample(
                s, s["total_tokens"], 2.0 * s["depth"], base * (1 + per_token * (s["total_tokens"] - 1)), 1.0
            )
            for s in fit.SAMPLES["eagle"]
        ]
    }
    return fit.DeviceCost("synthetic", KS, ms, base, samples)


# ---- stopping a run --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ar", "pld", "lookahead"])
def test_a_run_asked_to_stop_after_its_first_step_ends_before_the_second(tiny_lm, name):
    asked, steps = threading.Event(), []

    def on_step(step) -> None:
        steps.append(step)
        asked.set()  # from now on the caller wants it stopped

    with pytest.raises(Stopped) as got:
        methods.get(name).generate(tiny_lm, IDS, Sampling(max_new_tokens=24), on_step=on_step, stop=asked.is_set)
    assert len(steps) == 1, len(steps)
    assert got.value.tokens == len(steps[0].committed) and "stopped after" in str(got.value)


def test_a_run_never_asked_runs_to_its_end(tiny_lm):
    trace = methods.get("ar").generate(tiny_lm, IDS, Sampling(max_new_tokens=5), stop=lambda: False)
    assert trace.new_tokens == 5 and trace.stopped in ("length", "eos")


def test_the_runs_of_a_job_ask_the_jobs_stop(tiny_lm):
    """compare.run_once finds the turn its thread holds: a page's Stop reaches every run of its comparison."""
    calls = []

    def stop() -> bool:
        calls.append(1)
        return len(calls) > 2  # before the prefill, before step 1, then stop before step 2

    with pytest.raises(Stopped), turns.turn(tiny_lm, turns.Request("a test", stop=stop)):
        compare.interleaved_runs(tiny_lm, IDS, {}, Sampling(max_new_tokens=8), repeats=1, warmup=False)
    assert len(calls) == 3
    assert turns.of(tiny_lm).held() is None  # the turn was given back


# ---- the line of jobs ------------------------------------------------------------------------------------------


def test_waiting_words():
    assert turns.waiting_words([]) == ""
    assert turns.waiting_words([40.2]) == "waiting for one run, about 40 s"
    assert turns.waiting_words([50.0, 80.0]) == "waiting for 2 runs, about 2 min 10 s"
    assert turns.duration(0.2) == "1 s" and turns.duration(180) == "3 min"


def test_a_waiting_job_hears_its_place_and_leaves_when_asked():
    lm: object = SimpleNamespace(lock=threading.Lock())
    first_in, release, heard, leave = threading.Event(), threading.Event(), [], threading.Event()

    def first() -> None:
        with turns.turn(lm, turns.Request("the first", predicted_s=40.0)):  # type: ignore[arg-type]
            first_in.set()
            release.wait(10)

    t = threading.Thread(target=first)
    t.start()
    assert first_in.wait(10)
    ask = turns.Request("the second", 20.0, stop=leave.is_set, on_wait=heard.append)
    waiter = threading.Thread(target=lambda: _expect_stopped(lm, ask))
    waiter.start()
    deadline = time.monotonic() + 10
    while not heard and time.monotonic() < deadline:
        time.sleep(0.02)
    assert heard[0] == "waiting for one run, about 40 s", heard
    assert turns.of(lm).busy().startswith("2 runs")  # type: ignore[arg-type]
    leave.set()
    waiter.join(10)
    assert turns.of(lm).busy().startswith("one run")  # type: ignore[arg-type]
    release.set()
    t.join(10)
    with turns.turn(lm, turns.Request("the third")) as job:  # type: ignore[arg-type]
        assert job.started is not None  # nobody ahead: no wait


def _expect_stopped(lm, ask) -> None:
    with pytest.raises(Stopped, match="left the queue"), turns.turn(lm, ask):
        pass


# ---- the budget ------------------------------------------------------------------------------------------------


def test_plain_decoding_is_priced_by_its_step_and_prefill():
    c = cost()
    p = budget.price(c, {"ar": None}, tokens=100, runs=3, prompt=12)
    assert p.seconds == pytest.approx(3 * (c.forward_ms(12) + 100 * 30.0) / 1000)


def test_a_tree_is_priced_by_the_fits_candidate_of_its_shape_and_past_the_tables_conservatively():
    c = cost()
    cfg = eagle.Config(depth=2, top_k=4, total_tokens=6)
    shape = {"depth": 2, "top_k": 4, "total_tokens": 6}
    want = next(x for x in fit.tree_candidates("eagle", c, fit.PAPER["eagle"]) if x.fields == shape)
    s = budget.step_price("eagle", cfg, c)
    assert s.from_fit and pytest.approx(want.A) == s.A and s.width == 6
    assert s.step_ms == pytest.approx(want.verify_ms + want.draft_ms + want.other_ms)
    wide = budget.step_price("eagle", eagle.Config(depth=9, top_k=4, total_tokens=40), c)  # deeper than the table
    assert not wide.from_fit and wide.A == 1.0 and wide.step_ms >= c.forward_ms(40)
    unset = budget.step_price("eagle", eagle.Config(), c)  # left to the fit: the fit's best shape
    assert unset.width == fit.fit_method("eagle", c).best.forward_tokens


def test_a_tree_with_a_window_beside_it_is_priced_by_everything_its_forward_carries():
    """Medusa + Lookahead's forward carries the heads' tree, the pool's branches and the window: all are priced."""
    from specviz.methods import medusa_lookahead

    cfg = medusa_lookahead.Config(heads=2, total_tokens=5, window=3, ngram=3, guesses=2)
    s = budget.step_price(medusa_lookahead.CARD.name, cfg, cost())
    assert s.width == 5 + 2 * (3 + 2) == cfg.forward_tokens and s.step_ms >= cost().forward_ms(15)


def test_a_run_over_the_bound_is_refused_with_what_to_lower(monkeypatch):
    monkeypatch.delenv(budget.ENV, raising=False)
    c = cost()
    small = budget.price(c, {"ar": None, "pld": None}, tokens=32, runs=2)
    assert small.seconds < budget.DEFAULT_S and budget.refusal(small) == ""
    big = eagle.Config(depth=9, top_k=4, total_tokens=40)
    p = budget.price(c, {"ar": None, "eagle": big, "pld": None}, tokens=512, runs=4)
    words = budget.refusal(p)
    assert words.startswith("This run would take about ") and "over this server's bound of 1 min 30 s" in words
    for lever in ("the tokens (512; about ", "the repeats (4 runs", "the methods (2 beside", "tree or window (40"):
        assert lever in words, (lever, words)
    assert budget.ENV in words
    monkeypatch.setenv(budget.ENV, str(p.seconds + 1))  # the operator raises the bound
    assert budget.refusal(p) == ""
    monkeypatch.setenv(budget.ENV, "0")  # or lifts it
    assert budget.refusal(p) == ""
