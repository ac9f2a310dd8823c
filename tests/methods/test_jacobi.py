"""Jacobi decoding: the fixed point is greedy decoding; the method is token-identical to `ar`."""

from __future__ import annotations

import pytest
import torch

from specviz.core.sampling import ConfigError, Sampling
from specviz.core.trace import Trace
from specviz.methods import ar, jacobi
from specviz.methods.base import Run


@pytest.mark.parametrize("init", jacobi.INIT_SOURCES)
def test_fixed_point_equals_greedy(tiny_lm, init):
    ids, n = tiny_lm.encode_prompt("Once upon a time"), 6
    greedy = ar.generate(tiny_lm, ids, Sampling(max_new_tokens=n)).output_ids
    traj = jacobi.jacobi_fixed_point(tiny_lm, ids, n, init=init, seed=1)
    assert traj[-1] == greedy and traj[-2] == greedy  # the last iteration changed nothing
    assert len(traj) <= n + 2  # at most n refining iterations plus the confirming one
    for k, vec in enumerate(traj[1:], start=1):  # after k iterations at least k tokens are exact
        assert vec[:k] == greedy[:k]


def test_initial_guess_sources(tiny_lm):
    gen, prompt = torch.Generator().manual_seed(0), [11, 12, 13]
    assert jacobi.initial_guesses("pad", 3, prompt, 2, 100, gen) == [2, 2, 2]
    assert set(jacobi.initial_guesses("prompt", 8, prompt, 2, 100, gen)) <= set(prompt)
    rand = jacobi.initial_guesses("random", 8, prompt, 2, 100, gen)
    assert len(rand) == 8 and all(0 <= t < 100 for t in rand)
    with pytest.raises(ConfigError):
        jacobi.initial_guesses("zeros", 3, prompt, 2, 100, gen)


def test_good_guesses_are_committed_at_once(tiny_lm):
    """Guesses equal to the greedy continuation converge in one pass: n + 1 tokens in the first step."""
    ids, s, cfg = tiny_lm.encode_prompt("Hello there"), Sampling(max_new_tokens=16), jacobi.Config(guesses=5)
    want = ar.generate(tiny_lm, ids, s).output_ids
    run = Run(tiny_lm, ids, s, jacobi.CARD.name, cfg)
    state = jacobi.begin(run, cfg)
    state.guesses = want[1:6]
    trace = run.decode(state.step)
    assert trace.output_ids == want and trace.steps[0].accepted == 6
    assert trace.steps[0].detail.status == ["committed"] * 6


def test_grid_statuses_and_round_trip(tiny_lm):
    cfg = jacobi.Config(guesses=4, init="pad")
    trace = jacobi.generate(tiny_lm, tiny_lm.encode_prompt("Count to five"), Sampling(max_new_tokens=8), cfg)
    first, second = trace.steps[0].detail, trace.steps[1].detail
    assert first.status[0] == "committed" and set(first.status[1:]) <= {"init", "committed"}
    assert second.offset == first.offset + first.n_accepted + 1
    assert len(second.row) == 5 and set(second.status) <= {"committed", "fixed", "changed", "init"}
    # the second row's guesses are the first pass's predictions, shifted past the committed tokens
    m = first.n_accepted
    assert second.row[0] == first.prediction[m]  # the next root is the bonus token
    assert second.row[1 : 5 - m] == first.prediction[m + 1 :]
    assert Trace.from_json(trace.to_json()) == trace


def test_sampling_is_seeded(tiny_lm):
    ids, cfg = tiny_lm.encode_prompt("Hello there"), jacobi.Config(guesses=3)
    s = Sampling(max_new_tokens=12, temperature=1.0, seed=7)
    a, b = jacobi.generate(tiny_lm, ids, s, cfg), jacobi.generate(tiny_lm, ids, s, cfg)
    assert a.output_ids == b.output_ids and len(a.output_ids) >= 1


@pytest.mark.parametrize("bad", [{"guesses": 0}, {"guesses": 99}, {"init": "zeros"}])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ConfigError):
        jacobi.Config(**bad)
