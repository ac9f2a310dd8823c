"""The one training loop every head trains through: AdamW, a linear warm-up and a cosine decay, gradient clipping,
bf16 autocast when asked, a time budget, a checkpoint every few minutes (training.checkpoint) and resume from it,
and held-out evaluation at intervals: a learning curve (positions seen → held-out top-1 by depth or head) that
ends in the head's manifest, with an optional stop where it flattens, and optionally the best evaluated head kept
(--keep-best: the mean held-out top-1 of depths 1-3) instead of the last.

A head's trainer (training.kinds) supplies only what differs between heads: a fresh head, its batches, its loss,
and the ranks of the target's tokens on held-out data. A pass is every chunk of the data in order (training.data),
each chunk cut into the trainer's batches with a seed of its own; the position (pass, chunk, batch) is what a
checkpoint stores, so a resumed run sees exactly the batches an uninterrupted one would have.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from specviz.core.measure import provenance
from specviz.core.model import LoadedModel
from specviz.corpus.data import Data
from specviz.corpus.shards import DataError
from specviz.training import checkpoint
from specviz.training.trainer import Batch, TrainConfig, Trainer, best_score, rank_accuracy, settings

Progress = Callable[[dict, dict], None]  # (the run's state, the last step's logged numbers)
HISTORY_EVERY = 10  # steps between the logged losses a run keeps


def lr_at(done: float, total: float, peak: float, warm: float, floor: float = 0.05) -> float:
    """Linear warm-up over `warm` (steps or positions, as `done` and `total`), then cosine decay to floor · peak."""
    warm = max(1.0, warm)
    if done < warm:
        return peak * (done + 1) / warm
    frac = min(1.0, (done - warm) / max(1.0, total - warm))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * frac)))


def flat(curve: list[dict], patience: int, min_gain: float) -> str | None:
    """Why to stop where the learning curve flattened: the last `patience` evaluations gained < min_gain in mean
    top-1; None while it still climbs (or patience is 0)."""
    if patience < 1 or len(curve) <= patience:
        return None
    gain = statistics.mean(curve[-1]["top1"]) - statistics.mean(curve[-1 - patience]["top1"])
    if gain >= min_gain:
        return None
    return f"mean held-out top-1 gained {gain:.4f} < {min_gain} over the last {patience} evaluations"


@dataclass
class Run:
    """A finished (or stopped) fit: the head, its record for the manifest, and the last held-out table."""

    head: nn.Module
    record: dict
    table: list[list[float]] | None = None


def fit(
    lm: LoadedModel,
    trainer: Trainer,
    data: Data,
    cfg: TrainConfig,
    ckpt: Path,
    held: Sequence = (),
    resume: bool = False,
    progress: Progress | None = None,
) -> Run:
    """Train a fresh head (or, with resume, the one checkpointed in ckpt) until the epochs or positions are done, the
    time budget is spent or the learning curve is flat; checkpoint into ckpt on the way and at the stop."""
    with torch.enable_grad():
        return Fitting(lm, trainer, data, cfg, ckpt, held, progress).run(resume)


class Fitting:
    """One run of the loop: the head, AdamW, the state a checkpoint keeps, and the plan of the current chunk."""

    def __init__(
        self, lm: LoadedModel, trainer: Trainer, data: Data, cfg: TrainConfig, ckpt: Path, held: Sequence, progress
    ) -> None:
        self.lm, self.trainer, self.data, self.cfg, self.ckpt, self.held = lm, trainer, data, cfg, ckpt, held
        self.progress: Progress | None = progress
        self.head = trainer.new_head(lm, data, cfg.seed).float().train().requires_grad_(True)
        self.opt = torch.optim.AdamW(self.head.parameters(), lr=cfg.lr, betas=cfg.betas, weight_decay=0.0)
        self.settings = {"trainer": settings(trainer), "config": cfg.weights_part(), "data": data.key()}
        self.state: dict = {"step": 0, "epoch": 0, "chunk": 0, "index": 0, "seen": 0, "seconds": 0.0}
        self.state |= {"planned": 0, "curve": [], "start": None, "history": [], "stopped": None, "best": None}
        self.table: list[list[float]] | None = None
        self.best: dict[str, torch.Tensor] | None = None  # the weights of the best evaluation (--keep-best)
        self.logs: dict[str, float] = {}
        self._key: tuple[int, int] | None = None
        self._plan: list[Batch] = []

    def run(self, resume: bool) -> Run:
        """Resume or start, step until a stop, then checkpoint and measure where it stopped."""
        if not (resume and self.restore()):
            self.state["planned"] = self.planned()
            if self.held and self.cfg.eval_every:  # where the curve starts: the head before any training
                self.state["start"] = self.measure()
        st, t0 = self.state, time.perf_counter()
        saved, seconds0 = t0, st["seconds"]
        while (why := self.done()) is None:
            self.step()
            st["seconds"] = seconds0 + time.perf_counter() - t0
            if self.cfg.minutes > 0 and time.perf_counter() - t0 > 60 * self.cfg.minutes:
                why = f"the time budget of {self.cfg.minutes:g} minutes"
                break
            if time.perf_counter() - saved >= 60 * self.cfg.checkpoint_minutes:
                self.save()
                saved = time.perf_counter()
        st["stopped"] = {"reason": why, "step": st["step"], "positions": st["seen"]}
        if self.held and (not st["curve"] or st["curve"][-1]["step"] != st["step"]):
            self.evaluate()
        self.save()
        if self.best is not None:  # the checkpoint keeps the last weights (a resumed run goes on from them)
            with torch.no_grad():
                for name, p in self.head.named_parameters():
                    p.copy_(self.best[name])
        return Run(self.head.eval().requires_grad_(False), self.record(), self.table)

    def done(self) -> str | None:
        """Why the run stops now: its positions or steps are done, or its learning curve is flat; None to go on."""
        st, cfg = self.state, self.cfg
        if cfg.positions and st["seen"] >= cfg.positions:
            return f"{cfg.positions} training positions seen"
        if not cfg.positions and st["step"] >= st["planned"]:
            return f"{cfg.epochs:g} passes over the data done"
        return flat(st["curve"], cfg.patience, cfg.min_gain)

    def plan(self, epoch: int, chunk: int) -> list[Batch]:
        """The batches of one chunk in one pass (kept until the next chunk is reached)."""
        if self._key != (epoch, chunk):
            self._plan = []  # let the last chunk go first
            seqs = self.data.read(chunk)
            seed = self.cfg.seed + chunk + 1000 * epoch
            self._plan, self._key = self.trainer.batches(self.lm, self.head, seqs, seed), (epoch, chunk)
        return self._plan

    def planned(self) -> int:
        """Steps the run will take: exact for one chunk, estimated from the first chunk for a stream of them."""
        first = self.plan(0, 0)
        if not first:
            raise DataError("The training data hold no training positions.")
        if self.cfg.positions:
            return math.ceil(self.cfg.positions * len(first) / max(1, sum(b.positions for b in first)))
        return max(1, math.ceil(len(first) * len(self.data.chunks) * self.cfg.epochs))

    def step(self) -> None:
        """One optimiser step on the next batch of the stream, then the position, history and curve moved on."""
        st, cfg = self.state, self.cfg
        plan = self.plan(st["epoch"], st["chunk"])
        if st["index"] >= len(plan):  # the chunk is done: the next one, or the next pass
            st["index"], st["chunk"] = 0, st["chunk"] + 1
            if st["chunk"] == len(self.data.chunks):
                st["chunk"], st["epoch"] = 0, st["epoch"] + 1
            return
        batch = plan[st["index"]]
        for group in self.opt.param_groups:
            group["lr"] = lr_at(st["step"], st["planned"], cfg.lr, cfg.warmup * st["planned"], cfg.floor)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.bf16):
            loss, self.logs = self.trainer.loss(self.lm, self.head, batch.make())
        if loss.requires_grad:  # a batch with no labelled row (every answer cut off by max_len) moves nothing
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            if cfg.clip > 0:
                torch.nn.utils.clip_grad_norm_(self.head.parameters(), cfg.clip)
            self.opt.step()
        before = st["seen"]
        st["step"], st["index"], st["seen"] = st["step"] + 1, st["index"] + 1, before + batch.positions
        if (st["step"] - 1) % HISTORY_EVERY == 0:
            st["history"].append({"step": st["step"], **{k: round(v, 4) for k, v in self.logs.items()}})
        if self.held and cfg.eval_every and st["seen"] // cfg.eval_every > before // cfg.eval_every:
            self.evaluate()
        if self.progress is not None:
            self.progress(st, self.logs)

    def measure(self) -> dict:
        """Held-out ranks now (the calibration table kept): a point of the learning curve."""
        with torch.no_grad():
            self.table, _ = rank_accuracy(self.trainer.ranks(self.lm, self.head, self.held), self.trainer.n_ranks)
        st = self.state
        return {"positions": st["seen"], "step": st["step"], "top1": [row[0] for row in self.table]} | {
            "seconds": round(st["seconds"], 1)
        }

    def evaluate(self) -> None:
        """One more point of the learning curve (the untrained start is kept apart: flat() judges training only);
        with keep_best, the head's weights kept when this point is the best so far by best_score."""
        point = self.measure()
        self.state["curve"].append(point)
        best = self.state.get("best")
        if self.cfg.keep_best and (best is None or best_score(point["top1"]) > best["score"]):
            self.state["best"] = {"positions": point["positions"], "step": point["step"]}
            self.state["best"] |= {"score": best_score(point["top1"]), "top1": point["top1"]}
            self.best = {name: p.detach().clone() for name, p in self.head.named_parameters()}

    def save(self) -> None:
        """The checkpoint, then the progress file beside it."""
        checkpoint.save(self.ckpt, self.head, self.opt, {**self.state, "settings": self.settings}, self.best)
        st = self.state
        rate = st["seen"] / max(1e-9, st["seconds"])
        last = st["curve"][-1] if st["curve"] else None
        keys = ("step", "planned", "epoch", "chunk", "seen", "stopped")
        checkpoint.write_progress(
            self.ckpt, {**{k: st[k] for k in keys}, "positions_per_s": round(rate, 1), "loss": self.logs, "last": last}
        )

    def restore(self) -> bool:
        """Continue from the checkpoint in ckpt (made with the same settings); False when there is none."""
        saved = checkpoint.load(self.ckpt, self.head, self.opt)
        if saved is None:
            return False
        settings = _upgraded(saved.pop("settings"), self.trainer)
        if settings != _plain(self.settings):
            diff = sorted(k for k in settings if settings[k] != _plain(self.settings).get(k))
            raise ValueError(
                f"The checkpoint in {self.ckpt} was made with other {' and '.join(diff)} settings; "
                "start without --resume, or give another --checkpoint."
            )
        self.state = {"best": None} | saved | {"stopped": None}
        self.best = checkpoint.best_weights(self.ckpt) if self.state["best"] else None
        return True

    def record(self) -> dict:
        """What the manifest keeps of the run: where it stopped and why, the curve, a trend of the losses."""
        st = self.state
        last = [{"step": st["step"], **{k: round(v, 4) for k, v in self.logs.items()}}] if self.logs else []
        hist = st["history"] + [x for x in last if not st["history"] or st["history"][-1]["step"] != st["step"]]
        trend = [hist[i] for i in sorted({round(j * (len(hist) - 1) / 9) for j in range(10)})] if hist else []
        run = {"steps": st["step"], "planned_steps": st["planned"], "positions": st["seen"], "passes": st["epoch"]}
        run |= {"train_seconds": round(st["seconds"]), "stopped": st["stopped"], "curve": st["curve"]}
        run |= {"curve_start": st.get("start")}  # the held-out top-1 of the head before training (None: not measured)
        run |= {"best": st["best"]} if self.cfg.keep_best else {}  # the evaluation whose head was kept
        return run | {"history": trend, **self.settings, "data": self.data.source}


def _plain(data: dict) -> dict:
    """As JSON would give it back (tuples as lists), to compare with a checkpoint's settings."""
    return json.loads(json.dumps(data))


def _upgraded(saved: dict, trainer: Trainer) -> dict:
    """A checkpoint's settings with the options added since it was made at their defaults (it trained with those)."""
    defaults = _plain({"trainer": settings(type(trainer)()), "config": TrainConfig().weights_part()})
    return saved | {k: defaults[k] | saved[k] for k in defaults if isinstance(saved.get(k), dict)}


def finish(
    lm: LoadedModel, trainer: Trainer, run: Run, held: Sequence, folder: Path, extra: dict | None = None
) -> dict:
    """Save the run's head into folder as it will be read back (bf16 weights), with its calibration table measured
    on those weights and its manifest (data, positions, curve, stop, settings, provenance); returns the manifest."""
    with torch.no_grad():
        for p in run.head.parameters():
            p.copy_(p.to(torch.bfloat16))  # the precision a head folder stores
        acc, n = rank_accuracy(trainer.ranks(lm, run.head, held), trainer.n_ranks)
    manifest = {**run.record, "heldout_top1_by_depth": [row[0] for row in acc], "heldout_positions": n}
    earlier = checkpoint.earlier_stages(str((manifest.get("trainer") or {}).get("init") or ""))
    manifest |= {"earlier": earlier} if earlier else {}
    manifest |= {**(extra or {}), "provenance": provenance(lm.describe()).to_dict()}
    trainer.save(lm, run.head.eval().requires_grad_(False), Path(folder), acc, manifest)
    return manifest
