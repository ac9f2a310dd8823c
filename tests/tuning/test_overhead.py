"""What a decoding step asks of the host, counted on the tiny model (specviz.tuning.overhead): no host read inside a
target forward, plain decoding at most 2 reads a step, every method at most 4 more, and a forward's torch calls
bounded per layer. On a GPU each read drains the queue and each call launches work; here they are only counted."""

from __future__ import annotations

import pytest
import torch

from specviz import methods
from specviz.core.lean import LeanLlama
from specviz.tuning.overhead import measure, over_budget
from tests.conftest import method_kwargs

LAYERS = 2  # the sticky tiny model's


@pytest.fixture(scope="module")
def counted(sticky, sticky_prompt):
    return [measure(sticky, n, sticky_prompt[:30], 24, **method_kwargs(n, sticky)) for n in methods.available()]


def test_every_method_keeps_the_host_budget(counted):
    assert {r.method for r in counted} == set(methods.available())
    assert over_budget(counted, LAYERS) == []
    plain = next(r for r in counted if r.method == "ar")
    assert plain.reads_per_step <= 2 and plain.steps - 1 <= plain.forwards <= plain.steps  # the last token needs none
    assert all(r.steps >= 2 and r.forwards >= 1 for r in counted)


def test_a_read_added_inside_the_forward_breaks_the_budget(sticky, sticky_prompt, monkeypatch):
    """Mutation: the forward reads a value back (as a mask built from a tensor's length would)."""
    call = LeanLlama.__call__

    def reads(self, ids, *args, **kwargs):
        float(ids.float().sum())  # a host read inside the forward
        return call(self, ids, *args, **kwargs)

    monkeypatch.setattr(LeanLlama, "__call__", reads)
    rows = [measure(sticky, "ar", sticky_prompt[:30], 12)]
    assert rows[0].reads_per_forward == 1
    problems = over_budget(rows, LAYERS)
    assert any("inside a target forward" in p for p in problems) and any("reads a step" in p for p in problems)


def test_a_read_added_in_a_draft_round_breaks_the_budget(sticky, sticky_prompt, monkeypatch):
    """Mutation: EAGLE's drafter reads each round's scores back, as the tree once was grown."""
    from specviz.heads import eagle_drafter

    run = eagle_drafter.Drafter.run

    def reads(self, *args, **kwargs):
        out, logp = run(self, *args, **kwargs)
        logp.max(-1).values.tolist()  # one read a round
        torch.zeros(1).sum().item()  # and another
        return out, logp

    monkeypatch.setattr(eagle_drafter.Drafter, "run", reads)
    rows = [measure(sticky, n, sticky_prompt[:30], 24, **method_kwargs(n, sticky)) for n in ("ar", "eagle")]
    assert any(p.startswith("eagle:") for p in over_budget(rows, LAYERS))
