"""Medusa: K heads on the last hidden state propose a sparse token tree; one tree-attention pass verifies it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from specviz.core.details import MedusaDetail
from specviz.core.host import fetch
from specviz.core.model import LoadedModel
from specviz.heads.medusa import HeadsConfig, MedusaHeads, cached_heads, load_calibration, models_dir, new_heads
from specviz.methods.base import Card, Outcome, Run, Step, generator
from specviz.methods.speculator import TreeSpeculator, path_outcome
from specviz.trees.head_tree import HeadsDraft, HeadsProposer, HeadTreeConfig, tiny_calibration
from specviz.trees.tree import TreeSpec
from specviz.trees.verifier import Verified
from specviz.trees.walk import Walk

CARD = Card(
    name="medusa",
    label="Medusa",
    summary="Extra heads guess several tokens ahead; a sparse tree of guesses is checked in one pass.",
    colour="#cc79a7",
    order=3,
    head="medusa",
    head_label="Medusa heads",
    models=models_dir(),
    held_out=True,
    preset_fields=("heads", "total_tokens"),
)


@dataclass(frozen=True)
class Config(HeadTreeConfig):
    """Medusa settings; the defaults are the ones measured best on 2 CPU cores."""


def get_heads(lm: LoadedModel, cfg: HeadTreeConfig) -> MedusaHeads:
    """Trained heads for this model, loaded once per (folder, heads, file time) and kept with the model."""
    return cached_heads(lm, cfg.heads_dir or None, cfg.heads)


def propose(heads: MedusaHeads, hidden: torch.Tensor, spec: TreeSpec) -> tuple[list[int], list[float]]:
    """Each non-root node's token and head probability: node (i1..ik) is rank ik of head k."""
    ranks = 1 + max((r[-1] for r in spec.ranks[1:]), default=0)
    ids, probs = heads.topk(hidden, ranks)  # [K, ranks] each
    head = torch.tensor([len(path) - 1 for path in spec.ranks[1:]], dtype=torch.long, device=ids.device)
    rank = torch.tensor([path[-1] for path in spec.ranks[1:]], dtype=torch.long, device=ids.device)
    tokens, head_p = fetch(ids[head, rank], probs[head, rank])  # the tree's one host read
    return [int(t) for t in tokens], [round(p, 6) for p in head_p]


class MedusaProposer(HeadsProposer):
    """Medusa's heads, all on the last hidden state, filling the planned tree."""

    def __init__(self, cfg: HeadTreeConfig, heads: MedusaHeads, calibration: list[list[float]] | None) -> None:
        super().__init__(cfg, len(heads.blocks), calibration, load_calibration)
        self.heads = heads

    def propose(self, run: Run, root: int) -> HeadsDraft:
        """Every node at once: head k's ranks from the same hidden state, placed by their rank paths."""
        drafts, head_p = propose(self.heads, run.pending_hidden, self.spec)
        return HeadsDraft([root, *drafts], head_p, self.spec)


class Medusa(TreeSpeculator):
    """One Medusa generation: its heads' proposer and the heads tree's verifier, in the tree methods' one step
    (methods.speculator.TreeSpeculator.step: propose → verify → accept → commit); the planned tree's nodes are the
    drafts, and the record lists each node's head (Hydra's generation is this one with its own record)."""

    DETAIL: ClassVar[type[MedusaDetail]] = MedusaDetail
    proposer: HeadsProposer

    def outcome(self, run: Run, draft: Any, v: Verified, w: Walk) -> Outcome:
        return path_outcome(v, w, lambda: self.proposer.record(self.DETAIL, run, draft, v, w))


def begin(
    run: Run, cfg: Config, heads: MedusaHeads | None = None, calibration: list[list[float]] | None = None
) -> Step:
    """The heads (given, else loaded once per folder) and the tree their calibration plans (models/medusa's)."""
    proposer = MedusaProposer(cfg, heads if heads is not None else get_heads(run.lm, cfg), calibration)
    return Medusa(proposer, proposer.verifier()).start(run)


generate = generator(CARD.name, Config, begin, "Decode with Medusa until EOS or max_new_tokens.")


def tiny_resources(lm: LoadedModel, num_heads: int = 3, seed: int = 0) -> dict[str, Any]:
    """Untrained heads (random W1 over the full vocabulary) and a decaying calibration, for any model.

    The contract test runs every method on a tiny random model through this; no trained heads needed.
    """
    vocab = lm.lm_head.get_parameter("weight").shape[0]
    heads = new_heads(
        lm,
        HeadsConfig(num_heads=num_heads, hidden_size=lm.hf.config.hidden_size, draft_vocab=vocab, model=lm.name),
        torch.arange(vocab, device=lm.device),
    )
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for k in range(len(heads.blocks)):  # the first residual block of each head
            heads.get_parameter(f"blocks.{k}.0.linear.weight").normal_(0.0, 0.3, generator=gen)
    heads = heads.to(lm.device).eval().requires_grad_(False)
    return {"config": Config(heads=num_heads), "heads": heads, "calibration": tiny_calibration(num_heads)}


def accepting_resources(lm: LoadedModel) -> dict[str, Any]:
    """tiny_resources with every residual block back at zero, so each head reads the target's own prediction off
    its hidden state: every draft is right on a model whose next token does not depend on its input."""
    kw = tiny_resources(lm)
    with torch.no_grad():
        for p in kw["heads"].blocks.parameters():
            p.zero_()
    return kw
