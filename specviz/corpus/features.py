"""Fixed-dataset features: ShareGPT's own conversations, one teacher-forced pass of the target, no generation.

This is how EAGLE trains: the responses stay as they are, and the target's final post-norm hidden state
is computed at every position in one batched forward pass (bf16 where the CPU has bf16 units: about 4× fp32
on an AMX Xeon; an AVX2-only CPU emulates bf16, so it takes fp32). The same pass gives the target's own
next-token choice (argmax) at every position, which becomes the label for heads that predict tokens (Medusa,
the speculative-sampling draft), so the heads learn what the target will verify rather than what a ShareGPT
annotator wrote.

Conversations are chat-templated exactly as the app templates a prompt (system prompt, user/assistant
turns), cut into windows of at most `max_len` tokens, and written in resumable shards in the same
layout as the self-distilled data (corpus.shards), plus `label` (the target's argmax for each
position's token, i.e. label[j] = argmax p(· | ids[:j])). Conversation i is held out when
i % HELDOUT_EVERY == HELDOUT_EVERY - 1; Spec-Bench turns are never used.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from specviz.core.model import LoadedModel
from specviz.core.paths import cache_root
from specviz.corpus import store
from specviz.corpus.conversations import template_ids
from specviz.corpus.shards import HELDOUT_EVERY, HIDDEN_DTYPE, Sequence, held_out, shard_file, write_shard
from specviz.corpus.sharegpt import conversation_messages, sharegpt_conversations, spec_bench_turns

SHARD_WINDOWS = 64  # windows per feature shard
MIN_ASSISTANT = 16  # a window with fewer assistant tokens teaches too little to pay for its pass

Progress = Callable[[int, int, dict], None]


def default_dir() -> Path:
    """Where feature folders live by default (under the cache root)."""
    return cache_root() / "features"


def windows(ids: list[int], mask: list[bool], max_len: int) -> Iterator[tuple[list[int], list[bool]]]:
    """Consecutive windows of at most max_len tokens that hold enough assistant tokens."""
    for start in range(0, len(ids), max_len):
        w, m = ids[start : start + max_len], mask[start : start + max_len]
        if sum(m) >= MIN_ASSISTANT and len(w) > 1:
            yield w, m


# the corpus's answer roles each choice trains on; "opening": the first OPENING answer tokens of a conversation's
# first answer only, the positions the held-out set and the app's prompts are made of
ANSWERS = {"all": (1, 2), "sampled": (1,), "greedy": (2,), "opening": (1, 2)}
OPENING = 128


def answers_suffix(answers: str) -> str:
    """'-greedy' / '-sampled' / '-opening' for a part of the corpus's answers, '' for all: split and folder name."""
    return "" if answers == "all" else f"-{answers}"


def corpus_windows(
    max_len: int, per_conversation: int, folder: Path | None = None, answers: str = "all"
) -> Iterator[tuple[int, list[int], list[bool]]]:
    """(ShareGPT record, ids, mask) windows of the corpus's conversations (corpus.answers), shard by shard: the
    mask is True on the target's own answer tokens (only its sampled or only its greedy answers when `answers`
    says so, a conversation being answered one way throughout, or only its opening: see ANSWERS), and windows are
    cut as `split_windows` cuts ShareGPT's."""
    roles = set(ANSWERS[answers])
    for path in store.shard_prefix(folder or store.CORPUS_DIR):
        shard = store.read_shard(path)
        for source, (ids, role) in zip(shard.source.tolist(), shard.conversations(), strict=True):
            if answers == "opening":  # one window: the opening answer's first tokens after as much context as fits
                ids, role = _opening(ids.tolist(), role.tolist(), max_len)
                yield from ((source, w, m) for w, m in windows(ids, [r in roles for r in role], max_len))
                continue
            keep = max_len * per_conversation
            for w, m in windows(ids[:keep].tolist(), [r in roles for r in role[:keep].tolist()], max_len):
                yield source, w, m


def _opening(ids: list[int], role: list[int], max_len: int) -> tuple[list[int], list[int]]:
    """A conversation cut to its first answer's first OPENING tokens and the last max_len tokens before them."""
    start = next((j for j, r in enumerate(role) if r), len(role))
    end = next((j for j in range(start, len(role)) if not role[j]), len(role))
    end = min(end, start + OPENING)
    return ids[max(0, end - max_len) : end], role[max(0, end - max_len) : end]


def split_windows(
    tokenizer: Any, split: str, max_len: int, per_conversation: int
) -> Iterator[tuple[int, list[int], list[bool]]]:
    """(conversation index, ids, mask) for every window of one split, in file order."""
    banned = spec_bench_turns()
    for i, record in enumerate(sharegpt_conversations()):
        if held_out(i) != (split == "heldout"):
            continue
        msgs = conversation_messages(record, banned)
        if msgs is None:
            continue
        ids, mask = template_ids(tokenizer, msgs, max_len * per_conversation)
        for w, m in windows(ids, mask, max_len):
            yield i, w, m


@torch.inference_mode()
def teacher_pass(
    lm: LoadedModel, seqs: list[list[int]], rows: int, width: int
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(post-norm hidden [L, H] fp16, argmax next token [L] int32) for each sequence, in one batch.

    Every batch has the same shape [rows, width] (right padding, extra rows of padding): oneDNN builds
    its bf16 kernels per matrix shape, and a new shape per batch made the pass about 6× slower here.
    The model is causal, so right padding needs no mask; padded positions are cut off afterwards.
    """
    ids = torch.zeros((rows, width), dtype=torch.long)
    for row, s in enumerate(seqs):
        ids[row, : len(s)] = torch.tensor(s)
    hidden = lm.hf.model(input_ids=ids.to(lm.device), use_cache=False).last_hidden_state  # [B, T, H]
    flat = hidden.reshape(-1, hidden.shape[-1])
    # the LM head in chunks: [B·T, V] logits at once would be 0.4 GB of bf16 and run at half the speed
    label = torch.cat([lm.hf.lm_head(flat[a : a + 512]).argmax(-1) for a in range(0, len(flat), 512)])
    label = label.view(hidden.shape[:2]).to(torch.int32)  # [B, T]
    return [(hidden[r, : len(s)].to("cpu", HIDDEN_DTYPE), label[r, : len(s)].cpu()) for r, s in enumerate(seqs)]


def corpus_features(lm: LoadedModel, progress: Progress | None = None) -> Path:
    """The committed corpus's teacher-forced features under the cache, in the target's dtype: made, or extended to
    the shards committed since, before a head trains on them (`train KIND --data corpus`). Returns the folder."""
    short = {torch.float32: "fp32", torch.bfloat16: "bf16"}.get(lm.dtype, str(lm.dtype).removeprefix("torch."))
    out = default_dir() / f"train-{short}-corpus"
    build(lm, out, FeatureConfig(source="corpus", max_positions=10**12, shard_windows=SHARD_WINDOWS), progress)
    return out


@dataclass(frozen=True)
class FeatureConfig:
    """What one feature build makes: the split, how many positions, and the window and batch shapes."""

    split: str = "train"  # "train" or "heldout" (conversation i is held out when i % HELDOUT_EVERY == 9)
    source: str = "sharegpt"  # ShareGPT's own answers, or "corpus": the target's (corpus.answers; train only)
    answers: str = "all"  # of the corpus: all its answers, the sampled or the greedy ones, or openings
    max_positions: int = 3_000_000  # assistant positions to make in all
    max_len: int = 512  # tokens per window (and per row of the teacher pass)
    per_conversation: int = 4  # windows per conversation at most
    batch_tokens: int = 4096  # rows × max_len of one teacher pass
    shard_windows: int = SHARD_WINDOWS  # windows per shard

    def __post_init__(self) -> None:
        if self.answers not in ANSWERS:
            raise ValueError(f"answers must be one of {', '.join(ANSWERS)}, got {self.answers!r}.")


def _manifest(lm: LoadedModel, cfg: FeatureConfig) -> dict:
    """The settings a folder's shards were made with (a resumed build must match them)."""
    return {
        "model": lm.name,
        "split": cfg.split if cfg.source == "sharegpt" else f"{cfg.split}-{cfg.source}{answers_suffix(cfg.answers)}",
        "dtype": str(lm.dtype).removeprefix("torch."),
        "max_len": cfg.max_len,
        "per_conversation": cfg.per_conversation,
        "batch_tokens": cfg.batch_tokens,
        "heldout_every": HELDOUT_EVERY,
        "hidden_dtype": str(HIDDEN_DTYPE).removeprefix("torch."),
        "hidden_size": int(lm.hf.config.hidden_size),
    }


def _resume(out_dir: Path, manifest: dict) -> dict:
    """The progress record to continue from, the shards already on disk counted; refuse other settings."""
    from safetensors.torch import load_file

    mpath = out_dir / "manifest.json"
    if mpath.is_file() and {k: v for k, v in json.loads(mpath.read_text()).items() if k in manifest} != manifest:
        raise RuntimeError(f"{out_dir} holds features made with other settings; use another folder.")
    done = sorted(out_dir.glob("shard_*.safetensors"))
    positions = sum(int(load_file(str(p))["mask"].sum()) for p in done)
    return {**manifest, "shards": len(done), "positions": positions, "tokens": 0, "seconds": 0.0}


def _count(record: dict, seqs: list[Sequence], seconds: float) -> None:
    """Add a written shard to the progress record."""
    record.update(
        shards=record["shards"] + 1,
        positions=record["positions"] + sum(int(s.mask.sum()) for s in seqs),
        tokens=record["tokens"] + sum(len(s.ids) for s in seqs),
        seconds=round(seconds, 1),
    )
    record["tokens_per_s"] = round(record["tokens"] / max(1e-9, record["seconds"]), 1)


def build(lm: LoadedModel, out_dir: Path, cfg: FeatureConfig | None = None, progress: Progress | None = None) -> dict:
    """Write shards of fixed-dataset features until cfg.max_positions assistant positions; resumable.

    A shard holds `cfg.shard_windows` windows; on restart the shards already on disk are counted and their
    windows skipped, so a killed build continues where it stopped. Returns the progress record.
    """
    cfg = cfg or FeatureConfig()
    out_dir.mkdir(parents=True, exist_ok=True)
    record = _resume(out_dir, _manifest(lm, cfg))
    skip = record["shards"] * cfg.shard_windows
    t0 = time.perf_counter()
    pending: list[tuple[list[int], list[bool]]] = []
    if cfg.source == "corpus":
        source = corpus_windows(cfg.max_len, cfg.per_conversation, answers=cfg.answers)
    else:
        source = split_windows(lm.tokenizer, cfg.split, cfg.max_len, cfg.per_conversation)
    for n, (_conv, w, m) in enumerate(source):
        if n < skip:
            continue
        pending.append((w, m))
        if len(pending) < cfg.shard_windows:
            continue
        if record["positions"] >= cfg.max_positions:
            break
        seqs = _featurize(lm, pending, max(1, cfg.batch_tokens // cfg.max_len), cfg.max_len)
        write_shard(shard_file(out_dir, record["shards"]), seqs)
        _count(record, seqs, time.perf_counter() - t0)
        (out_dir / "manifest.json").write_text(json.dumps(record, indent=1))
        if progress is not None:
            progress(record["positions"], cfg.max_positions, record)
        pending = []
    return record


def _featurize(lm: LoadedModel, pending: list[tuple[list[int], list[bool]]], rows: int, width: int) -> list[Sequence]:
    """The pending windows through the teacher pass, `rows` at a time, as labelled sequences."""
    out: list[Sequence] = []
    for at in range(0, len(pending), rows):
        part = pending[at : at + rows]
        for (ids, mask), (hidden, label) in zip(part, teacher_pass(lm, [p[0] for p in part], rows, width), strict=True):
            out.append(Sequence(torch.tensor(ids), hidden, torch.tensor(mask), label=label))
    return out
