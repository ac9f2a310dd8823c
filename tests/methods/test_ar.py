"""Plain decoding: greedy equals transformers' generate; sampling is seeded; traces round-trip."""

from __future__ import annotations

import pytest

from specviz.core.sampling import ConfigError, Sampling
from specviz.core.trace import Trace
from specviz.methods import ar
from tests.conftest import PROMPTS, hf_greedy


def test_tiny_greedy_matches_generate(tiny_lm):
    ids = tiny_lm.encode_prompt("Hello there")
    trace = ar.generate(tiny_lm, ids, Sampling(max_new_tokens=20))
    want = hf_greedy(tiny_lm, ids, 20)
    assert trace.output_ids == want[: len(trace.output_ids)]
    assert len(trace.output_ids) == 20 or trace.stopped == "eos"  # a run that stops early must have met EOS
    assert trace.mean_accepted == 1.0
    assert all(s.forward_tokens in (0, 1) for s in trace.steps)


def test_sampling_is_seeded(tiny_lm):
    ids = tiny_lm.encode_prompt("Hello there")
    s = Sampling(max_new_tokens=12, temperature=1.0, top_p=0.9, seed=7)
    a, b = ar.generate(tiny_lm, ids, s), ar.generate(tiny_lm, ids, s)
    c = ar.generate(tiny_lm, ids, Sampling(max_new_tokens=12, temperature=1.0, top_p=0.9, seed=8))
    assert a.output_ids == b.output_ids
    assert a.output_ids != c.output_ids


def test_trace_fields_and_json_round_trip(tiny_lm):
    ids = tiny_lm.encode_prompt("Count to five")
    trace = ar.generate(tiny_lm, ids, Sampling(max_new_tokens=6))
    step = trace.steps[0]
    assert len(step.top) == 5 and step.top[0].id == step.committed[0]
    assert 0 < step.prob <= 1 and step.entropy >= 0
    assert Trace.from_json(trace.to_json()) == trace


@pytest.mark.parametrize(
    "bad",
    [
        {"max_new_tokens": 0},
        {"max_new_tokens": -3},
        {"temperature": -1.0},
        {"top_p": 0.0},
        {"temperature": float("nan")},
    ],
)
def test_bad_sampling_settings_are_refused(bad):
    with pytest.raises(ConfigError):
        Sampling(**bad)


@pytest.mark.real_model
@pytest.mark.parametrize("prompt", PROMPTS)
def test_real_model_greedy_matches_generate(real_lm, prompt):
    ids = real_lm.encode_prompt(prompt)
    trace = ar.generate(real_lm, ids, Sampling(max_new_tokens=32))
    want = hf_greedy(real_lm, ids, 32)
    assert trace.output_ids == want[: len(trace.output_ids)]
    assert len(trace.output_ids) == 32 or trace.stopped == "eos"  # a run that stops early must have met EOS
