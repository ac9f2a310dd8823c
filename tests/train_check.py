"""A training run three ways, for the heads' tests: whole, stopped by its time budget after one step, and resumed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from torch import nn

from specviz.corpus.data import in_memory
from specviz.training.loop import Run, fit
from specviz.training.trainer import TrainConfig


def whole_cut_resumed(lm, trainer, cfg: TrainConfig, seqs: list, folder: Path) -> tuple[Run, dict, nn.Module]:
    """(the uninterrupted run, the record of one stopped by its time budget, that one resumed to the end)."""
    data = in_memory(seqs)
    run = fit(lm, trainer, data, cfg, folder / "a")
    cut = fit(lm, trainer, data, replace(cfg, minutes=1e-9), folder / "b").record  # stops after one step
    return run, cut, fit(lm, trainer, data, cfg, folder / "b", resume=True).head
