"""The head kinds `python -m specviz train KIND` knows. Adding one is its head module in specviz.heads, one trainer
file here (a frozen dataclass of its settings with its batches and its loss; training.trainer says what else),
and one line below."""

from __future__ import annotations

from specviz.training.draft_train import DraftTrainer
from specviz.training.eagle3_train import Eagle3Trainer
from specviz.training.eagle_train import EagleTrainer
from specviz.training.hydra_train import HydraTrainer
from specviz.training.medusa_train import MedusaTrainer
from specviz.training.trainer import Trainer

TRAINERS: dict[str, type[Trainer]] = {
    "eagle": EagleTrainer,
    "eagle3": Eagle3Trainer,
    "medusa": MedusaTrainer,
    "hydra": HydraTrainer,
    "draft": DraftTrainer,
}
