"""EAGLE's training objective: batches of (f_j, x_{j+1}) pairs, the head unrolled on its own drafts, the loss,
and the rank accuracy that measures it.

The head sees the pair (f_j, x_{j+1}) at position j and is trained to output f_{j+1}: SmoothL1 on the
next feature + 0.1 × CE on its tokens through the frozen LM head; the loss counts continuation
positions only. With `unroll` > 1 it also learns from features it drafted itself (HASS, EAGLE-3).
"""

from __future__ import annotations

import random
from collections import Counter, abc
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from specviz.core.model import LoadedModel
from specviz.heads.eagle import EagleHead
from specviz.training.shards import Sequence


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run (all of them go into the checkpoint, so resuming is exact)."""

    # The defaults made the committed head (models/eagle): 6,912 training sequences, 47 min on 1 core.
    epochs: float = 2.0  # passes over the training split (more data beats more epochs here)
    batch_tokens: int = 2048  # padded tokens per optimiser step
    lr: float = 1e-3  # peak AdamW learning rate (linear warm-up, cosine decay)
    warmup: int = 30  # warm-up steps
    # EAGLE: L = SmoothL1(features) + 0.1 × CE(tokens). A 1-epoch ablation on 1,728 sequences gave held-out
    # top-1 by depth 0.293/0.246/0.224 at 0.1, 0.302/0.262/0.225 at 1.0 and 0.302/0.260/0.224 at 3.0.
    ce_weight: float = 0.1
    noise: float = 0.2  # EAGLE: uniform noise U(-a/2, a/2) on input features, in units of their std
    draft_vocab: int = 8192  # most frequent continuation tokens drafted from (0 = full vocabulary)
    max_len: int = 512  # longer sequences are cut
    seed: int = 0
    unroll: int = 2  # > 1: also train depth-2… drafts made from the head's own features (see unrolled)
    unroll_weight: float = 0.5  # weight of each unrolled depth's loss
    # bf16 autocast (AMX units): the head's matmuls run about 4× faster; the weights and Adam stay fp32
    bf16: bool = False


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


def _depth_loss(
    out: torch.Tensor, tgt: torch.Tensor, weight: torch.Tensor, ce_weight: float
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float]:
    """SmoothL1 on predicted features + ce_weight × soft cross-entropy over the draft vocabulary."""
    reg = F.smooth_l1_loss(out, tgt)
    with torch.no_grad():
        p = torch.softmax(tgt @ weight.T, dim=-1)
    logq = torch.log_softmax(out @ weight.T, dim=-1)
    ce = -(p * logq).sum(-1).mean()
    acc = float((logq.argmax(-1) == p.argmax(-1)).float().mean())
    return reg + ce_weight * ce, reg, ce, acc


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


def loss_fn(
    head: EagleHead,
    lm: LoadedModel,
    b: dict[str, torch.Tensor],
    cfg: TrainConfig,
    feat_std: float,
    weight: torch.Tensor,
) -> tuple[torch.Tensor, dict[str, float]]:
    """EAGLE's loss on the true pairs; with cfg.unroll > 1 (as in HASS and EAGLE-3), plus unroll_weight ×
    the same loss on each deeper depth's drafts from the head's own features (see `unrolled`)."""
    feats = b["feats"]
    if cfg.noise > 0:
        feats = feats + (torch.rand_like(feats) - 0.5) * cfg.noise * feat_std
    with torch.no_grad():
        emb = lm.hf.get_input_embeddings()(b["tokens"]).float()
    parts: list[torch.Tensor] = []  # the loss at depth 1, 2, …
    logs: dict[str, float] = {}
    for d, out in enumerate(unrolled(head, feats, emb, max(1, cfg.unroll)), start=1):
        rows = b["mask"].clone()
        rows[:, : d - 1] = False  # the first d-1 rows have no drafted input yet
        part, reg, ce, acc = _depth_loss(out[rows], b["target"][rows], weight, cfg.ce_weight)
        parts.append(part)
        if d == 1:
            logs = {"l1": float(reg.detach()), "ce": float(ce.detach()), "acc": acc}
        else:
            logs[f"acc{d}"] = acc
    total = parts[0]
    for part in parts[1:]:
        total = total + cfg.unroll_weight * part
    return total, logs


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
    head: EagleHead, lm: LoadedModel, s: Sequence, weight: torch.Tensor, tok2draft: torch.Tensor, depths: int
) -> list[torch.Tensor]:
    """Rank of the target's next token in the draft at each depth, drafting from the head's own features."""
    ids, T = s.ids, len(s.ids) - 1
    emb = lm.hf.get_input_embeddings()(ids[1:]).float()[None]
    start, out = int(s.mask.float().argmax()), []
    for d, o in enumerate(unrolled(head, s.hidden[:-1].float()[None], emb, depths), start=1):
        logits = o[0] @ weight.T  # [T, Vd]
        rows = torch.arange(max(0, start + d - 2), T - 1)  # root N = i-d+2 is a continuation token
        tgt = tok2draft[ids[rows + 2]]
        hit = logits[rows].gather(1, tgt.clamp_min(0)[:, None])[:, 0]
        rank = (logits[rows] > hit[:, None]).sum(-1)
        out.append(torch.where(tgt >= 0, rank, torch.full_like(rank, 10**6)))
    return out


def rank_accuracy(
    head: EagleHead,
    lm: LoadedModel,
    seqs: abc.Sequence[Sequence],
    weight: torch.Tensor,
    depths: int = 4,
    ranks: int = 8,
) -> list[list[float]]:
    """acc[d][i] = P(the target's token is rank i of the depth-(d+1) draft), over the given sequences."""
    tok2draft = torch.full((lm.hf.config.vocab_size,), -1, dtype=torch.long)
    tok2draft[head.draft_ids] = torch.arange(head.draft_ids.numel())
    per_depth: list[list[torch.Tensor]] = [[] for _ in range(depths)]
    head.eval()
    for s in seqs:
        for d, r in enumerate(sequence_ranks(head, lm, s, weight, tok2draft, depths)):
            per_depth[d].append(r)
    head.train()
    acc = []
    for rs in per_depth:
        r = torch.cat(rs) if rs else torch.zeros(0, dtype=torch.long)
        acc.append([round(float((r == i).float().mean()), 4) if len(r) else 0.0 for i in range(ranks)])
    return acc
