"""EAGLE-3: a draft head over a fusion of the target's low, middle and high layers grows EAGLE-2's dynamic tree.

The target's verify pass also hands over the inputs of three of its layers (LoadedModel.forward_layers);
the head (specviz.heads.eagle3) fuses them, drafts from its own outputs deeper in the tree, and the tree
is grown, verified, accepted and committed as EAGLE-2's (its proposer, specviz.heads.eagle3.Eagle3Proposer, is
EAGLE-2's with what the root reads changed; its verifier is the tree verifier handing over the layers' inputs):
greedy matching at T = 0, tree speculative sampling at T > 0, so the output is the target's.
"""

from __future__ import annotations

from dataclasses import dataclass

from specviz.core.details import Eagle3Detail
from specviz.core.model import LoadedModel, fused_layers
from specviz.heads.eagle import pass_through
from specviz.heads.eagle3 import DEFAULT_DIR, Eagle3Head, Eagle3Proposer, head_for, new_head, proposer
from specviz.methods.base import Card, Outcome, Run, Step, generator
from specviz.methods.speculator import Speculator, tree_outcome
from specviz.trees.eagle_tree import EagleConfig, TreeResult
from specviz.trees.verifier import TreeVerifier

CARD = Card(
    name="eagle3",
    label="EAGLE-3",
    summary="A one-layer head reads a fusion of low, middle and high target layers and drafts EAGLE-2's dynamic tree.",
    colour="#117733",
    order=9,
    figures="specviz.output.viz.eagle:gallery",
    head="eagle3",
    head_label="EAGLE-3 head",
    models=DEFAULT_DIR,
    confidence=True,
)


@dataclass(frozen=True)
class Config(EagleConfig):
    """Tree shape and the head (models/eagle3's by default), as EAGLE-2's (defaults: its CPU-tuned 2 / 4 / 6)."""


class Eagle3(Speculator):
    """One EAGLE-3 generation: the head's proposer, which reads fused layer inputs, and a tree verifier that hands
    those inputs over for every node."""

    proposer: Eagle3Proposer

    def step(self, run: Run, root: int) -> Outcome:
        """propose (the head drafts a tree from fused layers) → verify (one target forward, with layer inputs) →
        accept → commit (the target's cache; the head's queue, and the path's last layer inputs)."""
        with run.phase("propose"):
            draft = self.proposer.propose(run, root)
        with run.phase("verify"):
            v = self.verifier.verify(run, draft.tokens, draft.spec)  # v.feats: each node's layer inputs [n, 3H]
        with run.phase("accept"):  # greedy match at T = 0, tree speculative sampling at T > 0
            w = self.verifier.accept(run, v)
        with run.phase("commit"):
            self.verifier.commit(run, v, w)
            self.proposer.commit(v, w.path)
        res = TreeResult(draft, v, w)
        return tree_outcome(res, lambda: Eagle3Detail(**self.proposer.record(res, run.lm.token_text)))


def begin(run: Run, cfg: Config, head: Eagle3Head | None = None) -> Step:
    """The head (given, else found; ConfigError when none is, or when it fuses layers this model lacks) and a
    verifier reading the layers it fuses; the run's prefill keeps the prompt's inputs of them."""
    drafting = proposer(run.lm, head_for(run.lm, cfg, head), cfg)
    return Eagle3(drafting, TreeVerifier(layers=drafting.layers)).start(run)


generate = generator(CARD.name, Config, begin, "Decode with an EAGLE-3 head until EOS or max_new_tokens.")


def tiny_resources(lm: LoadedModel, seed: int = 1) -> dict:
    """An untrained head in the model's own dtype, its fused layers fitted to the model's depth (any model)."""
    layers = fused_layers(len(lm.hf.model.layers))
    head = new_head(lm.hf.config, lm.name, layers=layers, seed=seed).to(lm.device, lm.dtype)
    return {
        "config": Config(depth=3, top_k=3, total_tokens=8, head_dtype="model"),
        "head": head.eval().requires_grad_(False),
    }


def accepting_resources(lm: LoadedModel) -> dict:
    """tiny_resources with the head passing the next token's embedding through (heads.eagle.pass_through), so
    every draft is right on a model whose next token does not depend on its input."""
    kw = tiny_resources(lm)
    pass_through(kw["head"])
    return kw
