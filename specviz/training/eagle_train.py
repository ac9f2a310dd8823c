"""EAGLE-2's trainer: the head reads (f_j, x_{j+1}) and learns f_{j+1}; loss SmoothL1(features) + 0.1 × CE(tokens)
through the frozen LM head's draft rows, on continuation positions, unrolled on its own drafts (training.eagle_loss);
the feature term's weight is a setting (0 drops it, as EAGLE-3 does), and so are GRIFFIN's mask and the depths' weights.

Data are the self-distilled shards (training.distill: the target's greedy continuations with its final post-norm
hidden state at every position) or teacher-forced feature shards (training.features, EAGLE's own recipe).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from specviz.core.model import LoadedModel
from specviz.corpus.data import Data
from specviz.corpus.shards import Sequence
from specviz.heads.eagle import DEFAULT_DIR, load_head, new_head
from specviz.training.eagle_loss import EagleFamily, aligned, draft_vocab, noised, top_hits, unrolled
from specviz.training.trainer import TrainConfig


def depth_loss(
    out: torch.Tensor, tgt: torch.Tensor, weight: torch.Tensor, ce_weight: float, feature_weight: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, float, torch.Tensor, torch.Tensor]:
    """feature_weight × SmoothL1 on predicted features + ce_weight × soft cross-entropy over the draft vocabulary;
    also (SmoothL1, CE, top-1 agreement, the draft's log-probabilities and the target's distribution)."""
    reg = F.smooth_l1_loss(out, tgt)
    with torch.no_grad():
        p = torch.softmax(tgt @ weight.T, dim=-1)
    logq = torch.log_softmax(out @ weight.T, dim=-1)
    ce = -(p * logq).sum(-1).mean()
    acc = float((logq.argmax(-1) == p.argmax(-1)).float().mean())
    total = (feature_weight * reg + ce_weight * ce) if feature_weight else ce_weight * ce
    return total, reg, ce, acc, logq.detach(), p


@dataclass(frozen=True)
class EagleTrainer(EagleFamily):
    """EAGLE-2's head: concat(embed(x_{t+1}), f_t) → fc → one decoder layer → f_{t+1}."""

    # The defaults made the committed head (models/eagle): 6,912 training sequences, 47 min on 1 core.
    kind: ClassVar[str] = "eagle"
    recipe: ClassVar[TrainConfig] = TrainConfig(epochs=2.0)
    models: ClassVar[Path] = DEFAULT_DIR
    read = staticmethod(load_head)
    # EAGLE: L = SmoothL1(features) + 0.1 × CE(tokens). A 1-epoch ablation on 1,728 sequences gave held-out
    # top-1 by depth 0.293/0.246/0.224 at 0.1, 0.302/0.262/0.225 at 1.0 and 0.302/0.260/0.224 at 3.0.
    ce_weight: float = 0.1  # weight of the token cross-entropy against the feature loss
    feature_weight: float = 1.0  # weight of the SmoothL1 feature loss (0: off, as EAGLE-3 trains)
    noise: float = 0.2  # uniform noise U(-a/2, a/2) on input features, in units of their std (EAGLE)
    init: str = ""  # start from the EAGLE head in this folder (its draft vocabulary kept) instead of a fresh one

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (0 <= self.ce_weight <= 100 and 0 <= self.feature_weight <= 100 and 0 <= self.noise <= 10):
            raise ValueError(
                f"--ce-weight must be >= 0 and --feature-weight at most 100, --noise 0-10, got {self.ce_weight}, "
                f"{self.feature_weight} and {self.noise}."
            )
        if self.ce_weight == 0 and self.feature_weight == 0:
            raise ValueError("--ce-weight and --feature-weight cannot both be 0: nothing would be trained.")

    def new_head(self, lm: LoadedModel, data: Data, seed: int) -> Any:
        """A fresh head over the sample's most frequent continuation tokens (or the head in `init`)."""
        if self.init:
            return load_head(self.init, lm.hf.config)
        draft_ids, _coverage = draft_vocab(data.sample(), self.draft_vocab, lm.hf.config.vocab_size)
        return new_head(lm.hf.config, lm.name, draft_ids, seed)

    def context(self, lm: LoadedModel, head: Any, seqs: list[Sequence]) -> dict:
        """The draft rows, and the features' spread (the noise is in units of it)."""
        spread = float(torch.cat([s.hidden[:64].float() for s in seqs[:200]]).std()) if self.noise > 0 else 0.0
        return super().context(lm, head, seqs) | {"feat_std": spread}

    def loss(self, lm: LoadedModel, head: Any, b: dict) -> tuple[torch.Tensor, dict[str, float]]:
        """EAGLE's loss on the true pairs, plus depth_weights() × the same loss on each deeper depth's drafts made
        from the head's own features (as in HASS and EAGLE-3), under GRIFFIN's mask when align_top is set; the
        noise on depth 1's input features only, drawn from the batch's own seed."""
        feats = noised(b["feats"], self.noise, b["feat_std"], b["seed"])
        with torch.no_grad():
            emb = lm.hf.get_input_embeddings()(b["tokens"]).float()
        total, logs = torch.zeros(()), {}
        alive = torch.ones_like(b["mask"])  # GRIFFIN: rows whose earlier true tokens were all in the top-k
        outs = unrolled(head, feats, emb, self.unroll)
        for d, (out, w) in enumerate(zip(outs, self.depth_weights(), strict=True), start=1):
            rows = b["mask"] & alive
            rows[:, : d - 1] = False  # the first d-1 rows have no drafted input yet
            if not rows.any():
                break  # the mask only shrinks with depth
            part, reg, ce, acc, logq, p = depth_loss(
                out[rows], b["target"][rows], b["weight"], self.ce_weight, self.feature_weight
            )
            total = total + w * part
            logs |= {"l1": float(reg.detach()), "ce": float(ce.detach()), "acc": acc} if d == 1 else {f"acc{d}": acc}
            if self.align_top:
                hit = torch.ones_like(rows)
                hit[rows] = top_hits(logq, p, self.align_top)
                alive = aligned(alive, hit)
                logs[f"kept{d}"] = float(rows.sum() / b["mask"].sum().clamp_min(1))
        return total, logs | {"loss": float(total.detach())}
