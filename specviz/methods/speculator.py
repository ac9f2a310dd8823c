"""A drafting method is its proposer plus a choice of verifier, as the field names them (transformers' candidate
generators, vLLM's proposers beside one rejection sampler), and the outcome each kind of verified draft hands back.

The Proposer drafts (Medusa's heads, Hydra's, EAGLE's head, EAGLE-3's, the hybrid's head and pool); the Verifier
checks the draft against the target in one forward and keeps what the target agrees with (a tree's:
specviz.trees.verifier). A Speculator holds the two for one generation. Its `start` is what every such method runs
first, written once: the target's prefill, keeping what the proposer reads of the prompt (the final hidden states,
or the inputs of the layers it names), then the proposer's own prefill over it. Its `step` puts the pieces in the
four phases: propose → verify → accept → commit. Every drafting method whose draft is a tree shares one step
(TreeSpeculator), and a chain is a one-branch tree (speculative sampling's draft, prompt lookup's copy, DFlash's
block): Medusa and Hydra differ only in their proposer, EAGLE-2 and EAGLE-3 in their proposer and what the verifier
keeps of each node, so their files hold their proposer (the paper's drafting), their verifier and their record. The
Jacobi family, whose window of guesses sits beside the verified branch, writes its step in its files. Nothing here
knows any one method.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Protocol

import torch

from specviz.core.details import Detail
from specviz.methods.base import Outcome, Run, Step
from specviz.trees.verifier import Verified
from specviz.trees.walk import Walk


class Proposer(Protocol):
    """What drafts: it reads the prompt once, after the target's prefill, then drafts from the run each step."""

    layers: tuple[int, ...]  # the target layers whose inputs it reads; () for the final hidden state

    def start(self, run: Run, prompt_feats: torch.Tensor) -> None: ...


class Verifier(Protocol):
    """What checks a draft: one target forward (verify), the acceptance rule (accept), the accepted path kept in the
    target's cache (commit)."""

    def verify(self, run: Run, tokens: list[int], spec: Any) -> Verified: ...
    def accept(self, run: Run, v: Verified) -> Walk: ...
    def commit(self, run: Run, v: Verified, w: Walk) -> None: ...


class Speculator(ABC):
    """One generation of a drafting method: its proposer and its verifier over the run."""

    def __init__(self, proposer: Proposer, verifier: Verifier) -> None:
        self.proposer, self.verifier = proposer, verifier

    def start(self, run: Run) -> Step:
        """The target's prefill (keeping the prompt's features the proposer reads), then the proposer's own
        prefill (timed as prefill); the step to decode with."""
        self.proposer.start(run, run.prefill(self.proposer.layers))
        return self.step

    @abstractmethod
    def step(self, run: Run, root: int) -> Outcome:
        """propose → verify → accept → commit: a tree method's is TreeSpeculator's, any other's in its file."""


class TreeProposer(Proposer, Protocol):
    """A proposer of trees: each step a draft whose tokens (root first) follow its tree's spec, and after the
    target's verdict whatever it keeps of the accepted path (EAGLE's head its features; heads keep nothing)."""

    def propose(self, run: Run, root: int) -> Any: ...
    def commit(self, v: Verified, path: list[int]) -> None: ...


class TreeSpeculator(Speculator):
    """One generation of a tree method: the proposer fills a tree, the verifier checks it in one target forward and
    walks it, and both keep the accepted path. `DETAIL` is the method's step record."""

    DETAIL: ClassVar[type[Detail]]
    proposer: TreeProposer

    @torch.no_grad()
    def step(self, run: Run, root: int) -> Outcome:
        """propose (fill the tree) → verify (one target forward over it) → accept (the walk: greedy match at T = 0,
        tree speculative sampling or a typical rule at T > 0) → commit (the target's cache, then the proposer's)."""
        with run.phase("propose"):
            draft = self.proposer.propose(run, root)
        with run.phase("verify"):
            v = self.verifier.verify(run, draft.tokens, draft.spec)
        with run.phase("accept"):
            w = self.verifier.accept(run, v)
        with run.phase("commit"):
            self.verifier.commit(run, v, w)
            self.proposer.commit(v, w.path)
        return self.outcome(run, draft, v, w)

    @abstractmethod
    def outcome(self, run: Run, draft: Any, v: Verified, w: Walk) -> Outcome:
        """The step's outcome and its record, built after the clock stops."""


def path_outcome(v: Verified, w: Walk, detail: Callable[[], Detail], proposed: int | None = None) -> Outcome:
    """The outcome of a verified tree walked by specviz.trees.walk: its accepted path, and the next step's logits
    and feature from the path's last node (`proposed`: drafted nodes, verified or not; else the tree's)."""
    last = w.path[-1]
    return Outcome(
        accepted=[v.tokens[j] for j in w.path[1:]],
        proposed=len(v.tokens) - 1 if proposed is None else proposed,
        forward_tokens=len(v.tokens),
        logits=v.logits[last],
        hidden=v.hidden[last],
        next_root=w.next_root,
        detail=detail,
    )
