"""Hydra's trainer: Medusa's (training.medusa_train: the same data, batches and loss Σ_k 0.8^(k-1)·CE), with heads
that also read their branch.

At root position t, head k gets h_t and the target's own tokens x_{t+1..t+k} (teacher forcing: at decode time
the branch's tokens are the ones drafted above the node, and a node is only ever accepted when they were the
target's). It trains in bf16 autocast by default (the CPU's AMX); decoding stays fp32.
"""

from __future__ import annotations

from collections import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from specviz.corpus.shards import Sequence
from specviz.heads.hydra import HydraConfig, load_heads, models_dir, new_heads, save_heads
from specviz.training.medusa_train import IGNORE, MedusaTrainer, target_tokens
from specviz.training.trainer import TrainConfig


def positions(
    seqs: abc.Sequence[Sequence], num_heads: int, to_draft: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """hidden [N, H] (fp16), branch tokens x_{t+1..t+K} [N, K] (0 past the end) and draft targets [N, K].

    The branch is the text's own tokens and the target the target's argmax after them, so in sampled text (the
    corpus) a head reads the very tokens its label was conditioned on (greedy text: the same thing)."""
    hs, bs, ys = [], [], []
    for s in seqs:
        t = s.mask[1:].nonzero().flatten()  # roots t+1 written by the target
        if len(t) == 0:
            continue
        n, tokens = len(s.ids), target_tokens(s)
        branch = torch.zeros((len(t), num_heads), dtype=torch.long)
        tgt = torch.full((len(t), num_heads), IGNORE, dtype=torch.long)
        for k in range(1, num_heads + 1):
            j = t + k  # x_{t+k}: the k-th token of the branch
            ok = j < n
            branch[ok, k - 1] = s.ids[j[ok]]
            ok2 = j + 1 < n
            tgt[ok2, k - 1] = to_draft[tokens[j[ok2] + 1]]
        hs.append(s.hidden[t])
        bs.append(branch)
        ys.append(tgt)
    return torch.cat(hs), torch.cat(bs), torch.cat(ys)


@dataclass(frozen=True)
class HydraTrainer(MedusaTrainer):
    """Hydra heads: Medusa's, but head k reads [h_t, e(x_{t+1}), …, e(x_{t+k})]."""

    kind: ClassVar[str] = "hydra"
    recipe: ClassVar[TrainConfig] = TrainConfig(epochs=1.5, floor=0.1, betas=(0.9, 0.999), clip=0.0, bf16=True)
    models: ClassVar[Path] = models_dir()
    layers: int = 1  # ResBlocks per head after its input projection
    shape = HydraConfig
    fresh, read, write = staticmethod(new_heads), staticmethod(load_heads), staticmethod(save_heads)
    stack = staticmethod(positions)

    def logits(self, head: Any, rows: tuple[torch.Tensor, ...], idx: torch.Tensor) -> torch.Tensor:
        """Draft logits [B, K, Vd] of the positions idx, each head given its branch's true tokens."""
        return head(rows[0][idx].float(), rows[1][idx])
