"""Train an EAGLE-3 head (`python -m specviz train eagle3`): training-time test, checkpoints, held-out accuracy.

Data are the self-distilled shards with the fused layers' inputs (`python -m specviz.training.distill --layers`,
in ~/.cache/specviz/distill-layers). Row j of a sequence is the pair (g_j, x_{j+1}), g_j fused from the
target's layer inputs at j, and its label is the target's next-token distribution at j+1 (it scores
x_{j+2}), over the draft vocabulary; there is no feature loss. Training-time test: the head is unrolled
on its own outputs (eagle_loss.unrolled: depth d+1 reads depth d's outputs shifted one row, under the
inference mask eagle_loss.depth_mask), and the loss is Σ_d unroll_weight^(d-1) · CE_d over the depths.
Rows whose next token is outside the draft vocabulary carry no loss (EAGLE-3 masks them too).
Checkpoints (weights + Adam moments) and a progress JSON (step, seconds, loss history) go to the checkpoint
folder, so a killed run or one stopped by --minutes resumes where it stopped.
"""

from __future__ import annotations

import argparse
import functools
import json
import time
from collections import abc
from dataclasses import dataclass, replace
from pathlib import Path

import torch
from tqdm import tqdm

from specviz.core.model import LoadedModel, load_model
from specviz.core.paths import cache_root
from specviz.heads.eagle3 import DEFAULT_DIR, Eagle3Head, default_layers, new_head, save_head, warm_start
from specviz.training import eagle_loss
from specviz.training.eagle_loss import collate, draft_vocab, unrolled
from specviz.training.eagle_train import Progress, load_ckpt, lr_at, optimiser_step, save_ckpt, step_plan
from specviz.training.shards import DataError, Sequence, load_dataset

EVAL_DEPTHS = 6
UNUSED = ("ce_weight",)  # EAGLE-2's settings that mean nothing here (there is no feature loss to weigh against)


@dataclass(frozen=True)
class TrainConfig(eagle_loss.TrainConfig):
    """EAGLE-2's settings with EAGLE-3's meaning: tokens only (ce_weight and noise unused), unrolled deeper."""

    epochs: float = 1.0
    unroll: int = 3  # training-time test depths (inference drafts 2 deep by default, the paper preset 5)
    unroll_weight: float = 0.8  # depth d's loss weighs unroll_weight^(d-1)
    noise: float = 0.0
    bf16: bool = True  # bf16 autocast (AMX): weights and Adam stay fp32
    layers: str = ""  # the fused layers, "2,15,27" (a checkpoint of other layers does not resume)
    init_from: str = ""  # an EAGLE-2 head folder whose fc and decoder layer start training (eagle3.warm_start)


def data_dir() -> Path:
    """Where `python -m specviz.training.distill --layers` writes by default for this trainer."""
    return cache_root() / "distill-layers"


def ckpt_dir() -> Path:
    """The default checkpoint folder (under the cache root)."""
    return cache_root() / "eagle3_train"


def data_layers(folder: Path, seqs: abc.Sequence[Sequence], lm: LoadedModel) -> tuple[int, ...]:
    """The fused layers the shards hold (their manifest; default_layers when it does not say); DataError when
    the shards carry no layer inputs or ones of another width."""
    h = int(lm.hf.config.hidden_size)
    if not seqs or any(s.layers is None or s.layers.shape[-1] != 3 * h for s in seqs):
        raise DataError(
            f"The shards in {folder} carry no layer inputs for a {h}-wide model; build them with: "
            f"python -m specviz.training.distill --layers --data-dir {folder}"
        )
    manifest = folder / "manifest.json"
    listed = json.loads(manifest.read_text()).get("fused_layers") if manifest.is_file() else None
    return tuple(int(i) for i in listed) if listed else default_layers(len(lm.hf.model.layers))


def collate3(seqs: abc.Sequence[Sequence], idx: list[int], max_len: int, tok2draft: torch.Tensor) -> dict:
    """eagle_loss.collate's rows (tokens x_{j+1}, target hidden_{j+1}), plus the layer inputs at j; the loss
    mask keeps continuation rows whose next token x_{j+2} exists and is in the draft vocabulary."""
    b = collate(seqs, idx, max_len)
    B, T = b["tokens"].shape
    cpu = b["tokens"].device  # training data live on the CPU
    layers = torch.zeros(B, T, seqs[idx[0]].layers.shape[1], device=cpu)  # type: ignore[union-attr]
    for r, i in enumerate(idx):
        s = seqs[i]
        n = min(len(s.ids), max_len) - 1
        layers[r, :n] = s.layers[:n].float()  # type: ignore[index]
        nxt, m = torch.full((T,), -1, dtype=torch.long, device=cpu), max(0, min(n, len(s.ids) - 2))
        nxt[:m] = s.ids[2 : m + 2]
        b["mask"][r] &= (nxt >= 0) & (tok2draft[nxt.clamp_min(0)] >= 0)
    del b["feats"]
    return {**b, "layers": layers}


def loss_fn(
    head: Eagle3Head, lm: LoadedModel, b: dict[str, torch.Tensor], cfg: TrainConfig, weight: torch.Tensor
) -> tuple[torch.Tensor, dict[str, float]]:
    """Σ_d unroll_weight^(d-1) · CE(target's distribution, head's depth-d draft), over the draft vocabulary."""
    with torch.no_grad():
        emb = lm.hf.get_input_embeddings()(b["tokens"]).float()
    g = head.fuse_layers(b["layers"])
    rows = b["mask"].nonzero()  # [R, 2] (batch, position) with a label
    with torch.no_grad():
        p = torch.softmax((b["target"][rows[:, 0], rows[:, 1]] @ weight.T).float(), dim=-1)
    total, logs = torch.zeros((), device=p.device), {}
    for d, out in enumerate(unrolled(head, g, emb, max(1, cfg.unroll)), start=1):
        keep = rows[:, 1] >= d - 1  # the first d-1 positions have no drafted input at depth d
        logq = torch.log_softmax((head.readout(out[rows[keep, 0], rows[keep, 1]]) @ weight.T).float(), dim=-1)
        ce = -(p[keep] * logq).sum(-1).mean()
        total = total + cfg.unroll_weight ** (d - 1) * ce
        logs[f"ce{d}"] = float(ce.detach())
        logs[f"acc{d}"] = float((logq.argmax(-1) == p[keep].argmax(-1)).float().mean())
    logs["loss"] = float(total.detach())
    return total, logs


def tok2draft_of(head: Eagle3Head, vocab: int) -> torch.Tensor:
    """Token id → draft index, -1 outside the draft vocabulary."""
    ids = head.draft_ids
    out = torch.full((vocab,), -1, dtype=torch.long, device=ids.device)
    out[ids] = torch.arange(ids.numel(), device=ids.device)
    return out


@torch.no_grad()
def sequence_ranks(
    head: Eagle3Head, lm: LoadedModel, s: Sequence, weight: torch.Tensor, tok2draft: torch.Tensor, depths: int
) -> list[torch.Tensor]:
    """Rank of the target's next token in the draft at each depth, drafting from the head's own outputs
    (as eagle_loss.sequence_ranks; 10**6 where it is outside the draft vocabulary)."""
    ids, T = s.ids, len(s.ids) - 1
    emb = lm.hf.get_input_embeddings()(ids[1:]).float()[None]
    g = head.fuse_layers(s.layers[:-1].float()[None])  # type: ignore[index]
    start, out = int(s.mask.float().argmax()), []
    for d, o in enumerate(unrolled(head, g, emb, depths), start=1):
        logits = head.readout(o[0]) @ weight.T  # [T, Vd]
        rows = torch.arange(max(0, start + d - 2), T - 1, device=ids.device)  # the root, i-d+2, is a continuation
        tgt = tok2draft[ids[rows + 2]]
        hit = logits[rows].gather(1, tgt.clamp_min(0)[:, None])[:, 0]
        rank = (logits[rows] > hit[:, None]).sum(-1)
        out.append(torch.where(tgt >= 0, rank, torch.full_like(rank, 10**6)))
    return out


def rank_accuracy(
    head: Eagle3Head, lm: LoadedModel, seqs: abc.Sequence[Sequence], weight: torch.Tensor, depths: int = EVAL_DEPTHS
) -> list[list[float]]:
    """acc[d][i] = P(the target's token is rank i of the depth-(d+1) draft), 8 ranks, over the sequences."""
    tok2draft = tok2draft_of(head, lm.hf.config.vocab_size)
    per_depth: list[list[torch.Tensor]] = [[] for _ in range(depths)]
    head.eval()
    for s in seqs:
        for d, r in enumerate(sequence_ranks(head, lm, s, weight, tok2draft, depths)):
            per_depth[d].append(r)
    head.train()
    cat = [torch.cat(rs) if rs else tok2draft.new_zeros(0) for rs in per_depth]
    return [[round(float((r == i).float().mean()), 4) if len(r) else 0.0 for i in range(8)] for r in cat]


def fit(
    lm: LoadedModel,
    train: list[Sequence],
    cfg: TrainConfig,
    folder: Path,
    minutes: float = 0.0,
    progress: Progress | None = None,
) -> tuple[Eagle3Head, torch.Tensor, dict]:
    """Train (or resume) a head; stop at the time budget with a checkpoint. Returns (head, W, stats)."""
    draft_ids, coverage = draft_vocab(train, cfg.draft_vocab, lm.hf.config.vocab_size)
    layers = tuple(int(i) for i in cfg.layers.split(",")) if cfg.layers else None
    head = new_head(lm.hf.config, lm.name, draft_ids, layers, cfg.seed).train()
    if cfg.init_from:
        warm_start(head, cfg.init_from)  # a checkpoint, when there is one, overrides this below
    weight = draft_rows(lm, head)
    tok2draft = tok2draft_of(head, lm.hf.config.vocab_size)
    opt = torch.optim.AdamW(head.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.0)
    plan = step_plan(train, cfg)
    meta = load_ckpt(folder, head, opt, cfg, len(train)) or {
        "step": 0, "seconds": 0.0, "config": cfg.__dict__, "sequences": len(train), "history": []
    }  # fmt: skip
    t0, last_save, seconds0 = time.perf_counter(), time.perf_counter(), meta["seconds"]
    for step in range(meta["step"], len(plan)):
        batch = collate3(train, plan[step], cfg.max_len, tok2draft)
        logs = optimiser_step(
            head, opt, functools.partial(loss_fn, head, lm, batch, cfg, weight), lr_at(step, len(plan), cfg), cfg.bf16
        )
        meta.update(step=step + 1, seconds=seconds0 + time.perf_counter() - t0)
        if step % 10 == 0 or step + 1 == len(plan):
            meta["history"].append({"step": step + 1, **{k: round(v, 4) for k, v in logs.items()}})
        if progress is not None:
            progress(step + 1, len(plan), logs)
        out_of_time = minutes > 0 and time.perf_counter() - t0 > 60 * minutes
        if time.perf_counter() - last_save > 120 or out_of_time or step + 1 == len(plan):
            save_ckpt(folder, head, opt, meta)
            last_save = time.perf_counter()
        if out_of_time:
            break
    hist = meta["history"]
    trend = [hist[i] for i in sorted({round(j * (len(hist) - 1) / 9) for j in range(10)})] if hist else []
    stats = {"steps": meta["step"], "planned_steps": len(plan), "train_seconds": round(meta["seconds"])}
    stats |= {"sequences": len(train), "draft_vocab_coverage": round(coverage, 4), "history": trend}
    return head, weight, {**stats, **{k: v for k, v in cfg.__dict__.items() if k not in UNUSED}}


def draft_rows(lm: LoadedModel, head: Eagle3Head) -> torch.Tensor:
    """The frozen LM-head rows of the head's draft vocabulary, [Vd, h], fp32."""
    w = lm.lm_head.get_parameter("weight").detach().float()
    return w if head.full_vocab else w[head.draft_ids]


def finish(
    lm: LoadedModel, head: Eagle3Head, weight: torch.Tensor, stats: dict, held: list[Sequence], out_dir: Path
) -> dict:
    """Held-out rank accuracy by depth 1..6 (drafting from its own outputs) into config.json; save the head."""
    acc = rank_accuracy(head, lm, held, weight)
    stats = {**stats, "heldout_top1_by_depth": [a[0] for a in acc], "heldout_sequences": len(held)}
    head.config = replace(head.config, calibration=acc, train=stats)
    save_head(head, out_dir)
    return stats


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """`train eagle3`'s options, checked (ValueError with one sentence when unusable)."""
    ap = argparse.ArgumentParser(prog="python -m specviz train eagle3", description=main.__doc__)
    ap.add_argument("--data-dir", type=Path, default=None, help="shards with layer inputs (default: cache)")
    ap.add_argument("--out", type=Path, default=DEFAULT_DIR, help="head folder (default: models/eagle3)")
    ap.add_argument("--checkpoint", type=Path, default=None, help="resumable checkpoint folder")
    ap.add_argument("--epochs", type=float, default=TrainConfig.epochs)
    ap.add_argument("--lr", type=float, default=TrainConfig.lr)
    ap.add_argument("--batch-tokens", type=int, default=TrainConfig.batch_tokens)
    ap.add_argument("--draft-vocab", type=int, default=TrainConfig.draft_vocab)
    ap.add_argument("--unroll", type=int, default=TrainConfig.unroll, help="training-time test depths")
    ap.add_argument("--unroll-weight", type=float, default=TrainConfig.unroll_weight, help="depth d weighs w^(d-1)")
    ap.add_argument("--minutes", type=float, default=0.0, help="stop (resumably) after this long; 0 = no limit")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (1 is faster on a busy machine)")
    ap.add_argument("--eval-sequences", type=int, default=64, help="held-out sequences for the accuracy")
    ap.add_argument("--fp32", action="store_true", help="train without bf16 autocast")
    ap.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    ap.add_argument("--init-from", default="", help="start from an EAGLE-2 head's fc and layer (e.g. models/eagle)")
    a = ap.parse_args(argv)
    if a.epochs <= 0 or a.lr <= 0 or a.batch_tokens < 64 or a.threads < 1 or a.minutes < 0:
        raise ValueError("--epochs, --lr and --threads must be positive, --batch-tokens at least 64, --minutes >= 0.")
    if not 1 <= a.unroll <= 8 or not 0 < a.unroll_weight <= 1:
        raise ValueError(f"--unroll must be 1-8 and --unroll-weight in (0, 1], got {a.unroll}, {a.unroll_weight}.")
    return a


def held_out(folder: Path, train: list[Sequence], n: int) -> tuple[list[Sequence], list[Sequence]]:
    """(train, held-out): the held-out shards' first n sequences; while none exist yet, the last n of train."""
    try:
        return train, load_dataset(folder, "heldout")[:n]
    except DataError:
        n = max(1, min(n, len(train) // 5))
        print(f"No held-out shard in {folder} yet: holding out the last {n} training sequences instead.")
        return train[:-n], train[-n:]


def main(argv: list[str] | None = None) -> int:
    """python -m specviz train eagle3: train an EAGLE-3 head on distilled layer inputs, evaluate it, save it."""
    a = parse_args(argv)
    torch.set_num_threads(a.threads)
    folder = a.data_dir or data_dir()
    train, held = held_out(folder, load_dataset(folder, "train"), a.eval_sequences)
    lm = load_model("default", device="cpu", dtype="fp32")
    layers = data_layers(folder, train + held, lm)
    cfg = TrainConfig(
        epochs=a.epochs, lr=a.lr, batch_tokens=a.batch_tokens, draft_vocab=a.draft_vocab, unroll=a.unroll,
        unroll_weight=a.unroll_weight, bf16=not a.fp32, layers=",".join(map(str, layers)), init_from=a.init_from,
    )  # fmt: skip
    ckpt = a.checkpoint or ckpt_dir()
    if a.fresh:
        (ckpt / "ckpt.json").unlink(missing_ok=True)
    bar = tqdm(desc="train eagle3", unit="step")

    def tick(step: int, total: int, logs: dict[str, float]) -> None:
        bar.total = total
        bar.update(step - bar.n)
        bar.set_postfix({k: f"{v:.3f}" for k, v in logs.items() if k == "loss" or k.startswith("acc")})

    with torch.enable_grad():
        head, weight, stats = fit(lm, train, cfg, ckpt, a.minutes, tick)
    bar.close()
    stats = finish(lm, head, weight, stats, held, a.out)
    print(json.dumps({k: v for k, v in stats.items() if k != "history"} | {"history": stats["history"]}, indent=1))
    if stats["steps"] < stats["planned_steps"]:
        print(f"Stopped at step {stats['steps']}/{stats['planned_steps']} (head saved); run again to resume.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
