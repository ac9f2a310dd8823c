"""Run-on drafting: a method added by following DESIGN.md's "Adding a method" once, kept as a test fixture (never
shipped, never registered by the app; tests/methods/test_method_record.py registers it through its card and holds it to
the identity contract).

It guesses that the text runs on: the draft is the root repeated γ times (the simplest training-free drafter, right
inside runs of one token, wrong where the context breaks them). Its proposer is all it writes: the chain is a
one-branch tree, verified in one forward, walked by the one acceptance walk (greedy match at T = 0, speculative
sampling with a point-mass draft at T > 0) and committed, in the tree methods' one step. It needs no head, no trainer
and no page of its own: the Compare page and the timeline draw it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from specviz.core.details import ChainDetail
from specviz.core.sampling import check_between, target_probs
from specviz.methods.base import Card, Outcome, Run, Step, generator
from specviz.methods.speculator import TreeSpeculator, path_outcome
from specviz.trees.tree import TreeSpec
from specviz.trees.verifier import TreeVerifier, Verified
from specviz.trees.walk import Walk, chain_records

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


@dataclass
class Guess:
    """A step's draft: the root, then k copies of it, as a one-branch tree."""

    tokens: list[int]
    spec: TreeSpec


def guess(root: int, k: int) -> Guess:
    """The root followed by k copies of itself."""
    return Guess([root] * (1 + k), TreeSpec.chain(1 + k))


class RunOnProposer:
    """Drafts the root γ times (fewer where the answer ends sooner); reads and keeps nothing."""

    layers: tuple[int, ...] = ()

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg

    def start(self, run: Run, prompt_feats: torch.Tensor) -> None:
        """Nothing of the prompt to read."""

    def propose(self, run: Run, root: int) -> Guess:
        return guess(root, min(self.cfg.gamma, run.remaining - 1))

    def commit(self, v: Verified, path: list[int]) -> None:
        """Nothing to keep."""


class RunOn(TreeSpeculator):
    """One run-on generation: its proposer and the tree verifier, in the tree methods' one step."""

    DETAIL = RunOnDetail
    proposer: RunOnProposer

    def outcome(self, run: Run, draft: Any, v: Verified, w: Walk) -> Outcome:
        def detail() -> RunOnDetail:  # built after the step's clock stopped
            rule = "greedy" if run.sampling.greedy else "speculative"
            p, drafts = target_probs(v.logits, run.sampling), draft.tokens[1:]
            records = chain_records(w, drafts, p, rule, run.lm.token_text)
            return RunOnDetail(rule, drafts, len(w.path) - 1, records)

        return path_outcome(v, w, detail)


def begin(run: Run, cfg: Config) -> Step:
    return RunOn(RunOnProposer(cfg), TreeVerifier()).start(run)


generate = generator(CARD.name, Config, begin, "Decode with run-on drafts until EOS or max_new_tokens.")
