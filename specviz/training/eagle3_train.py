"""Train an EAGLE-3 head (`python -m specviz train eagle3`): training-time test, checkpoints, held-out accuracy.

Data are the self-distilled shards with the fused layers' inputs (`python -m specviz corpus distill --layers`,
in ~/.cache/specviz/distill-layers). Row j of a sequence is the pair (g_j, x_{j+1}), g_j fused from the
target's layer inputs at j, and its label is the target's next-token distribution at j+1 (it scores
x_{j+2}), over the draft vocabulary; there is no feature loss. Training-time test: the head is unrolled
on its own outputs (eagle_loss.unrolled: depth d+1 reads depth d's outputs shifted one row, under the
inference mask eagle_loss.depth_mask), and the loss is Σ_d unroll_weight^(d-1) · CE_d over the depths; GRIFFIN's
alignment mask (--align-top) and noise on depth 1's inputs (--noise) are options, off by default.
Rows whose next token is outside the draft vocabulary carry no loss (EAGLE-3 masks them too).
The loop, its checkpoints and its learning curve are training.loop's; this module supplies the head, the
batches and the loss.
"""

from __future__ import annotations

import json
from collections import abc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch

from specviz.core.model import LoadedModel, fused_layers
from specviz.corpus.data import Data
from specviz.corpus.shards import DataError, Sequence
from specviz.heads.eagle3 import DEFAULT_DIR, load_head, new_head, warm_start
from specviz.training.eagle_loss import EVAL_DEPTHS as EVAL_DEPTHS  # the depths measured, as tests reach them
from specviz.training.eagle_loss import (
    EagleFamily,
    aligned,
    collate,
    draft_index,
    draft_vocab,
    noised,
    top_hits,
    unrolled,
)
from specviz.training.trainer import TrainConfig


def data_layers(folder: Path | None, seqs: abc.Sequence[Sequence], lm: LoadedModel) -> tuple[int, ...]:
    """The fused layers the shards hold (their manifest; fused_layers when it does not say); DataError when
    the shards carry no layer inputs or ones of another width."""
    h = int(lm.hf.config.hidden_size)
    if not seqs or any(s.layers is None or s.layers.shape[-1] != 3 * h for s in seqs):
        raise DataError(
            f"The shards in {folder} carry no layer inputs for a {h}-wide model; build them with: "
            f"python -m specviz corpus distill --layers --out {folder}"
        )
    manifest = None if folder is None else folder / "manifest.json"
    listed = json.loads(manifest.read_text()).get("fused_layers") if manifest and manifest.is_file() else None
    return tuple(int(i) for i in listed) if listed else fused_layers(len(lm.hf.model.layers))


def collate3(seqs: abc.Sequence[Sequence], idx: list[int], max_len: int, tok2draft: torch.Tensor) -> dict:
    """eagle_loss.collate's rows (tokens x_{j+1}, target hidden_{j+1}), plus the layer inputs at j; the loss
    mask keeps continuation rows whose next token x_{j+2} exists and is in the draft vocabulary."""
    b = collate(seqs, idx, max_len)
    B, T = b["tokens"].shape
    cpu = b["tokens"].device  # training data live on the CPU
    layers = torch.zeros(B, T, seqs[idx[0]].layers.shape[1], device=cpu)  # type: ignore[union-attr]
    for r, i in enumerate(idx):
        s = seqs[i]
        n = min(len(s.ids), max_len) - 1
        layers[r, :n] = s.layers[:n].float()  # type: ignore[index]
        nxt, m = torch.full((T,), -1, dtype=torch.long, device=cpu), max(0, min(n, len(s.ids) - 2))
        nxt[:m] = s.ids[2 : m + 2]
        b["mask"][r] &= (nxt >= 0) & (tok2draft[nxt.clamp_min(0)] >= 0)
    del b["feats"]
    return {**b, "layers": layers}


@dataclass(frozen=True)
class Eagle3Trainer(EagleFamily):
    """EAGLE-3's head: tokens only (no feature loss, no noise), unrolled deeper on its own outputs."""

    kind: ClassVar[str] = "eagle3"
    recipe: ClassVar[TrainConfig] = TrainConfig(epochs=1.0, bf16=True)
    models: ClassVar[Path] = DEFAULT_DIR
    data_dir: ClassVar[str] = "distill-layers"  # shards with the layer inputs (distill --layers)
    read = staticmethod(load_head)
    unroll: int = 3  # training-time test depths (inference drafts 2 deep by default, the paper preset 5)
    unroll_weight: float = 0.8  # depth d's loss weighs unroll_weight^(d-1)
    unroll_geometric: bool = True  # depth d's loss weighs unroll_weight^(d-1) (off: unroll_weight past depth 1)
    noise: float = 0.0  # uniform noise U(-a/2, a/2) on depth 1's layer inputs, in units of each layer's std
    layers: str = ""  # the fused layers, "2,15,27" ("": those the data hold)
    init: str = ""  # an EAGLE-2 head folder whose fc and decoder layer start training (eagle3.warm_start)

    def new_head(self, lm: LoadedModel, data: Data, seed: int) -> Any:
        """A fresh head over the data's fused layers and most frequent continuation tokens (warm-started from init)."""
        sample = data.sample()
        held = data_layers(data.folder, sample, lm)
        layers = tuple(int(i) for i in self.layers.split(",")) if self.layers else held
        draft_ids, _coverage = draft_vocab(sample, self.draft_vocab, lm.hf.config.vocab_size)
        head = new_head(lm.hf.config, lm.name, draft_ids, layers, seed)
        if self.init:
            warm_start(head, self.init)
        return head

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0 <= self.noise <= 10:
            raise ValueError(f"--noise must be 0-10, got {self.noise}.")

    def context(self, lm: LoadedModel, head: Any, seqs: list[Sequence]) -> dict:
        """The draft rows, token id → draft row (a row whose next token is outside it has no loss), and each fused
        layer's spread [3h] when there is noise (it is in units of it)."""
        ctx = super().context(lm, head, seqs) | {"tok2draft": draft_index(head, lm.hf.config.vocab_size)}
        if self.noise > 0:
            sample = torch.cat([s.layers[:64].float() for s in seqs[:200]])  # type: ignore[index]
            ctx["spread"] = sample.unflatten(-1, (3, -1)).std(dim=(0, 2)).repeat_interleave(sample.shape[-1] // 3)
        return ctx

    def collate(self, seqs: list[Sequence], idx: list[int], ctx: dict) -> dict:
        """collate3's rows with the chunk's shared tensors."""
        shared = {k: ctx[k] for k in ("weight", "seed", "spread") if k in ctx}
        return collate3(seqs, idx, self.max_len, ctx["tok2draft"]) | shared

    def features(self, lm: LoadedModel, head: Any, s: Sequence) -> torch.Tensor:
        """The fused layer inputs along a held-out sequence [1, T, h] (teacher-forced once when it has none)."""
        if s.layers is None:
            s.layers = lm.forward_layers(s.ids.tolist(), lm.new_cache(), tuple(head.config.layers))[2].half()
        return head.fuse_layers(s.layers[:-1].float()[None])

    def loss(self, lm: LoadedModel, head: Any, b: dict) -> tuple[torch.Tensor, dict[str, float]]:
        """Σ_d depth_weights()[d] · CE(target's distribution, head's depth-d draft), over the draft vocabulary, under
        GRIFFIN's mask when align_top is set; noise (when set) on depth 1's layer inputs only."""
        with torch.no_grad():
            emb = lm.hf.get_input_embeddings()(b["tokens"]).float()
        g = head.fuse_layers(noised(b["layers"], self.noise, b.get("spread", 0.0), b.get("seed", 0)))
        rows = b["mask"].nonzero()  # [R, 2] (batch, position) with a label
        with torch.no_grad():
            p = torch.softmax((b["target"][rows[:, 0], rows[:, 1]] @ b["weight"].T).float(), dim=-1)
        total, logs = torch.zeros((), device=p.device), {}
        alive = torch.ones_like(b["mask"])  # GRIFFIN: rows whose earlier true tokens were all in the top-k
        outs = unrolled(head, g, emb, self.unroll)
        for d, (out, w) in enumerate(zip(outs, self.depth_weights(), strict=True), start=1):
            keep = (rows[:, 1] >= d - 1) & alive[rows[:, 0], rows[:, 1]]  # no drafted input yet before row d-1
            if not keep.any():
                break  # the mask only shrinks with depth
            at = rows[keep]
            logq = torch.log_softmax((head.readout(out[at[:, 0], at[:, 1]]) @ b["weight"].T).float(), dim=-1)
            ce = -(p[keep] * logq).sum(-1).mean()
            total = total + w * ce
            logs[f"ce{d}"] = float(ce.detach())
            logs[f"acc{d}"] = float((logq.argmax(-1) == p[keep].argmax(-1)).float().mean())
            if self.align_top:
                hit = torch.ones_like(alive)
                hit[at[:, 0], at[:, 1]] = top_hits(logq.detach(), p[keep], self.align_top)
                alive = aligned(alive, hit)
                logs[f"kept{d}"] = float(keep.float().mean())
        logs["loss"] = float(total.detach())
        return total, logs
