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
from specviz.heads.eagle3 import DEFAULT_DIR, Eagle3Head, head_for, new_head, proposer
from specviz.methods.base import Card, Run, Step, generator
from specviz.methods.speculator import EagleSpeculator
from specviz.trees.eagle_tree import EagleConfig
from specviz.trees.verifier import TreeVerifier

CARD = Card(
    name="eagle3",
    label="EAGLE-3",
    summary="A one-layer head reads a fusion of low, middle and high target layers and drafts EAGLE-2's dynamic tree.",
    colour="#117733",
    order=9,
    head="eagle3",
    head_label="EAGLE-3 head",
    models=DEFAULT_DIR,
    confidence=True,
)


@dataclass(frozen=True)
class Config(EagleConfig):
    """Tree shape and the head (models/eagle3's by default), as EAGLE-2's (defaults: its CPU-tuned 2 / 4 / 6)."""


class Eagle3(EagleSpeculator):
    """One EAGLE-3 generation: the head's proposer, which reads fused layer inputs, and a tree verifier that hands
    those inputs over for every node, in the tree methods' one step (methods.speculator.TreeSpeculator.step: the
    head keeps the accepted path's layer inputs for the next root)."""

    DETAIL = Eagle3Detail


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
