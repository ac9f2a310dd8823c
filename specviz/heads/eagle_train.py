"""Train an EAGLE head on self-distilled features: SmoothL1 on the next feature + 0.1 × CE on its tokens.

Data are the target's own greedy continuations of ShareGPT prompts (specviz.heads.distill), with the
final post-norm hidden state at every position. The head sees the pair (f_j, x_{j+1}) at position j
and is trained to output f_{j+1}; the loss counts continuation positions only. Checkpoints are
safetensors (weights + Adam moments) plus a JSON of the step, so a killed run resumes where it stopped.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from specviz.heads.distill import Sequence
from specviz.heads.eagle import DEFAULT_DIR, EagleHead, new_head, save_head
from specviz.paths import cache_root


@dataclass(frozen=True)
class TrainConfig:
    """Settings of one training run (all of them go into the checkpoint, so resuming is exact)."""

    # The defaults made the committed head (models/eagle): 6,912 training sequences, 47 min on 1 core.
    epochs: float = 2.0  # passes over the training split (more data beats more epochs here)
    batch_tokens: int = 2048  # padded tokens per optimiser step
    lr: float = 1e-3  # peak AdamW learning rate (linear warm-up, cosine decay)
    warmup: int = 30  # warm-up steps
    # EAGLE: L = SmoothL1(features) + 0.1 × CE(tokens). A 1-epoch ablation on 1,728 sequences gave held-out
    # top-1 by depth 0.293/0.246/0.224 at 0.1, 0.302/0.262/0.225 at 1.0 and 0.302/0.260/0.224 at 3.0.
    ce_weight: float = 0.1
    noise: float = 0.2  # EAGLE: uniform noise U(-a/2, a/2) on input features, in units of their std
    draft_vocab: int = 8192  # most frequent continuation tokens drafted from (0 = full vocabulary)
    max_len: int = 512  # longer sequences are cut
    seed: int = 0
    unroll: int = 2  # > 1: also train depth-2… drafts made from the head's own features (see unrolled)
    unroll_weight: float = 0.5  # weight of each unrolled depth's loss
    # bf16 autocast (AMX units): the head's matmuls run about 4× faster; the weights and Adam stay fp32
    bf16: bool = False


def draft_vocab(seqs: list[Sequence], size: int, vocab: int) -> tuple[torch.Tensor | None, float]:
    """The `size` most frequent continuation tokens (sorted ids) and the share of continuations they cover."""
    counts = Counter(int(t) for s in seqs for t in s.ids[s.mask].tolist())
    total = sum(counts.values())
    if size <= 0 or size >= vocab:
        return None, 1.0
    top = [t for t, _ in counts.most_common(size)]
    top += [t for t in range(vocab) if t not in counts][: size - len(top)]  # pad a tiny corpus
    return torch.tensor(sorted(top)), sum(counts[t] for t in top) / max(1, total)


def batches(seqs: list[Sequence], batch_tokens: int, max_len: int, seed: int) -> list[list[int]]:
    """Group sequences of similar length so padding stays small; the order is shuffled by seed."""
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i].ids))
    out, cur, width = [], [], 0
    for i in order:
        w = min(len(seqs[i].ids), max_len)
        if cur and max(width, w) * (len(cur) + 1) > batch_tokens:
            out.append(cur)
            cur, width = [], 0
        cur.append(i)
        width = max(width, w)
    if cur:
        out.append(cur)
    random.Random(seed).shuffle(out)
    return out


def collate(seqs: list[Sequence], idx: list[int], max_len: int) -> dict[str, torch.Tensor]:
    """Right-padded pairs: feats f_j, tokens x_{j+1}, target f_{j+1}, loss mask on continuation targets."""
    width = min(max(len(seqs[i].ids) for i in idx), max_len) - 1
    h = seqs[idx[0]].hidden.shape[1]
    feats, target = torch.zeros(len(idx), width, h), torch.zeros(len(idx), width, h)
    tokens = torch.zeros(len(idx), width, dtype=torch.long)
    mask = torch.zeros(len(idx), width, dtype=torch.bool)
    for r, i in enumerate(idx):
        s = seqs[i]
        n = min(len(s.ids), max_len) - 1
        feats[r, :n], target[r, :n] = s.hidden[:n].float(), s.hidden[1 : n + 1].float()
        tokens[r, :n], mask[r, :n] = s.ids[1 : n + 1], s.mask[1 : n + 1]
    return {"feats": feats, "tokens": tokens, "target": target, "mask": mask}


def _depth_loss(out: torch.Tensor, tgt: torch.Tensor, weight: torch.Tensor, ce_weight: float):
    """SmoothL1 on predicted features + ce_weight × soft cross-entropy over the draft vocabulary."""
    reg = F.smooth_l1_loss(out, tgt)
    with torch.no_grad():
        p = torch.softmax(tgt @ weight.T, dim=-1)
    logq = torch.log_softmax(out @ weight.T, dim=-1)
    ce = -(p * logq).sum(-1).mean()
    acc = float((logq.argmax(-1) == p.argmax(-1)).float().mean())
    return reg + ce_weight * ce, reg, ce, acc


def unrolled(head: EagleHead, feats: torch.Tensor, emb: torch.Tensor, depths: int) -> list[torch.Tensor]:
    """Head outputs [B, T, h] at depth 1 (true features) … depth `depths` (features the head drafted).

    At inference a depth-d draft row sees its true context plus its own earlier drafts, and its input
    feature is the head's previous prediction, not the target's. Depth d here reuses depth d-1's
    outputs, shifted one row, under the exact inference mask (`depth_mask`), so row i at depth d
    depends on true features at rows ≤ i-(d-1) only (tested).
    """
    from transformers import DynamicCache  # the stock cache: its appends are autograd-safe

    B, T = feats.shape[:2]
    pos = torch.arange(T).expand(B, -1)
    cache = DynamicCache(config=head.config.llama_config())
    outs: list[torch.Tensor] = []
    for d in range(1, depths + 1):
        if outs:  # row i's input is row i-1's prediction one depth up
            feats = torch.cat([torch.zeros_like(outs[-1][:, :1]), outs[-1][:, :-1]], dim=1)
        # a boolean mask (True = may attend) is valid whatever dtype autocast picks for the queries
        outs.append(head(feats, emb, pos, cache, depth_mask(T, d)[None, None]))
    return outs


def loss_fn(
    head: EagleHead, lm, b: dict[str, torch.Tensor], cfg: TrainConfig, feat_std: float, weight: torch.Tensor
) -> tuple[torch.Tensor, dict[str, float]]:
    """EAGLE's loss on the true pairs; with cfg.unroll > 1 (as in HASS and EAGLE-3), plus unroll_weight ×
    the same loss on each deeper depth's drafts from the head's own features (see `unrolled`)."""
    feats = b["feats"]
    if cfg.noise > 0:
        feats = feats + (torch.rand_like(feats) - 0.5) * cfg.noise * feat_std
    with torch.no_grad():
        emb = lm.hf.get_input_embeddings()(b["tokens"]).float()
    total, logs = None, {}
    for d, out in enumerate(unrolled(head, feats, emb, max(1, cfg.unroll)), start=1):
        rows = b["mask"].clone()
        rows[:, : d - 1] = False  # the first d-1 rows have no drafted input yet
        part, reg, ce, acc = _depth_loss(out[rows], b["target"][rows], weight, cfg.ce_weight)
        if d == 1:
            total, logs = part, {"l1": float(reg.detach()), "ce": float(ce.detach()), "acc": acc}
        else:
            total, logs[f"acc{d}"] = total + cfg.unroll_weight * part, acc
    return total, logs


def lr_at(step: int, total: int, cfg: TrainConfig) -> float:
    if step < cfg.warmup:
        return cfg.lr * (step + 1) / cfg.warmup
    frac = (step - cfg.warmup) / max(1, total - cfg.warmup)
    return cfg.lr * (0.05 + 0.95 * 0.5 * (1 + math.cos(math.pi * min(1.0, frac))))


def ckpt_dir() -> Path:
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


def depth_mask(T: int, d: int) -> torch.Tensor:
    """Keys [true pairs | depth-2 … depth-d drafts] a depth-d draft row may see, bool [T, d·T].

    Row i drafts from its own features: it sees true pairs j ≤ i-(d-1), its depth-e ancestors at
    row i-(d-e), and itself, exactly as at inference.
    """
    see = torch.zeros(T, d * T, dtype=torch.bool)
    i = torch.arange(T)
    see[:, :T] = i[None, :] <= (i[:, None] - (d - 1))
    for e in range(2, d + 1):
        rows = i[i - (d - e) >= 0]
        see[rows, (e - 1) * T + rows - (d - e)] = True
    return see


@torch.no_grad()
def sequence_ranks(
    head: EagleHead, lm, s: Sequence, weight: torch.Tensor, tok2draft: torch.Tensor, depths: int
) -> list[torch.Tensor]:
    """Rank of the target's next token in the draft at each depth, drafting from the head's own features."""
    ids, T = s.ids, len(s.ids) - 1
    emb = lm.hf.get_input_embeddings()(ids[1:]).float()[None]
    start, out = int(s.mask.float().argmax()), []
    for d, o in enumerate(unrolled(head, s.hidden[:-1].float()[None], emb, depths), start=1):
        logits = o[0] @ weight.T  # [T, Vd]
        rows = torch.arange(max(0, start + d - 2), T - 1)  # root N = i-d+2 is a continuation token
        tgt = tok2draft[ids[rows + 2]]
        hit = logits[rows].gather(1, tgt.clamp_min(0)[:, None])[:, 0]
        rank = (logits[rows] > hit[:, None]).sum(-1)
        out.append(torch.where(tgt >= 0, rank, torch.full_like(rank, 10**6)))
    return out


def rank_accuracy(
    head: EagleHead, lm, seqs: list[Sequence], weight: torch.Tensor, depths: int = 4, ranks: int = 8
) -> list[list[float]]:
    """acc[d][i] = P(the target's token is rank i of the depth-(d+1) draft), over the given sequences."""
    tok2draft = torch.full((lm.hf.config.vocab_size,), -1, dtype=torch.long)
    tok2draft[head.draft_ids] = torch.arange(head.draft_ids.numel())
    per_depth: list[list[torch.Tensor]] = [[] for _ in range(depths)]
    head.eval()
    for s in seqs:
        for d, r in enumerate(sequence_ranks(head, lm, s, weight, tok2draft, depths)):
            per_depth[d].append(r)
    head.train()
    acc = []
    for rs in per_depth:
        r = torch.cat(rs) if rs else torch.zeros(0, dtype=torch.long)
        acc.append([round(float((r == i).float().mean()), 4) if len(r) else 0.0 for i in range(ranks)])
    return acc


def fit(
    lm, train: list[Sequence], cfg: TrainConfig, folder: Path, minutes: float = 0.0, progress=None
) -> tuple[EagleHead, torch.Tensor, dict]:
    """Train (or resume) a head; stop early at the time budget with a checkpoint. Returns (head, W, stats)."""
    draft_ids, coverage = draft_vocab(train, cfg.draft_vocab, lm.hf.config.vocab_size)
    head = new_head(lm.hf.config, lm.name, draft_ids, cfg.seed).train()
    w = lm.lm_head.weight.detach().float()
    weight = w if draft_ids is None else w[draft_ids]  # [Vd, h], frozen
    feat_std = float(torch.cat([s.hidden[:64].float() for s in train[:200]]).std())
    opt = torch.optim.AdamW(head.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.0)
    epochs = max(1, math.ceil(cfg.epochs))
    plan = [b for e in range(epochs) for b in batches(train, cfg.batch_tokens, cfg.max_len, cfg.seed + e)]
    plan = plan[: max(1, round(len(plan) * cfg.epochs / epochs))]
    meta = load_ckpt(folder, head, opt, cfg, len(train))
    meta = meta or {"step": 0, "seconds": 0.0, "config": cfg.__dict__, "sequences": len(train)}
    t0, last_save, seconds0 = time.perf_counter(), time.perf_counter(), meta["seconds"]
    for step in range(meta["step"], len(plan)):
        for group in opt.param_groups:
            group["lr"] = lr_at(step, len(plan), cfg)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.bf16):
            loss, logs = loss_fn(head, lm, collate(train, plan[step], cfg.max_len), cfg, feat_std, weight)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(head.parameters(), 0.5)
        opt.step()
        meta.update(step=step + 1, seconds=seconds0 + time.perf_counter() - t0)
        if progress is not None:
            progress(step + 1, len(plan), logs)
        out_of_time = minutes > 0 and time.perf_counter() - t0 > 60 * minutes
        if time.perf_counter() - last_save > 120 or out_of_time or step + 1 == len(plan):
            save_ckpt(folder, head, opt, meta)
            last_save = time.perf_counter()
        if out_of_time:
            break
    stats = {
        "steps": meta["step"],
        "planned_steps": len(plan),
        "train_seconds": round(meta["seconds"]),
        "positions": int(sum(int(s.mask.sum()) for s in train)),
        "sequences": len(train),
        "draft_vocab_coverage": round(coverage, 4),
        "feat_std": round(feat_std, 4),
        **cfg.__dict__,
    }
    return head, weight, stats


def finish(
    lm,
    head: EagleHead,
    weight: torch.Tensor,
    stats: dict,
    train: list[Sequence],
    held: list[Sequence],
    out_dir: Path,
    n_eval: int = 64,
) -> dict:
    """Measure held-out and training rank accuracies, store the calibration, save the head."""
    from dataclasses import replace

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


def main(argv: list[str] | None = None) -> int:
    """python -m specviz train eagle: build/extend the distilled data, train, evaluate, save the head."""
    import argparse

    from tqdm import tqdm

    from specviz.heads import distill
    from specviz.model import load_model

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
    torch.set_num_threads(args.threads)
    lm = load_model("default", device="cpu", dtype="fp32")
    if args.prompts:
        bar = tqdm(desc="distil", unit="shard")
        distill.build_dataset(
            lm,
            args.prompts,
            out_dir=args.data_dir,
            progress=lambda d, n, _m: (setattr(bar, "total", n), bar.update(d - bar.n)),
        )
        bar.close()
    train, held = distill.load_dataset(args.data_dir, "train"), distill.load_dataset(args.data_dir, "heldout")
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

    def tick(step: int, total: int, logs: dict) -> None:
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
