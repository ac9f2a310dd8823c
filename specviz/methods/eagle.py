"""EAGLE / EAGLE-2: a feature-level draft head grows a token tree; one target forward verifies it."""

from __future__ import annotations

from dataclasses import dataclass

from specviz.core.details import EagleDetail
from specviz.core.model import LoadedModel
from specviz.heads.eagle import DEFAULT_DIR, EagleHead
from specviz.heads.eagle_drafter import head_for, load_head, proposer, tiny_head
from specviz.methods.base import Card, Outcome, Run, Step, generator
from specviz.methods.speculator import Speculator, tree_outcome
from specviz.trees.eagle_tree import EagleConfig, EagleProposer, TreeResult
from specviz.trees.verifier import TreeVerifier

CARD = Card(
    name="eagle",
    label="EAGLE-2",
    summary="A one-layer head drafts features, not just tokens; a dynamic tree is verified in one pass.",
    colour="#009e73",
    order=5,
    figures="specviz.output.viz.eagle:gallery",
    head="eagle",
    head_label="EAGLE-2 head",
    models=DEFAULT_DIR,
    batched="eagle",
    confidence=True,
    preset_fields=("depth", "top_k", "total_tokens", "tree"),
)


@dataclass(frozen=True)
class Config(EagleConfig):
    """Tree shape and the head (models/eagle's by default); defaults tuned on this 2-core CPU (EagleConfig says
    how; GPU reference: 5 / 10 / 60)."""


def get_head(lm: LoadedModel, cfg: Config) -> EagleHead:
    """The head named by the config, loaded once per (model, folder, file time)."""
    return load_head(lm, cfg)


class Eagle(Speculator):
    """One EAGLE-2 generation: the head's proposer (its drafter and cache) and the tree verifier."""

    proposer: EagleProposer

    def step(self, run: Run, root: int) -> Outcome:
        """propose (the head drafts a tree) → verify (one target forward) → accept → commit (target and head)."""
        with run.phase("propose"):
            draft = self.proposer.propose(run, root)  # grown by confidence, reranked to total_tokens
        with run.phase("verify"):
            v = self.verifier.verify(run, draft.tokens, draft.spec)
        with run.phase("accept"):  # greedy match at T = 0, tree speculative sampling at T > 0
            w = self.verifier.accept(run, v)
        with run.phase("commit"):
            self.verifier.commit(run, v, w)
            self.proposer.commit(v, w.path)
        res = TreeResult(draft, v, w)
        return tree_outcome(res, lambda: EagleDetail(**self.proposer.record(res, run.lm.token_text)))


def begin(run: Run, cfg: Config, head: EagleHead | None = None) -> Step:
    """The head (given, else found; ConfigError when none is) drafting from the run's state."""
    return Eagle(proposer(run.lm, head_for(run.lm, cfg, head), cfg), TreeVerifier()).start(run)


generate = generator(CARD.name, Config, begin, "Decode with an EAGLE head until EOS or max_new_tokens.")


def tiny_resources(lm: LoadedModel, seed: int = 1, accepting: bool = False) -> dict:
    """An untrained head (heads.eagle_drafter.tiny_head) and a small tree, for any model."""
    return {
        "config": Config(depth=3, top_k=3, total_tokens=8, head_dtype="model"),
        "head": tiny_head(lm, seed, accepting),
    }


def accepting_resources(lm: LoadedModel) -> dict:
    """tiny_resources with a head whose every draft is right on a model whose next token ignores its input."""
    return tiny_resources(lm, accepting=True)
