"""Run-on drafting: a method added by following DESIGN.md's "Adding a method" once, kept as a test fixture (never
shipped, never registered by the app; tests/methods/test_method_record.py registers it through its card and holds it to
the identity contract).

It guesses that the text runs on: the draft is the root repeated γ times (the simplest training-free drafter, right
inside runs of one token, wrong where the context breaks them). One forward verifies the chain; the chain rule
accepts (greedy match at T = 0, speculative sampling with a point-mass draft at T > 0); the cache is cropped back to
what was accepted. It needs no head, no trainer and no page of its own: the Compare page and the timeline draw it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from specviz.core.acceptance import annotate, judge_chain
from specviz.core.details import ChainDetail
from specviz.core.model import crop_to
from specviz.core.sampling import check_between, target_probs
from specviz.methods.base import Card, Outcome, Run, generator
from specviz.methods.speculator import chain_outcome

CARD = Card(
    name="runon",
    label="Run-on drafting",
    summary="Guesses that the last token repeats γ times; one forward pass checks the run.",
    colour="#aa4499",  # Tol's purple: no shipped method's
    order=90,  # after every shipped method
)


@dataclass(frozen=True)
class RunOnDetail(ChainDetail):
    """A drafted chain of copies of the root, judged token by token (a ChainDetail: rule, drafts, records)."""

    METHOD: ClassVar[str] = "runon"


@dataclass(frozen=True)
class Config:
    """How long a run to guess."""

    gamma: int = 4  # copies of the root drafted per step

    def __post_init__(self) -> None:
        check_between("gamma", self.gamma, 1, 16, " drafted tokens")


def point_mass(drafts: list[int], like: torch.Tensor) -> torch.Tensor:
    """The draft distribution of a guessed token: all its mass on it; [k, V] like `like`."""
    q = torch.zeros(len(drafts), like.shape[-1], dtype=like.dtype, device=like.device)
    q[torch.arange(len(drafts)), torch.tensor(drafts, dtype=torch.long)] = 1.0
    return q


class RunOn:
    """One run-on generation: its Config."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg

    def step(self, run: Run, root: int) -> Outcome:
        """propose (the root, γ times) → verify (one forward) → accept (the chain rule) → commit (crop the cache)."""
        base, rule = run.seq_len, "greedy" if run.sampling.greedy else "speculative"
        with run.phase("propose"):
            drafts = [root] * min(self.cfg.gamma, run.remaining - 1)
        with run.phase("verify"):
            logits, hidden = run.lm.forward([root, *drafts], run.cache)  # [k+1, V]
        with run.phase("accept"):
            p = target_probs(logits, run.sampling)
            n, nxt, records = judge_chain(rule, p, point_mass(drafts, p), drafts, run.gen)
        with run.phase("commit"):
            crop_to(run.cache, base + 1 + n)
        text = run.lm.token_text
        return chain_outcome(
            drafts, n, logits, hidden, nxt, lambda: RunOnDetail(rule, drafts, n, annotate(records, p, text))
        )


generate = generator(
    CARD.name, Config, lambda run, cfg: RunOn(cfg).step, "Decode with run-on drafts until EOS or max_new_tokens."
)
