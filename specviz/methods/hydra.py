"""Hydra: Medusa's sparse tree, but each head reads the tokens drafted above its node (sequentially dependent heads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from specviz.core.details import HydraDetail
from specviz.core.host import fetch
from specviz.core.model import LoadedModel
from specviz.heads.hydra import HydraConfig, HydraHeads, cached_heads, load_calibration, models_dir, new_heads
from specviz.methods.base import Card, Run, Step, generator
from specviz.methods.medusa import Medusa
from specviz.trees.head_tree import HeadsDraft, HeadsProposer, HeadTreeConfig, tiny_calibration
from specviz.trees.tree import TreeSpec

CARD = Card(
    name="hydra",
    label="Hydra",
    summary="Medusa's heads, but each one reads the tokens already guessed on its branch; one tree pass checks them.",
    colour="#882255",
    order=4,
    head="hydra",
    head_label="Hydra heads",
    models=models_dir(),
    held_out=True,
    builds_on="medusa",
)


@dataclass(frozen=True)
class Config(HeadTreeConfig):
    """Hydra settings: Medusa's, so the two compare at the same tree size."""


def propose(
    heads: HydraHeads, hidden: torch.Tensor, spec: TreeSpec, root: int
) -> tuple[list[int], list[float], list[list[int]]]:
    """Fill the tree depth by depth: node (i1..ik) is rank ik of head k given the tokens on the path above it.

    Returns every node's token (root first), each drafted node's head probability, and the branch each head
    read (root .. parent). One batched call per depth: head k runs once for all depth-(k-1) parents.
    """
    tokens, head_p = [root] + [0] * (len(spec) - 1), [0.0] * (len(spec) - 1)
    reads: list[list[int]] = [[] for _ in range(len(spec) - 1)]
    with torch.inference_mode():
        for depth in range(1, max(spec.depths) + 1):
            kids = [j for j in range(1, len(spec)) if spec.depths[j] == depth]
            parents = sorted({spec.parents[j] for j in kids})
            paths = [[tokens[a] for a in spec.path_to(p)] for p in parents]
            branch = torch.tensor(paths, device=hidden.device)
            logits = heads.head_logits(depth, hidden.expand(len(parents), -1), branch)
            probs = torch.softmax(logits.float(), dim=-1)
            width = 1 + max(spec.ranks[j][-1] for j in kids)
            top_p, top_i = probs.topk(width, dim=-1)
            # one host read a depth: the next depth's heads read these tokens on their branches
            ids, ps = fetch(heads.vocab[top_i], top_p)
            for j in kids:
                row, rank = parents.index(spec.parents[j]), spec.ranks[j][-1]
                tokens[j] = int(ids[row * width + rank])
                head_p[j - 1] = round(ps[row * width + rank], 6)
                reads[j - 1] = paths[row]
    return tokens, head_p, reads


class HydraProposer(HeadsProposer):
    """Hydra's heads, each reading the branch above its node, filling the planned tree (Hydra's own calibration)."""

    def __init__(self, cfg: Config, heads: HydraHeads, calibration: list[list[float]] | None) -> None:
        super().__init__(cfg, len(heads.heads), calibration, load_calibration)
        self.heads = heads

    def propose(self, run: Run, root: int) -> HeadsDraft:
        """Depth by depth: each head reads the tokens drafted above its node."""
        tokens, head_p, reads = propose(self.heads, run.pending_hidden, self.spec, root)
        return HeadsDraft(tokens, head_p, self.spec, reads)


class Hydra(Medusa):
    """One Hydra generation: its heads' proposer and the heads tree's verifier (Medusa's), in the tree methods' one
    step (methods.speculator.TreeSpeculator.step: propose → verify → accept → commit)."""

    DETAIL = HydraDetail


def begin(run: Run, cfg: Config, heads: HydraHeads | None = None, calibration: list[list[float]] | None = None) -> Step:
    """The heads (given, else loaded once per folder) and the tree their calibration plans (models/hydra's)."""
    heads = heads if heads is not None else cached_heads(run.lm, cfg.heads_dir or None, cfg.heads)
    proposer = HydraProposer(cfg, heads, calibration)
    return Hydra(proposer, proposer.verifier()).start(run)


generate = generator(CARD.name, Config, begin, "Decode with Hydra until EOS or max_new_tokens.")


def tiny_resources(lm: LoadedModel, num_heads: int = 3, seed: int = 0) -> dict[str, Any]:
    """Untrained heads (random input projections over the full vocabulary) and a decaying calibration."""
    vocab = lm.lm_head.get_parameter("weight").shape[0]
    cfg = HydraConfig(num_heads=num_heads, hidden_size=lm.hf.config.hidden_size, draft_vocab=vocab, model=lm.name)
    heads = new_heads(lm, cfg, torch.arange(vocab))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for k in range(num_heads):  # random reads of the branch's embeddings, so the branch matters
            w = heads.get_parameter(f"heads.{k}.inp.weight")
            w.add_(torch.randn(w.shape, generator=gen) * 0.3)
    heads = heads.to(lm.device, torch.float32).eval().requires_grad_(False)
    return {"config": Config(heads=num_heads), "heads": heads, "calibration": tiny_calibration(num_heads)}


def accepting_resources(lm: LoadedModel) -> dict[str, Any]:
    """tiny_resources with each head's input projection back at the identity on h (the branch unread), so each
    head reads the target's own prediction: every draft is right on a model whose next token does not depend on
    its input."""
    kw = tiny_resources(lm)
    with torch.no_grad():
        for head in kw["heads"].heads:
            w = head.inp.weight
            w.zero_()
            w[:, : w.shape[0]].diagonal().fill_(1.0)
            head.inp.bias.zero_()
    return kw
