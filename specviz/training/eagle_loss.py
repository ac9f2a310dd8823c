"""What EAGLE-2's and EAGLE-3's trainers share: whole sequences in length-grouped batches of (f_j, x_{j+1}) pairs, the
head unrolled on its own outputs under the inference mask (training-time test, as in HASS and EAGLE-3), and held-out
ranks by draft depth, drafting from the head's own outputs. Their losses are in training.eagle_train and
training.eagle3_train.
"""

from __future__ import annotations

import functools
import random
from collections import Counter, abc
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import torch

from specviz.core.model import LoadedModel
from specviz.corpus.shards import Sequence
from specviz.heads.eagle import EagleHead, draft_weight, save_head
from specviz.training.trainer import Batch, summary, token_ranks

EVAL_DEPTHS = 6  # draft depths a held-out evaluation measures by default


def draft_vocab(seqs: abc.Sequence[Sequence], size: int, vocab: int) -> tuple[torch.Tensor | None, float]:
    """The `size` most frequent continuation tokens (sorted ids) and the share of continuations they cover."""
    counts = Counter(int(t) for s in seqs for t in s.ids[s.mask].tolist())
    total = sum(counts.values())
    if size <= 0 or size >= vocab:
        return None, 1.0
    top = [t for t, _ in counts.most_common(size)]
    top += [t for t in range(vocab) if t not in counts][: size - len(top)]  # pad a tiny corpus
    return torch.tensor(sorted(top)), sum(counts[t] for t in top) / max(1, total)


def batches(seqs: abc.Sequence[Sequence], batch_tokens: int, max_len: int, seed: int) -> list[list[int]]:
    """Group sequences of similar length so padding stays small; the order is shuffled by seed."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i].ids))
    out, cur, width = [], [], 0
    for i in order:
        w = min(len(seqs[i].ids), max_len)
        if cur and max(width, w) * (len(cur) + 1) > batch_tokens:
            out.append(cur)
            cur, width = [], 0
        cur.append(i)
        width = max(width, w)
    if cur:
        out.append(cur)
    random.Random(seed).shuffle(out)
    return out


def collate(seqs: abc.Sequence[Sequence], idx: list[int], max_len: int) -> dict[str, torch.Tensor]:
    """Right-padded pairs: feats f_j, tokens x_{j+1}, target f_{j+1}, loss mask on continuation targets."""
    width = min(max(len(seqs[i].ids) for i in idx), max_len) - 1
    h = seqs[idx[0]].hidden.shape[1]
    feats, target = torch.zeros(len(idx), width, h), torch.zeros(len(idx), width, h)
    tokens = torch.zeros(len(idx), width, dtype=torch.long)
    mask = torch.zeros(len(idx), width, dtype=torch.bool)
    for r, i in enumerate(idx):
        s = seqs[i]
        n = min(len(s.ids), max_len) - 1
        feats[r, :n], target[r, :n] = s.hidden[:n].float(), s.hidden[1 : n + 1].float()
        tokens[r, :n], mask[r, :n] = s.ids[1 : n + 1], s.mask[1 : n + 1]
    return {"feats": feats, "tokens": tokens, "target": target, "mask": mask}


def unrolled(head: EagleHead, feats: torch.Tensor, emb: torch.Tensor, depths: int) -> list[torch.Tensor]:
    """Head outputs [B, T, h] at depth 1 (true features) … depth `depths` (features the head drafted).

    At inference a depth-d draft row sees its true context plus its own earlier drafts, and its input
    feature is the head's previous prediction, not the target's. Depth d here reuses depth d-1's
    outputs, shifted one row, under the exact inference mask (`depth_mask`), so row i at depth d
    depends on true features at rows ≤ i-(d-1) only (tested).
    """
    from transformers import DynamicCache  # the stock cache: its appends are autograd-safe

    B, T = feats.shape[:2]
    pos = torch.arange(T).expand(B, -1)
    cache = DynamicCache(config=head.config.llama_config())
    outs: list[torch.Tensor] = []
    for d in range(1, depths + 1):
        if outs:  # row i's input is row i-1's prediction one depth up
            feats = torch.cat([torch.zeros_like(outs[-1][:, :1]), outs[-1][:, :-1]], dim=1)
        # a boolean mask (True = may attend) is valid whatever dtype autocast picks for the queries
        outs.append(head(feats, emb, pos, cache, depth_mask(T, d)[None, None]))
    return outs


def noised(x: torch.Tensor, amount: float, spread: torch.Tensor | float, seed: int) -> torch.Tensor:
    """x plus uniform noise U(-amount/2, amount/2) · spread, drawn from `seed` (the depth-1 inputs only: deeper
    depths read the head's own outputs)."""
    if amount <= 0:
        return x
    noise = torch.rand(x.shape, generator=torch.Generator().manual_seed(seed))
    return x + (noise - 0.5) * amount * spread


def top_hits(logq: torch.Tensor, p: torch.Tensor, k: int) -> torch.Tensor:
    """Whether the target's token (argmax of p [R, V]) is among the draft's top-k (logq [R, V]), bool [R]."""
    top = logq.topk(min(k, logq.shape[-1]), dim=-1).indices
    return (top == p.argmax(-1, keepdim=True)).any(-1)


def aligned(alive: torch.Tensor, hit: torch.Tensor) -> torch.Tensor:
    """GRIFFIN's token-alignment mask one depth deeper, bool [B, T]: row i stays while its ancestor one depth up
    (row i-1) was aligned and the true token there was in the head's top-k (`hit`; True where unmeasured)."""
    out = torch.zeros_like(alive)
    out[:, 1:] = alive[:, :-1] & hit[:, :-1]
    return out


def depth_mask(T: int, d: int) -> torch.Tensor:
    """Keys [true pairs | depth-2 … depth-d drafts] a depth-d draft row may see, bool [T, d·T].

    Row i drafts from its own features: it sees true pairs j ≤ i-(d-1), its depth-e ancestors at
    row i-(d-e), and itself, exactly as at inference.
    """
    see = torch.zeros(T, d * T, dtype=torch.bool)
    i = torch.arange(T)
    see[:, :T] = i[None, :] <= (i[:, None] - (d - 1))
    for e in range(2, d + 1):
        rows = i[i - (d - e) >= 0]
        see[rows, (e - 1) * T + rows - (d - e)] = True
    return see


@torch.no_grad()
def sequence_ranks(
    head: EagleHead,
    lm: LoadedModel,
    s: Sequence,
    feats: torch.Tensor,
    read: Callable[[torch.Tensor], torch.Tensor],
    weight: torch.Tensor,
    tok2draft: torch.Tensor,
    depths: int,
) -> list[torch.Tensor]:
    """Rank of the target's next token in the draft at each depth, drafting from the head's own outputs: feats
    [1, T, h] are the head's inputs at depth 1, read(out) what the LM-head rows `weight` score (MISS outside the
    draft vocabulary)."""
    ids, T = s.ids, len(s.ids) - 1
    emb = lm.hf.get_input_embeddings()(ids[1:]).float()[None]
    start, out = int(s.mask.float().argmax()), []
    for d, o in enumerate(unrolled(head, feats, emb, depths), start=1):
        logits = read(o[0]) @ weight.T  # [T, Vd]
        rows = torch.arange(max(0, start + d - 2), T - 1)  # root N = i-d+2 is a continuation token
        out.append(token_ranks(logits[rows], tok2draft[ids[rows + 2]]))
    return out


def draft_index(head: EagleHead, vocab: int) -> torch.Tensor:
    """Token id → the head's draft-vocabulary row, -1 outside it; [vocab]."""
    ids = head.draft_ids
    out = torch.full((vocab,), -1, dtype=torch.long, device=ids.device)
    out[ids] = torch.arange(ids.numel(), device=ids.device)
    return out


@dataclass(frozen=True)
class EagleFamily:
    """The settings and steps EAGLE-2's and EAGLE-3's trainers share (each adds its head and its loss)."""

    n_ranks: ClassVar[int] = 8
    read: ClassVar[Callable[..., Any]]  # the kind's head loader: (folder, hf_config) -> head
    batch_tokens: int = 2048  # padded tokens per optimiser step
    max_len: int = 512  # longer sequences are cut
    draft_vocab: int = 8192  # most frequent continuation tokens drafted from (0 = the full vocabulary)
    unroll: int = 2  # training-time test: also train depth-2… drafts made from the head's own outputs
    unroll_weight: float = 0.5  # weight of the unrolled depths' losses
    unroll_geometric: bool = False  # depth d's loss weighs unroll_weight^(d-1) (off: unroll_weight past depth 1)
    align_top: int = 0  # GRIFFIN's mask: a depth-d row counts while the earlier true tokens were in the top-k (0: off)
    depths: int = EVAL_DEPTHS  # draft depths measured on held-out data

    def __post_init__(self) -> None:
        if self.batch_tokens < 64 or self.max_len < 2 or self.depths < 1 or self.draft_vocab < 0:
            raise ValueError("--batch-tokens must be at least 64, --max-len 2, --depths 1, --draft-vocab 0.")
        if not 1 <= self.unroll <= 8 or not 0 < self.unroll_weight <= 1:
            raise ValueError(
                f"--unroll must be 1-8 and --unroll-weight in (0, 1], got {self.unroll}, {self.unroll_weight}."
            )
        if not 0 <= self.align_top <= 64:
            raise ValueError(f"--align-top must be 0 (off) to 64, got {self.align_top}.")

    def depth_weights(self) -> list[float]:
        """The loss weight of each trained depth 1..unroll: 1, then unroll_weight^(d-1) or unroll_weight."""
        w = self.unroll_weight
        return [1.0] + [w ** (d - 1) if self.unroll_geometric else w for d in range(2, self.unroll + 1)]

    def batches(self, lm: LoadedModel, head: Any, seqs: list[Sequence], seed: int) -> list[Batch]:
        """Sequences of similar length together, in a seeded order; each batch collated when the loop reaches it."""
        ctx = self.context(lm, head, seqs)
        plan = batches(seqs, self.batch_tokens, self.max_len, seed)
        return [
            Batch(
                sum(int(seqs[i].mask[1 : self.max_len].sum()) for i in idx),
                functools.partial(self.collate, seqs, idx, ctx | {"seed": seed * 100_003 + j}),
            )
            for j, idx in enumerate(plan)
        ]

    def context(self, lm: LoadedModel, head: Any, seqs: list[Sequence]) -> dict:
        """What every batch of a chunk shares: the frozen LM-head rows of the draft vocabulary [Vd, h]."""
        return {"weight": draft_weight(head, lm.lm_head, torch.float32)}

    def collate(self, seqs: list[Sequence], idx: list[int], ctx: dict) -> dict:
        """One batch's tensors (training.eagle_loss.collate) with the chunk's shared ones."""
        return collate(seqs, idx, self.max_len) | ctx

    def features(self, lm: LoadedModel, head: Any, s: Sequence) -> torch.Tensor:
        """The head's depth-1 inputs along a held-out sequence, [1, T, h]: the target's features."""
        return s.hidden[:-1].float()[None]

    @torch.no_grad()
    def ranks(self, lm: LoadedModel, head: Any, held: abc.Sequence[Sequence]) -> list[torch.Tensor]:
        """Rank of the target's token at every held-out position and draft depth 1..depths."""
        weight = draft_weight(head, lm.lm_head, torch.float32)
        tok2draft = draft_index(head, lm.hf.config.vocab_size)
        read = getattr(head, "readout", lambda out: out)
        per_depth: list[list[torch.Tensor]] = [[] for _ in range(self.depths)]
        for s in held:
            feats = self.features(lm, head, s)
            for d, r in enumerate(sequence_ranks(head, lm, s, feats, read, weight, tok2draft, self.depths)):
                per_depth[d].append(r)
        return [torch.cat(r) if r else torch.zeros(0, dtype=torch.long) for r in per_depth]

    def save(self, lm: LoadedModel, head: Any, folder: Path, acc: list[list[float]], manifest: dict) -> Path:
        """The head (bf16) with its held-out table and a summary of its training in config.json, and its manifest."""
        head.config = replace(head.config, calibration=acc, train=summary(manifest))
        return save_head(head, folder, manifest=manifest)

    def load(self, lm: LoadedModel, folder: Path) -> Any:
        """The head saved in folder."""
        return self.read(folder, lm.hf.config)
