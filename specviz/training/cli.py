"""`python -m specviz train <head> …`: build distillation data, train heads, measure rank accuracy.

`calibrate <head>` (held-out tables, offline replay, the live sweeps) is dispatched by specviz.tuning.calibrate;
Medusa's held-out table (calibrate_medusa) is here, since `train medusa` ends with it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
from tqdm import tqdm

from specviz.core.model import LoadedModel, ModelError, load_model
from specviz.core.paths import cache_root
from specviz.heads import medusa
from specviz.training import distill, eagle3_train, eagle_train, hydra_train, medusa_train
from specviz.training.args import Parser
from specviz.training.shards import DataError, load_dataset

HEADS = ("medusa", "hydra", "eagle", "eagle3")


def fail(message: str) -> int:
    """Print one error line; exit code 2."""
    print(f"specviz: error: {message}", file=sys.stderr)
    return 2


def train(head: str, argv: list[str]) -> int:
    """Dispatch `train <head>`; returns an exit code."""
    if head == "hydra":
        return guard(hydra_train.main, argv)
    if head == "eagle":
        return eagle_train.main(argv)
    if head == "eagle3":
        return guard(eagle3_train.main, argv)
    if head != "medusa":
        return fail(f"Unknown head {head!r}; choose from {', '.join(HEADS)}.")
    return guard(train_medusa, argv)


def guard(fn: Callable[[list[str]], int], argv: list[str]) -> int:
    """Run a command; known failures become one line on stderr and exit code 2."""
    try:
        return fn(argv)
    except (ValueError, DataError, ModelError, OSError) as exc:
        return fail(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)


def _medusa_parser(prog: str) -> Parser:
    """The options `train medusa` and `calibrate medusa` share."""
    ap = Parser(prog=prog)
    ap.add_argument("--data-dir", type=Path, default=None, help="distillation shards (default: cache)")
    ap.add_argument("--out", type=Path, default=None, help="heads folder (default: models/medusa)")
    ap.add_argument("--ranks", type=int, default=10, help="ranks per head in the calibration table")
    return ap


def _train_medusa_args(argv: list[str]) -> argparse.Namespace:
    """`train medusa`'s options, checked (ValueError with one sentence when unusable)."""
    ap = _medusa_parser("python -m specviz train medusa")
    ap.add_argument("--prompts", type=int, default=1280, help="ShareGPT prompts to distil")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=32, help="prompts per generation batch")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--draft-vocab", type=int, default=8192)
    ap.add_argument("--layers", type=int, default=2, help="ResBlocks per head")
    ap.add_argument("--epochs", type=float, default=1.5)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument(
        "--soft",
        type=float,
        default=medusa_train.TrainConfig.soft,
        help="weight of the model's own distribution as the target, against its greedy token (0-1)",
    )
    ap.add_argument("--minutes", type=float, default=0.0, help="stop training after this long (0 = no limit)")
    ap.add_argument("--checkpoint", type=Path, default=None, help="resumable checkpoint folder")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (1 is faster on a busy machine)")
    a = ap.parse_args(argv)
    if a.threads < 1:
        raise ValueError(f"--threads must be at least 1, got {a.threads}.")
    if a.heads < 1 or a.draft_vocab < 16 or a.prompts < 1 or a.epochs <= 0:
        raise ValueError("heads, prompts and epochs must be positive and draft-vocab at least 16.")
    if not 0 <= a.soft <= 1:
        raise ValueError(f"--soft must be between 0 and 1, got {a.soft}.")
    return a


def _distil(lm: LoadedModel, a: argparse.Namespace) -> Path:
    """Build (or extend) the distillation set the options ask for, with a progress bar; return its folder."""
    bar = tqdm(total=(a.prompts + a.batch_size - 1) // a.batch_size, unit="shard", desc="distil")

    def shard_done(done: int, _total: int, _note: str) -> None:
        bar.update(done - bar.n)

    data = distill.build_dataset(lm, a.prompts, a.max_new_tokens, a.batch_size, a.data_dir, shard_done)
    bar.close()
    return data


def _train_heads(
    lm: LoadedModel, data: Path, cfg: medusa.HeadsConfig, tc: medusa_train.TrainConfig, ckpt: Path
) -> medusa.MedusaHeads:
    """Train the heads on the set's training shards, with a progress bar showing the loss."""
    tbar = tqdm(unit="step", desc="train")

    def tick(step: int, total: int, loss: float) -> None:
        tbar.total = total
        tbar.n = step
        if step % 10 == 0 or step == total:
            tbar.set_postfix(loss=f"{loss:.3f}")
            tbar.refresh()

    heads = medusa_train.train_heads(lm, load_dataset(data, "train"), cfg, tc, ckpt, tick)
    tbar.close()
    return heads


def train_medusa(argv: list[str]) -> int:
    """Build (or extend) the distillation set, train Medusa-1 heads, then calibrate them."""
    a = _train_medusa_args(argv)
    torch.set_num_threads(a.threads)
    lm = load_model("default", device="cpu", dtype="fp32")
    data = _distil(lm, a)
    cfg = medusa.HeadsConfig(
        num_heads=a.heads,
        hidden_size=int(lm.hf.config.hidden_size),
        layers=a.layers,
        draft_vocab=a.draft_vocab,
        model=lm.name,
    )
    tc = medusa_train.TrainConfig(epochs=a.epochs, lr=a.lr, minutes=a.minutes, soft=a.soft)
    ckpt = a.checkpoint or (cache_root() / "medusa-checkpoint")
    t0 = time.monotonic()
    heads = _train_heads(lm, data, cfg, tc, ckpt)
    out = a.out or medusa.models_dir()
    run = json.loads((ckpt / "progress.json").read_text())  # positions, steps, batch, lr of this run
    kept = ("positions", "total_steps", "batch", "lr", "soft")
    medusa.save_heads(
        heads,
        out,
        {
            "train_minutes": round((time.monotonic() - t0) / 60, 1),
            "epochs": a.epochs,
            **{k: run[k] for k in kept if k in run},
        },
        dtype=torch.bfloat16,
    )
    print(f"saved heads to {out} ({(out / medusa.WEIGHTS_FILE).stat().st_size / 1e6:.1f} MB)")
    return calibrate_medusa([*_passthrough(a), "--heads-dir", str(out)])


def _passthrough(a: argparse.Namespace) -> list[str]:
    """The options `train medusa` hands on to `calibrate medusa`."""
    return (["--data-dir", str(a.data_dir)] if a.data_dir else []) + ["--ranks", str(a.ranks)]


def calibrate_medusa(argv: list[str]) -> int:
    """Measure a_k^(i) on the held-out shards and write calibration.json beside the heads."""
    ap = _medusa_parser("python -m specviz calibrate medusa")
    ap.add_argument("--heads-dir", type=Path, default=None, help="heads to calibrate (default: models/medusa)")
    a = ap.parse_args(argv)
    if not 1 <= a.ranks <= 64:
        raise ValueError(f"--ranks must be between 1 and 64, got {a.ranks}.")
    lm = load_model("default", device="cpu", dtype="fp32")
    folder = a.heads_dir or a.out or medusa.models_dir()
    heads = medusa.load_heads(lm, folder)
    acc, n = medusa_train.rank_accuracy(heads, load_dataset(a.data_dir, "heldout"), a.ranks)
    path = medusa_train.write_calibration(folder, acc, n, "held-out self-distilled ShareGPT continuations")
    print(f"wrote {path} from {n} held-out positions")
    for k, row in enumerate(acc, start=1):
        print(f"head {k}: " + "  ".join(f"r{i + 1} {v:.3f}" for i, v in enumerate(row[:5])))
    return 0
