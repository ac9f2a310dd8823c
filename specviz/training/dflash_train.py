"""Train the DFlash block drafter (`python -m specviz train dflash --data corpus`): blocks drawn at random anchors.

Data are the committed corpus's windows (the target's own answers, token ids only): the target's features are
recomputed in every batch, one teacher-forced pass of the target (under the loop's bf16 autocast where the CPU
computes bf16), which gives both what the drafter reads (the inputs of the three fused layers at every position)
and what it learns (the target's next-token distribution at every position, over the draft vocabulary).

A training example is a block at an anchor s inside an answer: the drafter sees the context features of
positions < s, the embedding of x_s and block - 1 mask embeddings, and block position i learns the target's
distribution after x_{≤ s+i-1}, as at inference, where the root x_s is the last committed token. Many blocks of
one window train in one forward: each block's queries see the context before its own anchor and their own block,
under one attention mask (the paper's training trick, here without its sparse kernel). Position i's loss weighs
exp(-(i - 1) / decay): an early miss ends the accepted run, so early positions matter more (the paper's decay).

The held-out table is each block position's rank of the target's greedy token, anchored at every answer position.
"""

from __future__ import annotations

import functools
import math
from collections import abc
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar

import torch

from specviz.core.model import LoadedModel
from specviz.corpus.data import Data, in_memory
from specviz.corpus.features import corpus_windows
from specviz.corpus.shards import Sequence
from specviz.heads.dflash import DEFAULT_DIR, DFlashHead, load_head, new_head, save_head, warm_start
from specviz.heads.eagle import draft_weight
from specviz.training.eagle_loss import batches, draft_index, draft_vocab
from specviz.training.trainer import Batch, TrainConfig, summary, token_ranks


def corpus_data(max_len: int, per_conversation: int = 2) -> Data:
    """The committed corpus's windows as token ids and answer masks, held in memory (features are recomputed)."""
    seqs = [
        Sequence(torch.tensor(ids), torch.empty(len(ids), 0), torch.tensor(mask))
        for _source, ids, mask in corpus_windows(max_len, per_conversation)
    ]
    return in_memory(seqs, {"kind": "corpus ids", "windows": len(seqs), "max_len": max_len})


def anchors(mask: torch.Tensor, n: int, every: int, gen: torch.Generator) -> torch.Tensor:
    """One anchor per `every` answer positions of a row (mask [T], its true length n): s ≥ 1 whose next token is an
    answer token, drawn without replacement; sorted."""
    ok = torch.zeros(len(mask), dtype=torch.bool)
    ok[1 : n - 1] = mask[2:n]
    where = ok.nonzero()[:, 0]
    k = math.ceil(len(where) / every)
    return where[torch.randperm(len(where), generator=gen)[:k]].sort().values


def block_mask(starts: torch.Tensor, T: int, block: int) -> torch.Tensor:
    """[R, 1, N·block, T + N·block] bool: block b's queries see context positions < its anchor and their own block
    (an anchor of -1 pads: it sees its own block only)."""
    R, N = starts.shape
    ctx = torch.arange(T)[None, None, :] < starts[:, :, None]  # [R, N, T]
    own = torch.eye(N, dtype=torch.bool)[None].expand(R, N, N)
    see = torch.cat([ctx, own], dim=-1).repeat_interleave(block, dim=1)  # [R, N·block, T + N]
    see = torch.cat([see[..., :T], see[..., T:].repeat_interleave(block, dim=-1)], dim=-1)
    return see[:, None]


def collate(seqs: abc.Sequence[Sequence], idx: list[int], max_len: int, every: int, seed: int) -> dict:
    """Right-padded ids [R, T], answer masks, true lengths and each row's anchors [R, N] (-1 pads)."""
    gen = torch.Generator().manual_seed(seed)
    T = min(max(len(seqs[i].ids) for i in idx), max_len)
    ids, mask = torch.zeros(len(idx), T, dtype=torch.long), torch.zeros(len(idx), T, dtype=torch.bool)
    lengths, picks = [], []
    for r, i in enumerate(idx):
        n = min(len(seqs[i].ids), T)
        ids[r, :n], mask[r, :n] = seqs[i].ids[:n], seqs[i].mask[:n]
        lengths.append(n)
        picks.append(anchors(mask[r], n, every, gen))
    starts = torch.full((len(idx), max(1, max(len(p) for p in picks))), -1, dtype=torch.long)
    for r, p in enumerate(picks):
        starts[r, : len(p)] = p
    return {"ids": ids, "mask": mask, "lengths": torch.tensor(lengths), "starts": starts}


def teacher(lm: LoadedModel, ids: torch.Tensor, layers: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """One teacher-forced pass: the inputs of `layers` [R, T, 3h] and the final hidden states [R, T, h]."""
    with torch.no_grad():
        out = lm.hf.model(input_ids=ids.to(lm.device), output_hidden_states=True, use_cache=False)
    return torch.cat([out.hidden_states[i] for i in layers], dim=-1).float(), out.last_hidden_state.float()


def block_outputs(head: DFlashHead, lm: LoadedModel, ids: torch.Tensor, layers: torch.Tensor, starts: torch.Tensor):
    """The drafter's normed outputs [R, N, block, h] for blocks at anchors `starts` over a window's features."""
    R, T = ids.shape
    block, N = head.config.block, starts.shape[1]
    s = starts.clamp_min(0)
    roots = lm.hf.get_input_embeddings()(ids.gather(1, s)).float()  # [R, N, h]
    c = head.fused(layers)  # [R, T, h]
    last = c.gather(1, (s - 1).clamp_min(0)[:, :, None].expand(R, N, c.shape[-1]))  # the feature before each root
    x = head.block_inputs(roots, block, last)
    positions = (s[:, :, None] + torch.arange(block)).view(R, N * block)
    context = head.context(c, torch.arange(T).expand(R, T))
    return head(x, positions, context, block_mask(starts, T, block)).view(R, N, block, -1)


@dataclass(frozen=True)
class DFlashTrainer:
    """The DFlash block drafter: blocks at random answer anchors, one forward each window, decaying position loss."""

    kind: ClassVar[str] = "dflash"
    recipe: ClassVar[TrainConfig] = TrainConfig(epochs=1.0, bf16=True)
    n_ranks: ClassVar[int] = 8
    models: ClassVar[Path] = DEFAULT_DIR
    data_dir: ClassVar[str] = "corpus"
    reads_ids: ClassVar[bool] = True  # `--data corpus` is the corpus's token ids: this trainer makes its features
    batch_tokens: int = 2048  # padded tokens per optimiser step
    max_len: int = 512  # longer windows are cut
    draft_vocab: int = 8192  # most frequent continuation tokens drafted from (0 = the full vocabulary)
    block: int = 8  # positions drafted in one pass: the root and block - 1 masked ones
    depth: int = 1  # the drafter's decoder layers
    decay: float = 4.0  # block position i's loss weighs exp(-(i - 1) / decay)
    anchor_every: int = 4  # one block per this many answer tokens of a window (blocks overlap below `block`)
    root_feature: bool = False  # the root's input also reads the context feature before it (not in the paper)
    root_everywhere: bool = False  # every masked position's input adds the root's, with its own mask embedding
    kv_heads: int = 0  # the drafter's key/value heads (0: the target's 3; 9: full-width values)
    init: str = ""  # an EAGLE-3 head folder whose fusion, attention and MLP start training (dflash.warm_start)

    def __post_init__(self) -> None:
        if self.batch_tokens < 64 or self.max_len < 8 or self.draft_vocab < 0:
            raise ValueError("--batch-tokens must be at least 64, --max-len 8, --draft-vocab 0.")
        if not (2 <= self.block <= 16 and 1 <= self.depth <= 8 and self.decay > 0 and self.anchor_every >= 1):
            raise ValueError("--block must be 2-16, --depth 1-8, --decay > 0 and --anchor-every >= 1.")

    def own_data(self) -> Data:
        """What `--data corpus` means for this trainer: the corpus's windows, ids only (corpus_data)."""
        return corpus_data(self.max_len)

    def new_head(self, lm: LoadedModel, data: Data, seed: int) -> DFlashHead:
        """A fresh drafter over the data's most frequent answer tokens (warm-started from `init` when given)."""
        draft_ids, _coverage = draft_vocab(data.sample(), self.draft_vocab, lm.hf.config.vocab_size)
        shape = {"block": self.block, "depth": self.depth, "root_feature": self.root_feature, "kv_heads": self.kv_heads}
        shape["root_everywhere"] = self.root_everywhere
        head = new_head(lm.hf.config, lm.name, draft_ids, seed, **shape)
        if self.init:
            warm_start(head, self.init)
        return head

    def batches(self, lm: LoadedModel, head: Any, seqs: list[Sequence], seed: int) -> list[Batch]:
        """Windows of similar length together, in a seeded order; anchors drawn when the loop reaches a batch."""
        plan = batches(seqs, self.batch_tokens, self.max_len, seed)
        make = functools.partial(collate, seqs, max_len=self.max_len, every=self.anchor_every)
        return [
            Batch(sum(int(seqs[i].mask[: self.max_len].sum()) for i in idx), functools.partial(make, idx, seed=j))
            for j, idx in enumerate(plan)
        ]

    def loss(self, lm: LoadedModel, head: Any, b: dict) -> tuple[torch.Tensor, dict[str, float]]:
        """Σ_i exp(-(i-1)/decay) · CE(target's distribution, drafter's) at block positions i = 1 … block - 1."""
        layers, final = teacher(lm, b["ids"], head.config.layers)
        out = block_outputs(head, lm, b["ids"], layers, b["starts"])
        weight, starts = draft_weight(head, lm.lm_head, torch.float32), b["starts"]
        total, logs = torch.zeros(()), {}
        for i in range(1, head.config.block):
            at = starts + i  # the position whose token block position i drafts
            ok = (starts >= 0) & (at < b["lengths"][:, None])
            ok &= b["mask"].gather(1, at.clamp(max=b["ids"].shape[1] - 1))
            rows = ok.nonzero()  # [K, 2] (row, block)
            if not len(rows):
                continue
            with torch.no_grad():
                p = torch.softmax(final[rows[:, 0], at[rows[:, 0], rows[:, 1]] - 1] @ weight.T, dim=-1)
            logq = torch.log_softmax((out[rows[:, 0], rows[:, 1], i] @ weight.T).float(), dim=-1)
            ce = -(p * logq).sum(-1).mean()
            total = total + math.exp(-(i - 1) / self.decay) * ce
            if i <= 3:
                logs[f"ce{i}"], logs[f"acc{i}"] = (
                    float(ce.detach()),
                    float((logq.argmax(-1) == p.argmax(-1)).float().mean()),
                )
        logs["loss"] = float(total.detach())
        return total, logs

    @torch.no_grad()
    def ranks(self, lm: LoadedModel, head: Any, held: abc.Sequence[Sequence]) -> list[torch.Tensor]:
        """Rank of the target's token at every block position 1 … block - 1, a block anchored at every answer
        position of every held-out sequence (its layer inputs computed once, in the model's own dtype)."""
        weight, tok2draft = draft_weight(head, lm.lm_head, torch.float32), draft_index(head, lm.hf.config.vocab_size)
        per: list[list[torch.Tensor]] = [[] for _ in range(head.config.block - 1)]
        for s in held:
            if s.layers is None:
                s.layers = lm.forward_layers(s.ids.tolist(), lm.new_cache(), tuple(head.config.layers))[2].half()
            T, start = len(s.ids), int(s.mask.float().argmax())
            starts = torch.arange(max(1, start - 1), T - 1)[None]
            out = block_outputs(head, lm, s.ids[None], s.layers[None].float(), starts)[0]  # [N, block, h]
            for i in range(1, head.config.block):
                n = int((starts[0] + i < T).sum())
                target = tok2draft[s.ids[starts[0, :n] + i]]
                per[i - 1].append(token_ranks(out[:n, i].float() @ weight.T, target))
        return [torch.cat(r) if r else torch.zeros(0, dtype=torch.long) for r in per]

    def save(self, lm: LoadedModel, head: Any, folder: Path, acc: list[list[float]], manifest: dict) -> Path:
        """The drafter (bf16) with its held-out table and a summary of its training in config.json, and its manifest."""
        head.config = replace(head.config, calibration=acc, train=summary(manifest))
        return save_head(head, folder, manifest=manifest)

    def load(self, lm: LoadedModel, folder: Path) -> Any:
        """The drafter saved in folder."""
        return load_head(folder, lm.hf.config)
