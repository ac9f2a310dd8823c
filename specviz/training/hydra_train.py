"""Hydra training (frozen backbone, Medusa's loss Σ_k 0.8^(k-1)·CE) and calibration: `python -m specviz train hydra`.

Same data as Medusa (the self-distilled shards of specviz.training.distill) and the same objective; the only
difference is what a head reads: at root position t, head k gets h_t and the target's own greedy tokens
x_{t+1..t+k} (teacher forcing: at decode time the branch's tokens are the ones drafted above the node,
and a node is only ever accepted when they were the target's). Training runs in bf16 autocast (the CPU's
AMX), checkpoints are safetensors + JSON, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import json
import math
import time
from collections import abc
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from specviz.core.model import LoadedModel
from specviz.heads.hydra import (
    CALIBRATION_FILE,
    HydraConfig,
    HydraHeads,
    load_heads,
    models_dir,
    new_heads,
    save_heads,
)
from specviz.heads.medusa import frequent_tokens
from specviz.training.medusa_train import IGNORE, draft_map, head_loss, lr_at, target_tokens
from specviz.training.shards import Sequence

Tick = Callable[[int, int, float], None]  # (step, total steps, loss)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings (Medusa's, so the two differ only in what the heads read)."""

    epochs: float = 1.5
    batch: int = 256
    lr: float = 1e-3
    seed: int = 0
    checkpoint_every: int = 200
    minutes: float = 0.0  # stop cleanly (checkpoint first) after this long; 0 = no limit
    bf16: bool = True  # autocast the heads' matmuls to bf16 (training only; decoding stays fp32)


def positions(
    seqs: abc.Sequence[Sequence], num_heads: int, to_draft: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """hidden [N, H] (fp16), branch tokens x_{t+1..t+K} [N, K] (0 past the end) and draft targets [N, K]."""
    hs, bs, ys = [], [], []
    for s in seqs:
        t = s.mask[1:].nonzero().flatten()  # roots t+1 written by the target
        if len(t) == 0:
            continue
        n, tokens = len(s.ids), target_tokens(s)
        branch = torch.zeros((len(t), num_heads), dtype=torch.long)
        tgt = torch.full((len(t), num_heads), IGNORE, dtype=torch.long)
        for k in range(1, num_heads + 1):
            j = t + k  # x_{t+k}: the k-th token of the branch
            ok = j < n
            branch[ok, k - 1] = tokens[j[ok]]
            ok2 = j + 1 < n
            tgt[ok2, k - 1] = to_draft[tokens[j[ok2] + 1]]
        hs.append(s.hidden[t])
        bs.append(branch)
        ys.append(tgt)
    return torch.cat(hs), torch.cat(bs), torch.cat(ys)


def _state(heads: HydraHeads, opt: torch.optim.Optimizer) -> dict[str, torch.Tensor]:
    """Weights and AdamW moments, keyed for safetensors."""
    out = {f"w.{n}": p.detach().contiguous() for n, p in heads.heads.named_parameters()}
    for n, p in heads.heads.named_parameters():
        for key in ("exp_avg", "exp_avg_sq"):
            if key in opt.state.get(p, {}):
                out[f"{key}.{n}"] = opt.state[p][key].contiguous()
    out["vocab"] = heads.vocab.to(torch.int32)
    return out


def save_checkpoint(folder: Path, heads: HydraHeads, opt: torch.optim.Optimizer, step: int, meta: dict) -> None:
    """Weights + moments (safetensors), then the step (JSON, written last: it marks a complete checkpoint)."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    save_file(_state(heads, opt), str(folder / "ckpt.partial"))
    (folder / "ckpt.partial").rename(folder / "ckpt.safetensors")
    (folder / "progress.json").write_text(json.dumps({"step": step, **meta}))


def resume(folder: Path, heads: HydraHeads, opt: torch.optim.Optimizer) -> int:
    """Load a checkpoint into heads and optimizer (same vocabulary required); the step to continue from."""
    from safetensors.torch import load_file

    prog, ckpt = folder / "progress.json", folder / "ckpt.safetensors"
    if not prog.is_file() or not ckpt.is_file():
        return 0
    state = load_file(str(ckpt))
    if not torch.equal(state["vocab"].long(), heads.vocab.cpu()):
        raise ValueError(f"The checkpoint in {folder} has another draft vocabulary; delete it to start over.")
    step = int(json.loads(prog.read_text())["step"])
    heads.heads.load_state_dict({n[2:]: v for n, v in state.items() if n.startswith("w.")})
    for n, p in heads.heads.named_parameters():
        if f"exp_avg.{n}" in state:
            opt.state[p] = {
                "step": torch.tensor(float(step)),
                "exp_avg": state[f"exp_avg.{n}"],
                "exp_avg_sq": state[f"exp_avg_sq.{n}"],
            }
    return step


def _batch_loss(heads: HydraHeads, data: tuple[torch.Tensor, ...], idx: torch.Tensor, bf16: bool) -> torch.Tensor:
    """Σ_k 0.8^(k-1)·CE_k on one batch of positions."""
    hidden, branch, targets = data
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        logits = heads(hidden[idx].float(), branch[idx])
    loss, _ = head_loss(logits.float(), targets[idx])
    return loss


def train_heads(
    lm: LoadedModel, train: list[Sequence], cfg: HydraConfig, tc: TrainConfig, ckpt: Path, tick: Tick | None = None
) -> HydraHeads:
    """Train Hydra heads on frozen hidden states; resumable from ckpt."""
    vocab = frequent_tokens(torch.cat([s.ids[s.mask] for s in train]), cfg.draft_vocab, sorted(lm.eos_ids))
    heads = new_heads(lm, cfg, vocab).train()
    data = positions(train, cfg.num_heads, draft_map(heads.vocab, lm.hf.config.vocab_size))
    n = len(data[0])
    total = max(1, int(tc.epochs * n / tc.batch))
    opt = torch.optim.AdamW(heads.heads.parameters(), lr=tc.lr, weight_decay=0.0)
    step = resume(ckpt, heads, opt)
    gen = torch.Generator().manual_seed(tc.seed)
    perms = [torch.randperm(n, generator=gen) for _ in range(math.ceil(tc.epochs) + 1)]
    meta = {"positions": n, "sequences": len(train), "total_steps": total, "batch": tc.batch, "lr": tc.lr}
    started = time.monotonic()
    while step < total:
        at = (step * tc.batch) % n
        idx = perms[(step * tc.batch) // n][at : at + tc.batch]
        for g in opt.param_groups:
            g["lr"] = lr_at(step, total, tc.lr)
        loss = _batch_loss(heads, data, idx, tc.bf16)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if tick is not None:
            tick(step, total, float(loss))
        late = tc.minutes > 0 and time.monotonic() - started > 60 * tc.minutes
        if step % tc.checkpoint_every == 0 or step == total or late:
            save_checkpoint(ckpt, heads, opt, step, {**meta, "train_seconds": round(time.monotonic() - started)})
        if late:
            break
    return heads.eval().requires_grad_(False)


@torch.inference_mode()
def rank_accuracy(
    heads: HydraHeads, seqs: list[Sequence], ranks: int = 10, batch: int = 1024
) -> tuple[list[list[float]], int]:
    """a_k^(i) = P(the target's token t+1+k is rank i of head k | the branch's true tokens); also positions used."""
    size = max(max(int(s.ids.max()) for s in seqs), int(heads.vocab.max())) + 1
    k_heads = len(heads.heads)
    hidden, branch, targets = positions(seqs, k_heads, draft_map(heads.vocab.cpu(), size))
    hits, counted = torch.zeros(k_heads, ranks), torch.zeros(k_heads)
    for at in range(0, len(hidden), batch):
        logits = heads(hidden[at : at + batch].float(), branch[at : at + batch])  # [B, K, Vd]
        top = logits.topk(ranks, dim=-1).indices
        y = targets[at : at + batch]
        for k in range(k_heads):
            valid = y[:, k] != IGNORE  # OOV never matches a rank: a miss
            hits[k] += ((top[:, k] == y[:, k : k + 1]) & valid[:, None]).float().sum(0)
            counted[k] += float(valid.sum())
    acc = (hits / counted.clamp_min(1)[:, None]).tolist()
    return [[round(a, 6) for a in row] for row in acc], len(hidden)


def write_calibration(
    folder: Path, acc: list[list[float]], n_positions: int, note: str = "", where: dict | None = None
) -> Path:
    """The a_k^(i) table as JSON beside the heads, with where and when it was measured."""
    path = folder / CALIBRATION_FILE
    body = {"accuracy": acc, "top1": [r[0] for r in acc], "positions": n_positions, "ranks": len(acc[0]), "note": note}
    body["provenance"] = where or {}
    path.write_text(json.dumps(body, indent=1))
    return path


def _args(argv: list[str]):
    """`train hydra`'s options, checked (ValueError with one sentence when unusable)."""
    from specviz.training.args import Parser

    ap = Parser(prog="python -m specviz train hydra")
    ap.add_argument("--data-dir", type=Path, default=None, help="distillation shards (default: cache)")
    ap.add_argument("--out", type=Path, default=None, help="heads folder (default: models/hydra)")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=1, help="ResBlocks per head")
    ap.add_argument("--epochs", type=float, default=1.5)
    ap.add_argument("--minutes", type=float, default=0.0, help="stop training after this long (0 = no limit)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--checkpoint", type=Path, default=None)
    ap.add_argument("--calibrate-only", action="store_true", help="only measure the saved heads' accuracy")
    a = ap.parse_args(argv)
    if a.threads < 1 or a.heads < 1 or a.epochs <= 0:
        raise ValueError("threads, heads and epochs must be positive.")
    return a


def _train_and_save(lm: LoadedModel, a, out: Path) -> None:
    """Train with a progress bar and save the heads (bf16) with how they were trained."""
    from tqdm import tqdm

    from specviz.core.paths import cache_root
    from specviz.training.shards import load_dataset

    cfg = HydraConfig(num_heads=a.heads, hidden_size=int(lm.hf.config.hidden_size), layers=a.layers, model=lm.name)
    bar = tqdm(unit="step", desc="train hydra")

    def tick(step: int, total: int, loss: float) -> None:
        bar.total, bar.n = total, step
        if step % 10 == 0 or step == total:
            bar.set_postfix(loss=f"{loss:.3f}")
            bar.refresh()

    ckpt = a.checkpoint or (cache_root() / "hydra-checkpoint")
    t0 = time.monotonic()
    tc = TrainConfig(epochs=a.epochs, minutes=a.minutes)
    heads = train_heads(lm, load_dataset(a.data_dir, "train"), cfg, tc, ckpt, tick)
    bar.close()
    run = json.loads((ckpt / "progress.json").read_text())
    extra = {**run, "train_minutes": round((time.monotonic() - t0) / 60, 1), "epochs": a.epochs, "threads": a.threads}
    save_heads(heads, out, extra, torch.bfloat16)


def main(argv: list[str]) -> int:
    """Train Hydra heads on the distillation set (same data and settings as Medusa's), then calibrate them."""
    from specviz.core.model import load_model
    from specviz.training.shards import load_dataset

    a = _args(argv)
    torch.set_num_threads(a.threads)
    lm = load_model("default", device="cpu", dtype="fp32")
    out = a.out or models_dir()
    if not a.calibrate_only:
        _train_and_save(lm, a, out)
    acc, n = rank_accuracy(load_heads(lm, out), load_dataset(a.data_dir, "heldout"))
    from specviz.core.measure import provenance

    note = "held-out self-distilled ShareGPT continuations (branch tokens given)"
    write_calibration(out, acc, n, note, provenance(lm.describe()).to_dict())
    for k, row in enumerate(acc, start=1):
        print(f"head {k}: " + "  ".join(f"r{i + 1} {v:.3f}" for i, v in enumerate(row[:5])))
    return 0
