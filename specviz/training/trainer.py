"""What a head's trainer supplies to the one loop (training.loop), and what every trainer shares: the loop's
TrainConfig, a Batch, the Trainer protocol, and one rank accuracy over the ranks of the target's tokens.

A trainer (one per head kind, listed in training.kinds) is a frozen dataclass of the head's own settings with
methods for a fresh head, its batches, its loss, the ranks of the target's tokens on held-out data, and saving
and loading its folder; everything else (optimiser, schedule, checkpoints, curve) is the loop's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar, Protocol

import torch
from torch import nn

from specviz.core.model import LoadedModel
from specviz.corpus.data import Data

MISS = 10**6  # the rank of a token the head cannot draft (outside its draft vocabulary)


@dataclass(frozen=True)
class TrainConfig:
    """How the loop trains any head; each trainer's `recipe` gives its defaults, its own settings live in it."""

    epochs: float = 1.0  # passes over the training data (fractions allowed)
    positions: int = 0  # or stop after this many training positions (0: the epochs decide)
    lr: float = 1e-3  # AdamW's peak learning rate
    warmup: float = 0.02  # share of the run spent warming the learning rate up, linearly
    floor: float = 0.05  # the cosine decays to this share of the peak
    betas: tuple[float, float] = (0.9, 0.95)  # AdamW's
    clip: float = 0.5  # gradient-norm clipping (0: none)
    bf16: bool = False  # autocast the loss to bf16 (AMX units); weights and AdamW stay fp32
    seed: int = 0  # the fresh head's weights and the data order
    minutes: float = 0.0  # time budget of this process: then checkpoint, evaluate and stop (0: none)
    checkpoint_minutes: float = 3.0  # between checkpoints (0: after every step)
    eval_every: int = 100_000  # training positions between held-out evaluations (0: only at the end)
    patience: int = 0  # stop when the last `patience` evaluations gained less than min_gain (0: never)
    min_gain: float = 0.002  # in mean held-out top-1 over depths or heads
    keep_best: bool = False  # end with the evaluated head of best mean held-out top-1 at depths 1-3, not the last

    RUN_CONTROL: ClassVar[tuple[str, ...]] = ("minutes", "checkpoint_minutes", "eval_every", "patience", "min_gain")

    def __post_init__(self) -> None:
        if not (self.epochs > 0 and self.lr > 0):
            raise ValueError(f"--epochs and --lr must be positive, got {self.epochs} and {self.lr}.")
        if not (0 <= self.warmup < 1 and 0 <= self.floor <= 1):
            raise ValueError(f"--warmup must be in [0, 1) and --floor in [0, 1], got {self.warmup}, {self.floor}.")
        numbers = (self.positions, self.clip, self.minutes, self.checkpoint_minutes, self.eval_every)
        if min(*numbers, self.patience, self.min_gain) < 0:
            raise ValueError("--positions, --clip, --minutes, --checkpoint-minutes, --eval-every, --patience and "
                             "--min-gain must be >= 0.")  # fmt: skip

    def weights_part(self) -> dict:
        """The settings that decide the weights (a checkpoint resumes only under the same ones)."""
        return {k: v for k, v in asdict(self).items() if k not in self.RUN_CONTROL}


@dataclass(frozen=True)
class Batch:
    """One optimiser step's data: how many training positions it holds, and how to build its tensors (lazily: a
    pass's plan holds every batch of a chunk at once)."""

    positions: int
    make: Callable[[], Any]


class Trainer(Protocol):
    """What a head kind supplies to the loop: a head, its batches and loss, its held-out ranks, its folder."""

    kind: ClassVar[str]  # the name on the command line
    recipe: ClassVar[TrainConfig]  # the loop settings this head trains with unless told otherwise
    n_ranks: ClassVar[int]  # ranks kept in its calibration table

    models: ClassVar[Path]  # where `train` saves the head by default

    def new_head(self, lm: LoadedModel, data: Data, seed: int, /) -> nn.Module: ...
    def batches(self, lm: LoadedModel, head: Any, seqs: list, seed: int, /) -> list[Batch]: ...
    def loss(self, lm: LoadedModel, head: Any, batch: Any, /) -> tuple[torch.Tensor, dict[str, float]]: ...
    def ranks(self, lm: LoadedModel, head: Any, held: Sequence, /) -> list[torch.Tensor]: ...
    def save(self, lm: LoadedModel, head: Any, folder: Path, acc: list[list[float]], manifest: dict, /) -> Path: ...
    def load(self, lm: LoadedModel, folder: Path, /) -> nn.Module: ...


def token_ranks(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Rank of each target among logits [..., V] (0: the top one); MISS where the target is < 0 (not draftable)."""
    hit = logits.gather(-1, target.clamp_min(0)[..., None])
    rank = (logits > hit).sum(-1)
    return torch.where(target >= 0, rank, torch.full_like(rank, MISS))


def rank_accuracy(ranks: Sequence[torch.Tensor], n: int = 8) -> tuple[list[list[float]], int]:
    """acc[d][i] = P(the target's token is rank i at depth or head d), over positions with a rank >= 0 (a negative
    one: no target there); also the positions of the first depth."""
    acc = []
    for r in ranks:
        r = r[r >= 0]
        acc.append([round(float((r == i).float().mean()), 4) if len(r) else 0.0 for i in range(n)])
    return acc, len(ranks[0]) if ranks else 0


def best_score(top1: Sequence[float]) -> float:
    """What --keep-best ranks evaluations by: the mean held-out top-1 of the first three depths (or heads)."""
    first = list(top1[:3])
    return sum(first) / len(first) if first else 0.0


def summary(manifest: dict) -> dict:
    """A manifest's short form for a head's config.json: how it trained and what it scored, no curve."""
    keep = ("steps", "planned_steps", "positions", "train_seconds", "stopped", "heldout_top1_by_depth")
    return {**{k: manifest[k] for k in keep if k in manifest}, **manifest.get("trainer", {})}


def settings(trainer: Trainer) -> dict:
    """A trainer's kind and settings, as a manifest and a checkpoint record them."""
    return {"kind": trainer.kind, **asdict(trainer)}  # type: ignore[call-overload]  # trainers are dataclasses
