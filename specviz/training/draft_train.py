"""The speculative-sampling draft's trainer: teacher-forced windows, and the target's whole next-token distribution
at T = 1 as the target (heads.draft), for training.loop.

Each position t where the target wrote token t+1 (an answer token) is trained to put the target's probability on
each of its draft-vocabulary tokens: loss = -Σ_{i in S} p_T(i | ≤t) · log q(i | ≤t), the cross-entropy to p
restricted to the draft vocabulary S (KL(p‖q) over S up to a constant; mass outside S cannot be drafted). Matching
the distribution at T = 1, not just its argmax, keeps the draft matched at every sampling temperature. The target's
p comes from the stored final hidden state through its frozen LM head (a feature or self-distilled shard carries
it), so no second pass of the target is needed; the draft runs on the target's own (frozen) token embeddings.
"""

from __future__ import annotations

import functools
from collections import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from specviz.core.model import LoadedModel
from specviz.core.paths import DRAFT_DIR, EAGLE_DIR
from specviz.corpus.data import Data
from specviz.corpus.shards import Sequence
from specviz.heads import draft as draft_head
from specviz.heads.eagle import HeadError, load_head
from specviz.heads.medusa import frequent_tokens
from specviz.training.medusa_train import draft_map
from specviz.training.trainer import Batch, TrainConfig, summary, token_ranks


def _layers(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


@dataclass(frozen=True)
class DraftTrainer:
    """A few decoder layers at the target's width, started from the target's own, over EAGLE's draft vocabulary."""

    kind: ClassVar[str] = "draft"
    recipe: ClassVar[TrainConfig] = TrainConfig(epochs=1.0, lr=3e-4, floor=0.1, clip=1.0)
    n_ranks: ClassVar[int] = 8
    models: ClassVar[Path] = DRAFT_DIR
    init_layers: str = "0,1"  # the target layers the draft's layers start from (their count is its depth)
    draft_vocab: int = 8192  # rows of its head: EAGLE's frequency-ranked ids (or the data's most frequent)
    batch_tokens: int = 2048  # tokens per optimiser step (windows of similar length, right-padded)
    init: str = ""  # continue from the draft in this folder (its layers and rows kept) instead of the target's layers

    def __post_init__(self) -> None:
        if not _layers(self.init_layers) or min(_layers(self.init_layers)) < 0:
            raise ValueError(f"--init-layers must list layer numbers, e.g. 0,1, got {self.init_layers!r}.")
        if self.draft_vocab < 16 or self.batch_tokens < 16:
            raise ValueError("--draft-vocab and --batch-tokens must be at least 16.")

    def vocabulary(self, lm: LoadedModel, data: Data) -> torch.Tensor:
        """EAGLE's draft ids when its head is there with this size, else the data's most frequent tokens."""
        try:
            ids = load_head(EAGLE_DIR, lm.hf.config).draft_ids
            if len(ids) == self.draft_vocab:
                return ids
        except HeadError:  # no EAGLE head for this model: the data decides
            pass
        tokens = torch.cat([s.ids[s.mask] for s in data.sample()])
        return frequent_tokens(tokens, self.draft_vocab, sorted(lm.eos_ids))

    def new_head(self, lm: LoadedModel, data: Data, seed: int) -> Any:
        """The target's layers `init_layers` over the draft vocabulary, or the saved draft in `init` (more data for
        a trained draft: its curve starts where the last one ended)."""
        if self.init:
            return draft_head.load_draft(lm, Path(self.init)).float().train()
        layers = _layers(self.init_layers)
        if max(layers) >= len(lm.hf.model.layers):
            raise ValueError(f"--init-layers {self.init_layers} names a layer the model does not have.")
        return draft_head.from_target(lm, layers, self.vocabulary(lm, data)).train()

    def batches(self, lm: LoadedModel, head: Any, seqs: list[Sequence], seed: int) -> list[Batch]:
        """Windows sorted by length into batches of about batch_tokens tokens, in a seeded order."""
        order = sorted(range(len(seqs)), key=lambda i: len(seqs[i].ids))
        groups, cur = [], []
        for i in order:
            if cur and (len(cur) + 1) * len(seqs[i].ids) > self.batch_tokens:
                groups.append(cur)
                cur = []
            cur.append(i)
        groups += [cur] if cur else []
        perm = torch.randperm(len(groups), generator=torch.Generator().manual_seed(seed)).tolist()
        out = []
        for g in (groups[p] for p in perm):
            part = [seqs[i] for i in g]
            out.append(Batch(sum(int(s.mask[1:].sum()) for s in part), functools.partial(dict, seqs=part)))
        return out

    def forward(self, lm: LoadedModel, head: Any, seqs: abc.Sequence[Sequence]) -> tuple[torch.Tensor, ...]:
        """Draft logits [B, T, Vd], the target's p over the draft rows [B, T, Vd], its argmax [B, T], and the mask
        [B, T] of positions whose next token the target wrote."""
        width = max(len(s.ids) for s in seqs)
        ids = torch.zeros(len(seqs), width, dtype=torch.long)
        hidden = torch.zeros(len(seqs), width, int(lm.hf.config.hidden_size))
        mask = torch.zeros(len(seqs), width, dtype=torch.bool)
        for r, s in enumerate(seqs):
            ids[r, : len(s.ids)], hidden[r, : len(s.ids)] = s.ids, s.hidden.float()
            mask[r, : len(s.ids) - 1] = s.mask[1:]
        with torch.no_grad():
            embeds = lm.hf.model.embed_tokens(ids.to(lm.device)).float()
            rope = lm.hf.model.rotary_emb(embeds, position_ids=torch.arange(width).view(1, -1).to(lm.device))
            full = hidden.to(lm.device) @ lm.lm_head.get_parameter("weight").float().T  # [B, T, V]
            p = torch.softmax(full, -1)
        return head(embeds, rope).float(), p[..., head.draft_ids], full.argmax(-1), mask.to(lm.device)

    def loss(self, lm: LoadedModel, head: Any, b: dict) -> tuple[torch.Tensor, dict[str, float]]:
        """-Σ_S p log q at the answer positions; the draft's top-1 agreement with the target's argmax logged."""
        logits, p, top, mask = self.forward(lm, head, b["seqs"])
        logq = torch.log_softmax(logits[mask], -1)
        loss = -(p[mask] * logq).sum(-1).mean()
        agree = (head.draft_ids[logits[mask].argmax(-1)] == top[mask]).float().mean()
        return loss, {"loss": float(loss.detach()), "acc1": float(agree)}

    @torch.no_grad()
    def ranks(self, lm: LoadedModel, head: Any, held: abc.Sequence[Sequence]) -> list[torch.Tensor]:
        """Rank of the target's own next token (its argmax) among the draft's rows; a miss outside them."""
        row = draft_map(head.draft_ids.cpu(), int(lm.hf.config.vocab_size))  # OOV (-1): a miss
        out = []
        for at in range(0, len(held), 8):
            logits, _p, top, mask = self.forward(lm, head, held[at : at + 8])
            out.append(token_ranks(logits[mask], row.to(top.device)[top[mask]]).cpu())
        return [torch.cat(out)]

    def save(self, lm: LoadedModel, head: Any, folder: Path, acc: list[list[float]], manifest: dict) -> Path:
        """The draft in bf16 with its manifest (its curve and held-out top-1 agreement with the target)."""
        return draft_head.save_draft(head, folder, torch.bfloat16, manifest, summary(manifest))

    def load(self, lm: LoadedModel, folder: Path) -> Any:
        return draft_head.load_draft(lm, folder).float()
