"""Medusa-1's trainer: the data and the loss (frozen backbone, Σ_k 0.8^(k-1)·CE_k) for training.loop.

Head k at position t learns the target's own token t+1+k from the stored hidden state h_t: in the self-distilled
shards (training.distill) the continuation is the target's greedy text already; in teacher-forced feature shards
(training.features) the label is the target's argmax. Batches are random sets of positions, reshuffled every pass.
Hydra's trainer (training.hydra_train) is this one with heads that also read their branch.
"""

from __future__ import annotations

import functools
from collections import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from specviz.core.model import LoadedModel
from specviz.corpus.data import Data
from specviz.corpus.shards import Sequence
from specviz.heads import store
from specviz.heads.medusa import (
    HeadsConfig,
    MedusaHeads,
    frequent_tokens,
    load_heads,
    models_dir,
    new_heads,
    save_heads,
)
from specviz.training.trainer import Batch, TrainConfig, token_ranks

DECAY = 0.8  # head k's loss weight is DECAY**(k-1), as in Medusa
IGNORE = -100  # no target: the sequence ended before token t+1+k
OOV = -1  # the target is outside the draft vocabulary: not trained on, but a miss when calibrating
EVAL_BATCH = 1024  # held-out positions per forward when ranking


def target_tokens(s: Sequence) -> torch.Tensor:
    """The token the target itself would put at each position [L].

    Self-distilled continuations are the target's own greedy tokens already; fixed-dataset windows
    (specviz.corpus.features) carry the target's argmax, label[j] for position j + 1.
    """
    label = getattr(s, "label", None)
    if label is None:
        return s.ids
    return torch.cat([s.ids[:1], label[:-1].long()])


def positions(
    seqs: abc.Sequence[Sequence], num_heads: int, to_draft: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack training positions: hidden [N, H] (fp16) and draft-vocab targets [N, K].

    Position t is used when token t+1 (the root) is a continuation token; head k's target is the
    draft row of the target's token t+1+k, OOV outside the draft vocabulary, IGNORE past the end. In sampled
    text (the corpus) head k only learns where x_{t+1..t+k} are the target's own argmax tokens: it sees h_t
    alone, and at decode time it is only ever right on that greedy path, while off it the label depends on
    sampled tokens the head cannot see (IGNORE there; greedy text is on the path everywhere).
    """
    hs, ys = [], []
    for s in seqs:
        t = s.mask[1:].nonzero().flatten()  # roots t+1 that the target wrote (continuation / assistant)
        if len(t) == 0:
            continue
        n = len(s.ids)
        tokens = target_tokens(s)
        on = s.ids == tokens  # position j holds the token the target itself would put there
        path = torch.ones(len(t), dtype=torch.bool)  # x_{t+1..t+k} all on the greedy path so far
        tgt = torch.full((len(t), num_heads), IGNORE, dtype=torch.long)
        for k in range(1, num_heads + 1):
            path &= (t + k < n) & on[(t + k).clamp_max(n - 1)]
            j = t + 1 + k
            ok = (j < n) & path
            tgt[ok, k - 1] = to_draft[tokens[j[ok]]]
        hs.append(s.hidden[t])
        ys.append(tgt)
    return torch.cat(hs), torch.cat(ys)


def draft_map(vocab: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """token id → draft-vocab row, OOV outside it; [V]."""
    m = torch.full((vocab_size,), OOV, dtype=torch.long)
    m[vocab] = torch.arange(len(vocab))
    return m


def head_loss(
    logits: torch.Tensor, targets: torch.Tensor, teacher: torch.Tensor | None = None, soft: float = 0.0
) -> tuple[torch.Tensor, list[float]]:
    """Σ_k DECAY^(k-1) · CE_k over logits [B, K, Vd] and targets [B, K]; also each head's top-1 accuracy.

    With `teacher` (the model's own draft-vocabulary probabilities at each target, [B, K, Vd]) and
    soft > 0, CE_k = (1 - soft) · CE(hard token) + soft · CE(teacher distribution).
    """
    total = logits.new_zeros(())
    accs = []
    for k in range(logits.shape[1]):
        y = targets[:, k]
        ok = y >= 0
        if not ok.any():
            accs.append(float("nan"))
            continue
        ce = torch.nn.functional.cross_entropy(logits[ok, k], y[ok])
        if teacher is not None and soft > 0:
            valid = y != IGNORE  # OOV tokens still have a teacher distribution over the draft vocabulary
            logq = torch.log_softmax(logits[valid, k], dim=-1)
            ce = (1 - soft) * ce + soft * -(teacher[valid, k] * logq).sum(-1).mean()
        total = total + DECAY**k * ce
        accs.append(float((logits[ok, k].argmax(-1) == y[ok]).float().mean()))
    return total, accs


@torch.no_grad()
def teacher_probs(heads: MedusaHeads, hidden: torch.Tensor, targets: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """The model's own distribution over the draft vocabulary for each head's target token, [B, K, Vd].

    Row r of `hidden` is h_t; head k's target is token t+1+k, which the model predicts from h_{t+k},
    stored k rows further down in the same sequence (`positions` keeps each sequence contiguous).
    Rows whose target is IGNORE get a zero distribution.
    """
    k_heads = targets.shape[1]
    rows = (idx[:, None] + torch.arange(1, k_heads + 1)[None, :]).clamp_max(len(hidden) - 1)  # [B, K]
    valid = targets[idx] != IGNORE
    logits = hidden[rows].float() @ heads.proj.T  # [B, K, Vd]
    return torch.softmax(logits, dim=-1) * valid[..., None]


@dataclass(frozen=True)
class MedusaTrainer:
    """Medusa-1 heads: K ResBlocks on h_t, each drafting a token further ahead, over a frequency-ranked vocabulary."""

    kind: ClassVar[str] = "medusa"
    recipe: ClassVar[TrainConfig] = TrainConfig(epochs=1.5, floor=0.1, betas=(0.9, 0.999), clip=0.0)
    n_ranks: ClassVar[int] = 10
    models: ClassVar[Path] = models_dir()  # where `train` saves by default
    heads: int = 4  # K: head k predicts the token k+1 places after the one h_t produced
    layers: int = 2  # ResBlocks per head
    draft_vocab: int = 8192  # the most frequent continuation tokens the heads draft from
    batch: int = 256  # positions per optimiser step
    # weight of the soft target (the model's own distribution there) against the greedy token. A 1-epoch
    # ablation on 1,728 sequences (held-out top-1, heads 1-4) found no gain: 0.286/0.157/0.106/0.086 at 0,
    # 0.287/0.159/0.106/0.084 at 0.5, 0.283/0.157/0.105/0.082 at 1; so the committed heads use 0.
    soft: float = 0.0  # weight of the target's own distribution as the target, against its token (0-1)
    init: str = ""  # start from the heads in this folder (their vocabulary kept) instead of fresh ones
    shape = HeadsConfig  # the heads' config, their module's constructor, loader and saver, and their positions
    fresh, read, write = staticmethod(new_heads), staticmethod(load_heads), staticmethod(save_heads)
    stack = staticmethod(positions)

    def __post_init__(self) -> None:
        if self.heads < 1 or self.layers < 1 or self.batch < 1 or self.draft_vocab < 16:
            raise ValueError("--heads, --layers and --batch must be positive and --draft-vocab at least 16.")
        if not 0 <= self.soft <= 1:
            raise ValueError(f"--soft must be between 0 and 1, got {self.soft}.")

    def new_head(self, lm: LoadedModel, data: Data, seed: int) -> Any:
        """Fresh heads (W1 = 0: the model's own next-token predictor) over the sample's most frequent tokens."""
        if self.init:
            return self.load(lm, Path(self.init))
        tokens = torch.cat([s.ids[s.mask] for s in data.sample()])
        vocab = frequent_tokens(tokens, self.draft_vocab, sorted(lm.eos_ids))
        cfg = self.shape(self.heads, int(lm.hf.config.hidden_size), self.layers, len(vocab), lm.name)
        return self.fresh(lm, cfg, vocab)

    def rows(self, lm: LoadedModel, head: Any, seqs: abc.Sequence[Sequence]) -> tuple[torch.Tensor, ...]:
        """Every training position of seqs: (hidden [N, H], draft-vocabulary targets [N, K])."""
        size = max(int(lm.hf.config.vocab_size), max(int(s.ids.max()) for s in seqs) + 1)
        return self.stack(seqs, head.cfg.num_heads, draft_map(head.vocab.cpu(), size))

    def logits(self, head: Any, rows: tuple[torch.Tensor, ...], idx: torch.Tensor) -> torch.Tensor:
        """Draft logits [B, K, Vd] of the positions idx."""
        return head(rows[0][idx].float())

    def batches(self, lm: LoadedModel, head: Any, seqs: list[Sequence], seed: int) -> list[Batch]:
        """Random batches of positions (a new order every pass)."""
        rows = self.rows(lm, head, seqs)
        order = torch.randperm(len(rows[0]), generator=torch.Generator().manual_seed(seed))
        cut = [order[at : at + self.batch] for at in range(0, len(order), self.batch)]
        return [Batch(len(idx), functools.partial(dict, rows=rows, idx=idx)) for idx in cut]

    def loss(self, lm: LoadedModel, head: Any, b: dict) -> tuple[torch.Tensor, dict[str, float]]:
        """Σ_k 0.8^(k-1)·CE_k (mixed with the soft target when asked); each head's top-1 logged."""
        rows, idx = b["rows"], b["idx"]
        teacher = teacher_probs(head, rows[0], rows[-1], idx) if self.soft > 0 else None
        loss, accs = head_loss(self.logits(head, rows, idx).float(), rows[-1][idx], teacher, self.soft)
        return loss, {"loss": float(loss.detach()), **{f"acc{k}": a for k, a in enumerate(accs, start=1)}}

    @torch.no_grad()
    def ranks(self, lm: LoadedModel, head: Any, held: abc.Sequence[Sequence]) -> list[torch.Tensor]:
        """Rank of the target's token t+1+k under head k at every held-out position (-1: none there)."""
        rows = self.rows(lm, head, held)
        out = []
        for at in range(0, len(rows[0]), EVAL_BATCH):
            idx = torch.arange(at, min(at + EVAL_BATCH, len(rows[0])))
            y = rows[-1][idx]  # [B, K]; OOV never matches a rank, so it counts as a miss
            out.append(torch.where(y == IGNORE, -1, token_ranks(self.logits(head, rows, idx).float(), y)))
        return list(torch.cat(out).T)

    def save(self, lm: LoadedModel, head: Any, folder: Path, acc: list[list[float]], manifest: dict) -> Path:
        """The heads (bf16), their manifest, and the held-out table as calibration.json."""
        self.write(head, folder, torch.bfloat16, manifest)
        note = f"held-out: {manifest.get('heldout', 'the held-out set')}"
        return store.write_calibration(folder, acc, manifest["heldout_positions"], note, manifest["provenance"])

    def load(self, lm: LoadedModel, folder: Path) -> Any:
        """The heads saved in folder."""
        return self.read(lm, folder)
