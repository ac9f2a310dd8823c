"""Train an EAGLE head on self-distilled features (`python -m specviz train eagle`): fit, checkpoint, evaluate.

Data are the target's own greedy continuations of ShareGPT prompts (specviz.training.distill), with the
final post-norm hidden state at every position; the objective is in specviz.training.eagle_loss.
Checkpoints are safetensors (weights + Adam moments) plus a JSON of the step, so a killed run resumes
where it stopped.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
from tqdm import tqdm

from specviz.core.model import LoadedModel, load_model
from specviz.core.paths import cache_root
from specviz.heads.eagle import DEFAULT_DIR, EagleHead, new_head, save_head
from specviz.training import distill
from specviz.training.eagle_loss import TrainConfig, batches, collate, draft_vocab, loss_fn, rank_accuracy
from specviz.training.eagle_loss import unrolled as unrolled  # the objective, as callers reach it
from specviz.training.shards import Sequence, load_dataset

LossOf = Callable[[], tuple[torch.Tensor, dict[str, float]]]  # a batch's (loss, logged numbers)
Progress = Callable[[int, int, dict[str, float]], None]  # (step, total steps, logs)


def lr_at(step: int, total: int, cfg: TrainConfig) -> float:
    """Linear warm-up over cfg.warmup steps, cosine decay to 5% of the peak at the last step."""
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    frac = (step - cfg.warmup) / max(1, total - cfg.warmup)
    return cfg.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


def ckpt_dir() -> Path:
    """The default checkpoint folder (under the cache root)."""
    return cache_root() / "eagle_train"


def save_ckpt(folder: Path, head: EagleHead, opt: torch.optim.Optimizer, meta: dict) -> None:
    """Weights and Adam moments as safetensors, then the step as JSON (written last: it marks completion)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    state = {f"w.{k}": v.detach().contiguous() for k, v in head.named_parameters()}
    for name, prm in head.named_parameters():
        st = opt.state.get(prm, {})
        for key in ("exp_avg", "exp_avg_sq"):
            if key in st:
                state[f"{key}.{name}"] = st[key].contiguous()
    tmp = folder / "ckpt.partial"
    save_file(state, str(tmp))
    tmp.rename(folder / "ckpt.safetensors")
    (folder / "ckpt.json").write_text(json.dumps(meta, indent=1))


def load_ckpt(
    folder: Path, head: EagleHead, opt: torch.optim.Optimizer, cfg: TrainConfig, sequences: int
) -> dict | None:
    """Restore a checkpoint made with the same settings and data; None when there is none to resume."""
    from safetensors.torch import load_file

    meta_path = folder / "ckpt.json"
    if not meta_path.is_file() or not (folder / "ckpt.safetensors").is_file():
        return None
    meta = json.loads(meta_path.read_text())
    if meta.get("config") != cfg.__dict__ or meta.get("sequences") != sequences:
        return None
    state = load_file(str(folder / "ckpt.safetensors"))
    with torch.no_grad():
        for name, prm in head.named_parameters():
            prm.copy_(state[f"w.{name}"])
            if f"exp_avg.{name}" in state:
                opt.state[prm] = {
                    "step": torch.tensor(float(meta["step"])),
                    "exp_avg": state[f"exp_avg.{name}"],
                    "exp_avg_sq": state[f"exp_avg_sq.{name}"],
                }
    return meta


def optimiser_step(
    head: EagleHead, opt: torch.optim.Optimizer, loss_of: LossOf, lr: float, bf16: bool
) -> dict[str, float]:
    """One AdamW step at `lr` on `loss_of()` (under bf16 autocast when asked), gradients clipped to norm 0.5."""
    for group in opt.param_groups:
        group["lr"] = lr
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss, logs = loss_of()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(head.parameters(), 0.5)
    opt.step()
    return logs


def step_plan(train: list[Sequence], cfg: TrainConfig) -> list[list[int]]:
    """Every optimiser step's batch of sequence indices: whole epochs reshuffled, cut to cfg.epochs."""
    epochs = max(1, math.ceil(cfg.epochs))
    plan = [b for e in range(epochs) for b in batches(train, cfg.batch_tokens, cfg.max_len, cfg.seed + e)]
    return plan[: max(1, round(len(plan) * cfg.epochs / epochs))]


def fit_stats(
    meta: dict, planned: int, train: list[Sequence], coverage: float, feat_std: float, cfg: TrainConfig
) -> dict:
    """What a fit did and on what, stored in the head's config."""
    return {
        "steps": meta["step"],
        "planned_steps": planned,
        "train_seconds": round(meta["seconds"]),
        "positions": int(sum(int(s.mask.sum()) for s in train)),
        "sequences": len(train),
        "draft_vocab_coverage": round(coverage, 4),
        "feat_std": round(feat_std, 4),
        **cfg.__dict__,
    }


def fit(
    lm: LoadedModel,
    train: list[Sequence],
    cfg: TrainConfig,
    folder: Path,
    minutes: float = 0.0,
    progress: Progress | None = None,
) -> tuple[EagleHead, torch.Tensor, dict]:
    """Train (or resume) a head; stop early at the time budget with a checkpoint. Returns (head, W, stats)."""
    draft_ids, coverage = draft_vocab(train, cfg.draft_vocab, lm.hf.config.vocab_size)
    head = new_head(lm.hf.config, lm.name, draft_ids, cfg.seed).train()
    w = lm.lm_head.get_parameter("weight").detach().float()
    weight = w if draft_ids is None else w[draft_ids]  # [Vd, h], frozen
    feat_std = float(torch.cat([s.hidden[:64].float() for s in train[:200]]).std())
    opt = torch.optim.AdamW(head.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.0)
    plan = step_plan(train, cfg)
    meta = load_ckpt(folder, head, opt, cfg, len(train))
    meta = meta or {"step": 0, "seconds": 0.0, "config": cfg.__dict__, "sequences": len(train)}
    t0, last_save, seconds0 = time.perf_counter(), time.perf_counter(), meta["seconds"]
    for step in range(meta["step"], len(plan)):
        batch = collate(train, plan[step], cfg.max_len)
        loss_of = functools.partial(loss_fn, head, lm, batch, cfg, feat_std, weight)
        logs = optimiser_step(head, opt, loss_of, lr_at(step, len(plan), cfg), cfg.bf16)
        meta.update(step=step + 1, seconds=seconds0 + time.perf_counter() - t0)
        if progress is not None:
            progress(step + 1, len(plan), logs)
        out_of_time = minutes > 0 and time.perf_counter() - t0 > 60 * minutes
        if time.perf_counter() - last_save > 120 or out_of_time or step + 1 == len(plan):
            save_ckpt(folder, head, opt, meta)
            last_save = time.perf_counter()
        if out_of_time:
            break
    return head, weight, fit_stats(meta, len(plan), train, coverage, feat_std, cfg)


def finish(
    lm: LoadedModel,
    head: EagleHead,
    weight: torch.Tensor,
    stats: dict,
    train: list[Sequence],
    held: list[Sequence],
    out_dir: Path,
    n_eval: int = 64,
) -> dict:
    """Measure held-out and training rank accuracies, store the calibration, save the head."""
    held_acc = rank_accuracy(head, lm, held[:n_eval], weight, depths=6)
    train_acc = rank_accuracy(head, lm, train[:n_eval], weight, depths=2)
    stats = {
        **stats,
        "heldout_top1_by_depth": [a[0] for a in held_acc],
        "heldout_depth1_top3": held_acc[0][:3],
        "train_depth1_top3": train_acc[0][:3],
        "heldout_sequences": min(n_eval, len(held)),
    }
    head.config = replace(head.config, calibration=held_acc, train=stats)
    save_head(head, out_dir)
    return stats


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """`train eagle`'s options, checked (ValueError with one sentence when unusable)."""
    ap = argparse.ArgumentParser(prog="python -m specviz train eagle", description=main.__doc__)
    ap.add_argument("--prompts", type=int, default=0, help="distil this many prompts first (0: use the data)")
    ap.add_argument("--data-dir", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--epochs", type=float, default=TrainConfig.epochs)
    ap.add_argument("--lr", type=float, default=TrainConfig.lr)
    ap.add_argument("--batch-tokens", type=int, default=TrainConfig.batch_tokens)
    ap.add_argument("--draft-vocab", type=int, default=TrainConfig.draft_vocab)
    ap.add_argument(
        "--ce-weight",
        type=float,
        default=TrainConfig.ce_weight,
        help="weight of the token cross-entropy against the feature loss (EAGLE: 0.1)",
    )
    ap.add_argument("--minutes", type=float, default=0.0, help="stop (resumably) after this long")
    ap.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (1 is faster on a busy machine)")
    ap.add_argument(
        "--unroll",
        type=int,
        default=TrainConfig.unroll,
        help="also train on drafts from the head's own features, to this depth (1 = EAGLE)",
    )
    ap.add_argument("--checkpoint", type=Path, default=None, help="resumable checkpoint folder")
    args = ap.parse_args(argv)
    if args.ce_weight < 0 or args.epochs <= 0:
        raise ValueError(f"--ce-weight must be >= 0 and --epochs > 0, got {args.ce_weight} and {args.epochs}.")
    return args


def distil_first(lm: LoadedModel, prompts: int, data_dir: Path | None) -> None:
    """Build (or extend) the distillation set to `prompts` prompts, with a progress bar."""
    bar = tqdm(desc="distil", unit="shard")

    def tick(done: int, total: int, _name: str) -> None:
        bar.total = total
        bar.update(done - bar.n)

    distill.build_dataset(lm, prompts, out_dir=data_dir, progress=tick)
    bar.close()


def main(argv: list[str] | None = None) -> int:
    """python -m specviz train eagle: build/extend the distilled data, train, evaluate, save the head."""
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    lm = load_model("default", device="cpu", dtype="fp32")
    if args.prompts:
        distil_first(lm, args.prompts, args.data_dir)
    train, held = load_dataset(args.data_dir, "train"), load_dataset(args.data_dir, "heldout")
    cfg = TrainConfig(
        epochs=args.epochs,
        lr=args.lr,
        batch_tokens=args.batch_tokens,
        draft_vocab=args.draft_vocab,
        unroll=args.unroll,
        ce_weight=args.ce_weight,
    )
    folder = args.checkpoint or ckpt_dir()
    if args.fresh:
        (folder / "ckpt.json").unlink(missing_ok=True)
    bar = tqdm(desc="train eagle", unit="step")

    def tick(step: int, total: int, logs: dict[str, float]) -> None:
        bar.total = total
        bar.update(step - bar.n)
        bar.set_postfix({k: f"{v:.3f}" for k, v in logs.items()})

    with torch.enable_grad():
        head, weight, stats = fit(lm, train, cfg, folder, args.minutes, tick)
    bar.close()
    if stats["steps"] < stats["planned_steps"]:
        print(f"Stopped at step {stats['steps']}/{stats['planned_steps']}; run again to resume.")
        return 0
    stats = finish(lm, head, weight, stats, train, held, args.out)
    print(json.dumps(stats, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
