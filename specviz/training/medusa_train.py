"""Medusa-1 training (frozen backbone, loss Σ_k 0.8^(k-1)·CE) and calibration of rank accuracies a_k^(i).

Training reads the self-distilled shards (specviz.training.distill): head k at position t learns the
model's own greedy token t+1+k from the stored hidden state h_t. Checkpoints (weights, AdamW moments,
step) are safetensors + JSON, so an interrupted run resumes where it stopped.
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
from specviz.heads.medusa import (
    CALIBRATION_FILE,
    HeadsConfig,
    MedusaHeads,
    frequent_tokens,
    load_heads,
    new_heads,
    save_heads,
)
from specviz.training.shards import Sequence

DECAY = 0.8  # head k's loss weight is DECAY**(k-1), as in Medusa
IGNORE = -100  # no target: the sequence ended before token t+1+k
OOV = -1  # the target is outside the draft vocabulary: not trained on, but a miss when calibrating

Tick = Callable[[int, int, float], None]  # (step, total steps, loss)


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings for the heads."""

    epochs: float = 1.5  # passes over the training positions (fractions allowed)
    batch: int = 256  # positions per step
    lr: float = 1e-3  # AdamW peak learning rate, cosine decay after 2% warm-up
    seed: int = 0
    checkpoint_every: int = 200  # steps between resumable checkpoints
    minutes: float = 0.0  # stop (cleanly, with a checkpoint) after this long; 0 = no limit
    # weight of the soft target (the model's own distribution there) against the greedy token. A 1-epoch
    # ablation on 1,728 sequences (held-out top-1, heads 1-4) found no gain: 0.286/0.157/0.106/0.086 at 0,
    # 0.287/0.159/0.106/0.084 at 0.5, 0.283/0.157/0.105/0.082 at 1; so the committed heads use 0.
    soft: float = 0.0


def target_tokens(s: Sequence) -> torch.Tensor:
    """The token the target itself would put at each position [L].

    Self-distilled continuations are the target's own greedy tokens already; fixed-dataset windows
    (specviz.training.features) carry the target's argmax, label[j] for position j + 1.
    """
    label = getattr(s, "label", None)
    if label is None:
        return s.ids
    return torch.cat([s.ids[:1], label[:-1].long()])


def positions(
    seqs: abc.Sequence[Sequence], num_heads: int, to_draft: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack training positions: hidden [N, H] (fp16) and draft-vocab targets [N, K].

    Position t is used when token t+1 (the root) is a continuation token; head k's target is the
    draft row of the target's token t+1+k, OOV outside the draft vocabulary, IGNORE past the end.
    """
    hs, ys = [], []
    for s in seqs:
        t = s.mask[1:].nonzero().flatten()  # roots t+1 that the target wrote (continuation / assistant)
        if len(t) == 0:
            continue
        n = len(s.ids)
        tokens = target_tokens(s)
        tgt = torch.full((len(t), num_heads), IGNORE, dtype=torch.long)
        for k in range(1, num_heads + 1):
            j = t + 1 + k
            ok = j < n
            tgt[ok, k - 1] = to_draft[tokens[j[ok]]]
        hs.append(s.hidden[t])
        ys.append(tgt)
    return torch.cat(hs), torch.cat(ys)


def draft_map(vocab: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """token id → draft-vocab row, OOV outside it; [V]."""
    m = torch.full((vocab_size,), OOV, dtype=torch.long)
    m[vocab] = torch.arange(len(vocab))
    return m


def head_loss(
    logits: torch.Tensor, targets: torch.Tensor, teacher: torch.Tensor | None = None, soft: float = 0.0
) -> tuple[torch.Tensor, list[float]]:
    """Σ_k DECAY^(k-1) · CE_k over logits [B, K, Vd] and targets [B, K]; also each head's top-1 accuracy.

    With `teacher` (the model's own draft-vocabulary probabilities at each target, [B, K, Vd]) and
    soft > 0, CE_k = (1 - soft) · CE(hard token) + soft · CE(teacher distribution).
    """
    total = logits.new_zeros(())
    accs = []
    for k in range(logits.shape[1]):
        y = targets[:, k]
        ok = y >= 0
        if not ok.any():
            accs.append(float("nan"))
            continue
        ce = torch.nn.functional.cross_entropy(logits[ok, k], y[ok])
        if teacher is not None and soft > 0:
            valid = y != IGNORE  # OOV tokens still have a teacher distribution over the draft vocabulary
            logq = torch.log_softmax(logits[valid, k], dim=-1)
            ce = (1 - soft) * ce + soft * -(teacher[valid, k] * logq).sum(-1).mean()
        total = total + DECAY**k * ce
        accs.append(float((logits[ok, k].argmax(-1) == y[ok]).float().mean()))
    return total, accs


@torch.no_grad()
def teacher_probs(heads: MedusaHeads, hidden: torch.Tensor, targets: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """The model's own distribution over the draft vocabulary for each head's target token, [B, K, Vd].

    Row r of `hidden` is h_t; head k's target is token t+1+k, which the model predicts from h_{t+k},
    stored k rows further down in the same sequence (`positions` keeps each sequence contiguous).
    Rows whose target is IGNORE get a zero distribution.
    """
    k_heads = targets.shape[1]
    rows = (idx[:, None] + torch.arange(1, k_heads + 1)[None, :]).clamp_max(len(hidden) - 1)  # [B, K]
    valid = targets[idx] != IGNORE
    logits = hidden[rows].float() @ heads.proj.T  # [B, K, Vd]
    return torch.softmax(logits, dim=-1) * valid[..., None]


def lr_at(step: int, total: int, peak: float) -> float:
    """Linear warm-up over 2% of steps, then cosine decay to 10% of peak."""
    warm = max(1, total // 50)
    if step < warm:
        return peak * (step + 1) / warm
    frac = (step - warm) / max(1, total - warm)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


def _opt_state(opt: torch.optim.Optimizer, heads: MedusaHeads) -> dict[str, torch.Tensor]:
    """AdamW's moments of every block parameter, keyed for safetensors."""
    names = {id(p): n for n, p in heads.blocks.named_parameters()}
    out = {}
    for p, st in opt.state.items():
        for key in ("exp_avg", "exp_avg_sq"):
            out[f"{names[id(p)]}.{key}"] = st[key].contiguous()
    return out


def save_checkpoint(folder: Path, heads: MedusaHeads, opt: torch.optim.Optimizer, step: int, meta: dict) -> None:
    """Weights + AdamW moments (safetensors) and the step (JSON), written atomically."""
    from safetensors.torch import save_file

    save_heads(heads, folder, {"step": step, **meta})
    tmp = folder / "optimizer.safetensors.partial"
    save_file(_opt_state(opt, heads), str(tmp))
    tmp.rename(folder / "optimizer.safetensors")
    (folder / "progress.json").write_text(json.dumps({"step": step, **meta}))


def resume(folder: Path, lm: LoadedModel, heads: MedusaHeads, opt: torch.optim.Optimizer) -> int:
    """Load a checkpoint into heads and optimizer; return the step to continue from (0 if none)."""
    from safetensors.torch import load_file

    prog = folder / "progress.json"
    if not prog.is_file() or not (folder / "optimizer.safetensors").is_file():
        return 0
    step = int(json.loads(prog.read_text())["step"])
    heads.blocks.load_state_dict(load_heads(lm, folder).blocks.state_dict())
    moments = load_file(str(folder / "optimizer.safetensors"))
    for name, p in heads.blocks.named_parameters():
        opt.state[p] = {
            "step": torch.tensor(float(step)),
            "exp_avg": moments[f"{name}.exp_avg"],
            "exp_avg_sq": moments[f"{name}.exp_avg_sq"],
        }
    return step


def train_heads(
    lm: LoadedModel, train: list[Sequence], cfg: HeadsConfig, tc: TrainConfig, ckpt: Path, tick: Tick | None = None
) -> MedusaHeads:
    """Train Medusa-1 heads on frozen hidden states; resumable from `ckpt`."""
    conts = torch.cat([s.ids[s.mask] for s in train])
    vocab = frequent_tokens(conts, cfg.draft_vocab, sorted(lm.eos_ids))
    heads = new_heads(lm, cfg, vocab)
    if (ckpt / "progress.json").is_file():  # resume with the checkpoint's own vocabulary
        heads = load_heads(lm, ckpt)
        heads.blocks.requires_grad_(True)
    heads.train()
    hidden, targets = positions(train, cfg.num_heads, draft_map(heads.vocab, lm.hf.config.vocab_size))
    total = max(1, int(tc.epochs * len(hidden) / tc.batch))
    opt = torch.optim.AdamW(heads.blocks.parameters(), lr=tc.lr, weight_decay=0.0)
    step = resume(ckpt, lm, heads, opt)
    gen = torch.Generator().manual_seed(tc.seed)
    perms = [torch.randperm(len(hidden), generator=gen) for _ in range(math.ceil(tc.epochs) + 1)]
    meta = {"positions": len(hidden), "total_steps": total, "batch": tc.batch, "lr": tc.lr, "soft": tc.soft}
    started = time.monotonic()
    while step < total:
        order = perms[(step * tc.batch) // len(hidden)]
        at = (step * tc.batch) % len(hidden)
        idx = order[at : at + tc.batch]
        for g in opt.param_groups:
            g["lr"] = lr_at(step, total, tc.lr)
        teacher = teacher_probs(heads, hidden, targets, idx) if tc.soft > 0 else None
        loss, _ = head_loss(heads(hidden[idx].float()), targets[idx], teacher, tc.soft)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        step += 1
        if tick is not None:
            tick(step, total, float(loss))
        out_of_time = tc.minutes > 0 and time.monotonic() - started > 60 * tc.minutes
        if step % tc.checkpoint_every == 0 or step == total or out_of_time:
            save_checkpoint(ckpt, heads, opt, step, meta)
        if out_of_time:
            break
    return heads.eval().requires_grad_(False)


@torch.inference_mode()
def rank_accuracy(
    heads: MedusaHeads, seqs: list[Sequence], ranks: int = 10, batch: int = 1024
) -> tuple[list[list[float]], int]:
    """a_k^(i) = P(the model's true token t+1+k is rank i of head k) on seqs; also the positions used."""
    size = max(max(int(s.ids.max()) for s in seqs), int(heads.vocab.max())) + 1
    to_draft = draft_map(heads.vocab.cpu(), size)
    k_heads = len(heads.blocks)
    hidden, targets = positions(seqs, k_heads, to_draft)
    hits = torch.zeros(k_heads, ranks)
    counted = torch.zeros(k_heads)
    for at in range(0, len(hidden), batch):
        logits = heads(hidden[at : at + batch].float())  # [B, K, Vd]
        top = logits.topk(ranks, dim=-1).indices  # [B, K, ranks]
        y = targets[at : at + batch]  # [B, K]; OOV never matches a rank, so it counts as a miss
        for k in range(k_heads):
            valid = y[:, k] != IGNORE
            match = (top[:, k] == y[:, k : k + 1]) & valid[:, None]
            hits[k] += match.float().sum(0)
            counted[k] += float(valid.sum())
    acc = (hits / counted.clamp_min(1)[:, None]).tolist()
    return [[round(a, 6) for a in row] for row in acc], len(hidden)


def write_calibration(folder: Path, acc: list[list[float]], n_positions: int, note: str = "") -> Path:
    """Store the a_k^(i) table as JSON beside the heads."""
    path = folder / CALIBRATION_FILE
    top1 = [row[0] for row in acc]
    path.write_text(
        json.dumps(
            {"accuracy": acc, "top1": top1, "positions": n_positions, "ranks": len(acc[0]) if acc else 0, "note": note},
            indent=1,
        )
    )
    return path
