"""EAGLE-3: a draft head over a fusion of the target's low, middle and high layers grows EAGLE-2's dynamic tree.

The target's verify pass also hands over the inputs of three of its layers (LoadedModel.forward_layers);
the head (specviz.heads.eagle3) fuses them, drafts from its own outputs deeper in the tree, and the tree
is grown, verified, accepted and committed as EAGLE-2's (its proposer, Eagle3Proposer below, is EAGLE-2's with
what the root reads changed; its verifier is the tree verifier handing over the layers' inputs):
greedy matching at T = 0, tree speculative sampling at T > 0, so the output is the target's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from specviz.core.details import Eagle3Detail
from specviz.core.host import fetch
from specviz.core.model import LoadedModel, fused_layers
from specviz.core.sampling import ConfigError
from specviz.heads.eagle import pass_through
from specviz.heads.eagle3 import DEFAULT_DIR, Eagle3Drafter, Eagle3Head, head_for, new_head
from specviz.heads.eagle_drafter import head_dtype
from specviz.methods import eagle
from specviz.methods.base import Card, Run, Step, generator
from specviz.trees.draft_tree import feature_view
from specviz.trees.verifier import RunView, TreeVerifier, Verified

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
    builds_on="eagle",
)


@dataclass(frozen=True)
class Config(eagle.Config):
    """Tree shape and the head (models/eagle3's by default), as EAGLE-2's (defaults: its CPU-tuned 2 / 4 / 6)."""


class Eagle3Proposer(eagle.EagleProposer):
    """EAGLE-2's proposer with an EAGLE-3 head: the target hands over the inputs of the layers the head fuses
    (the run's prefill and the verifier read them, `layers`), not its final features."""

    drafter: Eagle3Drafter

    def __init__(self, drafter: Eagle3Drafter, cfg: eagle.Config, head: Eagle3Head) -> None:
        super().__init__(drafter, cfg, head.config.calibration, head.config.confidence)
        self.layers = tuple(head.config.layers)
        self.last_layers: torch.Tensor | None = None  # the last committed token's layer inputs [3H]

    def start(self, run: RunView, prompt_feats: torch.Tensor) -> None:
        """EAGLE's head prefill over the prompt's layer inputs; the last one is the first root's feature."""
        super().start(run, prompt_feats)
        self.last_layers = prompt_feats[-1]

    def root_feature(self, run: RunView) -> torch.Tensor:
        """The last committed token's layer inputs [3H] (the drafter fuses them)."""
        if self.last_layers is None:
            raise RuntimeError("The EAGLE-3 proposer has not been started (Speculator.start).")
        return self.last_layers

    def commit(self, v: Verified, path: list[int]) -> None:
        """EAGLE-2's commit; then remember the accepted path's last layer inputs for the next root."""
        super().commit(v, path)
        self.last_layers = v.feats[path[-1]]

    def record(self, res: eagle.TreeResult, text: Callable[[int], str]) -> dict[str, Any]:
        """An Eagle3Detail's fields: EAGLE-2's record, and the layers the head fuses."""
        return {**super().record(res, text), "layers": list(self.layers)}

    def feature_record(self, res: eagle.TreeResult, root_embed: torch.Tensor) -> dict:
        """The fused g the root's pair read and the head's normed output norm(a), against the target's final
        hidden state (both go through LM-head rows; the head is not trained to match it, only its tokens)."""
        dr, d = self.drafter, res.draft
        with torch.inference_mode():
            g = dr.fused(d.f_t[None])[0]
            pred = dr.readout(d.tree.feats[0].to(dr.dtype))
            parts = d.f_t.double().view(len(self.layers), -1)  # the raw inputs of the fused layers
        rms, peak = fetch(parts.pow(2).mean(-1).sqrt(), parts.abs().amax(-1))  # one read for every layer
        rms, peak = [round(x, 2) for x in rms], [round(x, 1) for x in peak]
        return {**feature_view(g, root_embed, pred, res.verified.hidden[0]), "layer_rms": rms, "layer_peak": peak}


def proposer(lm: LoadedModel, head: Eagle3Head, cfg: eagle.Config) -> Eagle3Proposer:
    """EAGLE-3's proposer: ConfigError when the head fuses layers this model lacks."""
    layers, depth = list(head.config.layers), len(lm.hf.model.layers)
    if max(layers) >= depth:
        raise ConfigError(f"The EAGLE-3 head fuses layers {layers}; this model has {depth}.")
    return Eagle3Proposer(Eagle3Drafter(head, lm, head_dtype(lm, cfg.head_dtype)), cfg, head)


class Eagle3(eagle.Eagle):
    """One EAGLE-3 generation: the head's proposer, which reads fused layer inputs, and a tree verifier that hands
    those inputs over for every node, in the tree methods' one step (methods.speculator.TreeSpeculator.step: the
    head keeps the accepted path's layer inputs for the next root)."""

    DETAIL = Eagle3Detail


def begin(run: Run, cfg: Config, head: Eagle3Head | None = None) -> Step:
    """The head (given, else found; ConfigError when none is, or when it fuses layers this model lacks) and a
    verifier reading the layers it fuses; the run's prefill keeps the prompt's inputs of them."""
    drafting = proposer(run.lm, head_for(run.lm, cfg.head, head), cfg)
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
