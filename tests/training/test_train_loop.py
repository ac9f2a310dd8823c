"""The one training loop: it learns, a killed run resumes to the same weights, the time budget and a flat curve stop
it, the curve lands in the manifest; every head kind trains end to end through `train`; old head folders load."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import ClassVar

import pytest
import torch
from safetensors.torch import load_file

from specviz.corpus.data import Data, in_memory
from specviz.heads import store
from specviz.heads.files import Kind
from specviz.training import checkpoint
from specviz.training.loop import finish, fit, flat, lr_at
from specviz.training.trainer import Batch, TrainConfig, rank_accuracy, token_ranks

TOY = Kind("toy/1", "a toy head", ValueError, "retrain it")


def toy_rows(n: int, seed: int) -> list[tuple[torch.Tensor, int]]:
    """Points x in R^4 labelled by the argmax of a fixed map: what a linear head can learn."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 4, generator=gen)
    labels = (x @ torch.tensor([[1.0, -1, 0], [0, 1, -1], [-1, 0, 1], [0.5, 0.5, -1]])).argmax(-1)
    return [(x[i], int(labels[i])) for i in range(n)]


@dataclass(frozen=True)
class Toy:
    """A linear classifier through the loop: its batches and its loss, nothing else."""

    kind: ClassVar[str] = "toy"
    recipe: ClassVar[TrainConfig] = TrainConfig(lr=0.05, checkpoint_minutes=60.0)
    n_ranks: ClassVar[int] = 3
    batch: int = 8

    def new_head(self, lm, data, seed):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            return torch.nn.Linear(4, 3)

    def batches(self, lm, head, rows, seed):
        order = torch.randperm(len(rows), generator=torch.Generator().manual_seed(seed)).tolist()
        cut = [order[at : at + self.batch] for at in range(0, len(order), self.batch)]
        return [Batch(len(idx), functools.partial(self.stack, rows, idx)) for idx in cut]

    def stack(self, rows, idx):
        return torch.stack([rows[i][0] for i in idx]), torch.tensor([rows[i][1] for i in idx])

    def loss(self, lm, head, batch):
        x, y = batch
        loss = torch.nn.functional.cross_entropy(head(x), y)
        return loss, {"loss": float(loss.detach())}

    def ranks(self, lm, head, held):
        x, y = self.stack(held, range(len(held)))
        return [token_ranks(head(x), y)]

    def save(self, lm, head, folder, acc, manifest):
        return store.save(folder, ("w.safetensors", store.tensors(head.state_dict())), TOY.fmt, {}, manifest)

    def load(self, lm, folder):
        head = torch.nn.Linear(4, 3)
        head.load_state_dict(load_file(str(Path(folder) / "w.safetensors")))
        return head


class FakeModel:
    def describe(self) -> str:
        return "cpu fp32 (test)"


def streamed(parts: list[list]) -> Data:
    """Rows in several chunks, as a feature folder streams its shards."""
    return Data(tuple((lambda p=p: p) for p in parts), lambda: parts[0], {"kind": "toy", "chunks": len(parts)})


def test_the_loop_trains_a_heads_loss_down_and_measures_it(tmp_path):
    rows, held = toy_rows(96, 0), toy_rows(64, 1)
    run = fit(None, Toy(), in_memory(rows), replace(Toy.recipe, epochs=8, eval_every=40), tmp_path, held)
    losses = [h["loss"] for h in run.record["history"]]
    curve = run.record["curve"]
    assert losses[-1] < 0.5 * losses[0] and curve[-1]["top1"][0] > 0.85 > curve[0]["top1"][0]
    assert [p["positions"] for p in curve] == sorted(p["positions"] for p in curve)
    start = run.record["curve_start"]  # the untrained head, measured before the first step
    assert start["positions"] == start["step"] == 0 and start["top1"][0] < curve[0]["top1"][0]
    assert run.record["steps"] == run.record["planned_steps"] == 8 * 12 and run.record["positions"] == 8 * 96
    assert "8 passes" in run.record["stopped"]["reason"]


def test_a_killed_run_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path):
    parts = [toy_rows(20, 2), toy_rows(13, 3), toy_rows(30, 4)]  # three chunks, uneven batches
    cfg = replace(Toy.recipe, epochs=2.5, checkpoint_minutes=0.0)
    whole = fit(None, Toy(), streamed(parts), cfg, tmp_path / "whole").head

    def kill(state: dict, _logs: dict) -> None:
        if state["step"] == 11:  # mid-chunk of the second pass; the checkpoint holds step 10
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit(None, Toy(), streamed(parts), cfg, tmp_path / "cut", progress=kill)
    progress = json.loads((tmp_path / "cut" / checkpoint.PROGRESS).read_text())
    assert progress["step"] == 10 and progress["epoch"] == 1
    resumed = fit(None, Toy(), streamed(parts), cfg, tmp_path / "cut", resume=True)
    assert torch.equal(resumed.head.weight, whole.weight) and torch.equal(resumed.head.bias, whole.bias)
    with pytest.raises(ValueError, match="other config settings"):
        fit(None, Toy(), streamed(parts), replace(cfg, lr=0.01), tmp_path / "cut", resume=True)


def test_the_time_budget_stops_it_with_a_checkpoint(tmp_path):
    run = fit(None, Toy(), in_memory(toy_rows(64, 0)), replace(Toy.recipe, minutes=1e-9), tmp_path)
    assert run.record["steps"] == 1 < run.record["planned_steps"]
    assert "time budget" in run.record["stopped"]["reason"]
    assert json.loads((tmp_path / checkpoint.PROGRESS).read_text())["step"] == 1


def test_a_flat_curve_stops_it_and_says_where():
    curve = [{"top1": [0.5, 0.3]}, {"top1": [0.6, 0.4]}, {"top1": [0.601, 0.4]}, {"top1": [0.602, 0.401]}]
    assert flat(curve[:3], 2, 0.01) is None  # gained 0.1 over the last two
    assert "gained 0.0015" in (flat(curve, 2, 0.01) or "") and flat(curve, 0, 0.01) is None


def test_early_stop_and_the_curve_land_in_the_manifest(tmp_path):
    rows, held = toy_rows(96, 0), toy_rows(64, 1)
    cfg = replace(Toy.recipe, epochs=50, eval_every=96, patience=2, min_gain=1.0)  # nothing gains 1.0
    run = fit(None, Toy(), in_memory(rows), cfg, tmp_path / "ckpt", held)
    assert len(run.record["curve"]) == 3 and run.record["steps"] < run.record["planned_steps"]
    assert "gained" in run.record["stopped"]["reason"] and run.record["stopped"]["positions"] == 3 * 96
    manifest = finish(FakeModel(), Toy(), run, held, tmp_path / "head", {"threads": 1})
    back = store.read_manifest(tmp_path / "head", TOY)
    assert back["curve"] == run.record["curve"] and back["stopped"] == run.record["stopped"]
    assert back["heldout_top1_by_depth"] == manifest["heldout_top1_by_depth"] and back["trainer"]["kind"] == "toy"
    assert back["provenance"]["device"] == "cpu fp32 (test)" and back["data"]["sequences"] == 96
    saved = Toy().load(None, tmp_path / "head")
    assert torch.equal(saved.weight, run.head.weight.to(torch.bfloat16).float())  # stored as it was measured


def test_one_schedule_and_one_rank_accuracy():
    assert lr_at(0, 1000, 1.0, 100) < 0.02 and lr_at(100, 1000, 1.0, 100) == 1.0
    assert lr_at(1000, 1000, 1.0, 100, floor=0.1) == pytest.approx(0.1)
    ranks = [torch.tensor([0, 1, 0, -1, 10**6]), torch.tensor([2, 0])]  # -1: no target; 10**6: not draftable
    acc, n = rank_accuracy(ranks, 3)
    assert n == 5 and acc == [[0.5, 0.25, 0.0], [0.5, 0.0, 0.5]]
