"""Train the EAGLE head on fixed-dataset features (specviz.training.features), streamed shard by shard.

EAGLE's recipe: ShareGPT's responses as they are, the target's features from one teacher-forced
pass, loss = SmoothL1(features) + w · CE against the target's own distribution (computed from the
next feature through the frozen LM head), optionally unrolled on the head's own drafts. Shards are
read in order while the feature build may still be writing them, so training overlaps feature
making; a checkpoint (weights, Adam moments, position in the stream) every few minutes makes a
killed run resume where it stopped. Progress goes to `progress.json` beside the checkpoint.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch

from specviz.core.model import LoadedModel, load_model
from specviz.core.paths import MEDUSA_DIR
from specviz.heads import medusa
from specviz.heads.eagle import DEFAULT_DIR, EagleHead, load_head, new_head, save_head
from specviz.heads.medusa import MedusaHeads
from specviz.training import medusa_train
from specviz.training.eagle_loss import TrainConfig, batches, collate, loss_fn
from specviz.training.eagle_train import load_ckpt, optimiser_step, save_ckpt
from specviz.training.features import LabelledSequence, default_dir, read_shard


def shard_stream(
    folder: Path, start: int, wait_s: float, done_when: int
) -> Iterator[tuple[int, list[LabelledSequence]]]:
    """(shard index, its windows) from `start` on; waits for shards still being written, up to wait_s idle."""
    i, idle = start, 0.0
    while True:
        path = folder / f"shard_{i:05d}.safetensors"
        if path.is_file():
            yield i, read_shard(path)
            i, idle = i + 1, 0.0
            continue
        if i >= done_when or idle > wait_s:
            return
        time.sleep(10)
        idle += 10


def lr_at(seen: int, total: int, peak: float, warm: int) -> float:
    """Linear warm-up over `warm` positions, cosine decay to 5% of peak at `total` positions."""
    if seen < warm:
        return peak * (seen + 1) / warm
    frac = min(1.0, (seen - warm) / max(1, total - warm))
    return peak * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * frac)))


def start_head(lm: LoadedModel, init: Path | None, seed: int) -> EagleHead:
    """The head to train: a copy of a saved head (warm start, its draft vocabulary kept) or a fresh one."""
    if init is not None:
        head = load_head(init, lm.hf.config)
        head.requires_grad_(True)
        return head.float().train()
    base = load_head(DEFAULT_DIR, lm.hf.config)  # the draft vocabulary of the shipped head
    return new_head(lm.hf.config, lm.name, base.draft_ids, seed).train()


def fresh_meta(cfg: TrainConfig, positions: int, init: Path | None) -> dict:
    """The progress record of a run that starts from scratch (a checkpoint's record resumes one)."""
    return {
        "step": 0,
        "seconds": 0.0,
        "config": cfg.__dict__,
        "sequences": positions,
        "seen": 0,
        "shard": 0,
        "epoch": 0,
        "init": str(init or ""),
        "loss": {},
    }


@dataclass
class EagleRun:
    """One streamed EAGLE training run: the head, its optimiser and frozen projection, and its progress record."""

    lm: LoadedModel
    head: EagleHead
    opt: torch.optim.Optimizer
    weight: torch.Tensor  # [Vd, h], the LM-head rows of the draft vocabulary, frozen
    cfg: TrainConfig
    positions: int  # training positions to see in all
    ckpt: Path
    meta: dict  # the progress record (step, seen, shard, epoch, seconds, loss), checkpointed
    feat_std: float = 0.0  # measured on the first shard this process reads
    t0: float = field(default_factory=time.perf_counter)
    last_save: float = field(default_factory=time.perf_counter)
    sec0: float = field(init=False)  # seconds of training before this process (a resumed run's)

    def __post_init__(self) -> None:
        self.sec0 = self.meta["seconds"]

    def shard(self, index: int, seqs: list[LabelledSequence]) -> None:
        """One shard's windows in length-grouped batches; then the record is updated, printed, checkpointed."""
        meta, cfg = self.meta, self.cfg
        self.feat_std = self.feat_std or float(torch.cat([s.hidden[:64].float() for s in seqs]).std())
        for idx in batches(seqs, cfg.batch_tokens, cfg.max_len, cfg.seed + index + 1000 * meta["epoch"]):
            lr = lr_at(meta["seen"], self.positions, cfg.lr, cfg.warmup * cfg.batch_tokens)
            batch = collate(seqs, idx, cfg.max_len)
            loss_of = functools.partial(loss_fn, self.head, self.lm, batch, cfg, self.feat_std, self.weight)
            logs = optimiser_step(self.head, self.opt, loss_of, lr, cfg.bf16)
            meta["step"] += 1
            meta["seen"] += int(batch["mask"].sum())
            meta["loss"] = {k: round(v, 4) for k, v in logs.items()}
        meta["shard"] = index + 1
        meta["seconds"] = round(self.sec0 + time.perf_counter() - self.t0, 1)
        meta["rate"] = round(meta["seen"] / max(1.0, meta["seconds"]), 1)
        if time.perf_counter() - self.last_save > 180:
            save_ckpt(self.ckpt, self.head, self.opt, meta)
            self.last_save = time.perf_counter()
        print(
            json.dumps({k: meta[k] for k in ("step", "seen", "shard", "epoch", "seconds", "rate", "loss")}), flush=True
        )

    def stats(self) -> dict:
        """What the run did, stored in the head's config under train.fixed_data."""
        meta = self.meta
        return {
            "positions_seen": meta["seen"],
            "steps": meta["step"],
            "passes": meta["epoch"] + 1,
            "train_seconds": meta["seconds"],
            "feat_std": round(self.feat_std, 4),
            "init": meta["init"],
            **self.cfg.__dict__,
        }


def train(
    lm: LoadedModel,
    folder: Path,
    ckpt: Path,
    positions: int,
    cfg: TrainConfig,
    init: Path | None,
    shards_total: int,
    wait_s: float = 240.0,
) -> tuple[EagleHead, dict]:
    """Stream shards (cycling over them) until `positions` training positions were seen; resumable."""
    head = start_head(lm, init, cfg.seed)
    weight = lm.lm_head.get_parameter("weight").detach().float()[head.draft_ids]
    opt = torch.optim.AdamW(head.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.0)
    meta = load_ckpt(ckpt, head, opt, cfg, positions) or fresh_meta(cfg, positions, init)
    run = EagleRun(lm, head, opt, weight, cfg, positions, ckpt, meta)
    while meta["seen"] < positions:
        for index, seqs in shard_stream(folder, meta["shard"], wait_s, shards_total):
            run.shard(index, seqs)
            if meta["seen"] >= positions:
                break
        else:  # the stream ran dry: start the next pass over the shards
            if meta["shard"] == 0:
                raise RuntimeError(f"No feature shards in {folder}.")
            meta["shard"], meta["epoch"] = 0, meta["epoch"] + 1
    save_ckpt(ckpt, head, opt, meta)
    return head, run.stats()


MEDUSA_BATCH = 256  # positions per optimiser step, as the self-distilled recipe


def _medusa_shard(
    heads: MedusaHeads,
    opt: torch.optim.Optimizer,
    seqs: list[LabelledSequence],
    to_draft: torch.Tensor,
    gen: torch.Generator,
    seen: int,
    positions: int,
    lr: float,
) -> tuple[int, dict]:
    """One shard's positions in random batches; returns (positions seen, last losses)."""
    hidden, targets = medusa_train.positions(seqs, heads.cfg.num_heads, to_draft)
    order = torch.randperm(len(hidden), generator=gen)
    logs: dict = {}
    for at in range(0, len(order) - MEDUSA_BATCH + 1, MEDUSA_BATCH):
        idx = order[at : at + MEDUSA_BATCH]
        for g in opt.param_groups:
            g["lr"] = lr_at(seen, positions, lr, 20 * MEDUSA_BATCH)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss, accs = medusa_train.head_loss(heads(hidden[idx].float()), targets[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        seen += MEDUSA_BATCH
        logs = {"loss": round(float(loss), 4), "acc": [round(a, 3) for a in accs]}
    return seen, logs


def train_medusa(
    lm: LoadedModel, folder: Path, out: Path, positions: int, lr: float, init: Path, shards_total: int
) -> dict:
    """Medusa heads warm-started from `init`, trained on the stream with the target's argmax as labels."""
    heads = medusa.load_heads(lm, init).train()
    heads.blocks.requires_grad_(True)
    opt = torch.optim.AdamW(heads.blocks.parameters(), lr=lr, weight_decay=0.0)
    to_draft = medusa_train.draft_map(heads.vocab, lm.hf.config.vocab_size)
    gen = torch.Generator().manual_seed(0)
    seen, epoch, shard, t0, last = 0, 0, 0, time.perf_counter(), time.perf_counter()
    while seen < positions:
        for index, seqs in shard_stream(folder, shard, 240.0, shards_total):
            seen, logs = _medusa_shard(heads, opt, seqs, to_draft, gen, seen, positions, lr)
            shard = index + 1
            rec = {"seen": seen, "shard": shard, "epoch": epoch, **logs, "seconds": round(time.perf_counter() - t0)}
            print(json.dumps(rec), flush=True)
            if time.perf_counter() - last > 180:
                medusa.save_heads(heads, out, {"fixed_data": rec}, dtype=torch.bfloat16)
                last = time.perf_counter()
            if seen >= positions:
                break
        else:
            shard, epoch = 0, epoch + 1
    stats = {
        "positions_seen": seen,
        "passes": epoch + 1,
        "batch": MEDUSA_BATCH,
        "lr": lr,
        "train_seconds": round(time.perf_counter() - t0, 1),
        "init": str(init),
        "labels": "target argmax",
    }
    medusa.save_heads(heads.eval(), out, {"fixed_data": stats}, dtype=torch.bfloat16)
    return stats


def main(argv: list[str] | None = None) -> int:
    """python -m specviz.training.fixed_train: EAGLE head on fixed-dataset features, streamed and resumable."""
    ap = argparse.ArgumentParser(prog="python -m specviz.training.fixed_train", description=main.__doc__)
    ap.add_argument("--head", choices=["eagle", "medusa"], default="eagle")
    ap.add_argument("--features", type=Path, default=default_dir() / "train-bf16")
    ap.add_argument("--positions", type=int, default=3_000_000, help="training positions to see in all")
    ap.add_argument("--shards", type=int, default=10**9, help="stop waiting for shards past this index")
    ap.add_argument("--init", type=Path, default=None, help="warm-start from this head folder")
    ap.add_argument("--out", type=Path, default=Path("/tmp/eagle-fixed"))
    ap.add_argument("--checkpoint", type=Path, default=None)
    ap.add_argument("--lr", type=float, default=TrainConfig.lr)
    ap.add_argument("--unroll", type=int, default=TrainConfig.unroll)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    lm = load_model("default", device="cpu", dtype="fp32", progress=lambda _m: None)
    if args.head == "medusa":
        with torch.enable_grad():
            stats = train_medusa(
                lm, args.features, args.out, args.positions, args.lr, args.init or MEDUSA_DIR, args.shards
            )
        print(json.dumps(stats, indent=1))
        return 0
    cfg = TrainConfig(lr=args.lr, unroll=args.unroll, bf16=True, epochs=1.0)
    ckpt = args.checkpoint or args.out / "checkpoint"
    with torch.enable_grad():
        head, stats = train(lm, args.features, ckpt, args.positions, cfg, args.init, args.shards)
    head.config = replace(head.config, train={**head.config.train, "fixed_data": stats})
    save_head(head.eval(), args.out)
    print(json.dumps(asdict(head.config)["train"], indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
