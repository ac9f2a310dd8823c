"""The corpus: the target's own answers to ShareGPT's human turns, kept as token-id shards in the repository.

Every strong draft recipe since EAGLE-3 trains on the target's own text, not on the dataset's answers
(here the target's argmax matched ShareGPT's next token at 55% of positions). This module makes that
text at scale and keeps only the token ids (features are recomputed from them by a teacher-forced
pass at training time, see `specviz.training.features`), so the corpus grows across machines.

How a shard is made: `SHARD` ShareGPT records (a fixed, seeded slice of the whole file, so shard k is
the same conversations on every machine) are answered turn by turn: every conversation's first human
turn in length-sorted batches, then every second turn after the target's own first answer, and so on.
A batch is decoded by `decode_batch`, one forward per step over the batch with the model's KV cache,
in bf16 (the training dtype), sampling by Gumbel-max at `TEMPERATURE` or greedily for a `GREEDY_SHARE`
of the conversations. Held-out conversations (record i with i % 10 == 9, see heads.features) and any
conversation with a Spec-Bench or shipped evaluation prompt are never answered.

A shard is `data/corpus/shard_NNNNN.safetensors.gz` (gzip of a safetensors file of numpy arrays):
`ids` uint16 [N] (conversations concatenated), `offsets` int64 [C+1], `role` uint8 [N] (0 template or
user text, 1 a sampled answer token, 2 a greedy answer token), `source` int32 [C] (the ShareGPT record),
`turns` int16 [C] (turns answered). `manifest.json` beside them records each shard's provenance.
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import json
import os
import platform
import random
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from specviz.heads.distill import sharegpt_conversations, spec_bench_turns
from specviz.heads.features import HELDOUT_EVERY, ROLES
from specviz.paths import PROMPT_PRESETS, REPO

CORPUS_DIR = REPO / "data" / "corpus"
FORMAT = "specviz-corpus-1"
SHARD = 256  # ShareGPT records per shard (held-out and unusable ones included, so shard k is fixed)
SEED = 0  # the order of the records over the shards
TEMPERATURE = 0.7
GREEDY_SHARE = 0.25  # conversations answered greedily throughout
MAX_ANSWER = 320  # new tokens per answer; an answer cut here ends its conversation
MAX_CONTEXT = 1024  # a turn whose prompt (the conversation so far) is longer is not answered
BATCH = 64
ROLE_CONTEXT, ROLE_SAMPLED, ROLE_GREEDY = 0, 1, 2


class CorpusError(Exception):
    """A corpus folder or shard that cannot be read or extended: one sentence for the user."""


@dataclass(frozen=True)
class Settings:
    """What a corpus is made with; a folder's shards all share them (checked against the manifest)."""

    model: str
    temperature: float = TEMPERATURE
    greedy_share: float = GREEDY_SHARE
    max_answer: int = MAX_ANSWER
    max_context: int = MAX_CONTEXT
    shard_records: int = SHARD
    seed: int = SEED
    heldout_every: int = HELDOUT_EVERY
    dtype: str = "bfloat16"


@dataclass
class Conversation:
    """One conversation being answered: its ids so far, who wrote each, and the human turns left."""

    source: int
    human: list[str]
    greedy: bool
    ids: list[int] = field(default_factory=list)
    role: list[int] = field(default_factory=list)
    answered: int = 0
    open: bool = True


def _mostly_ascii(text: str) -> bool:
    return sum(c.isascii() for c in text) >= 0.95 * len(text)


def evaluation_prompts() -> set[str]:
    """Every prompt the project evaluates or demonstrates with (Spec-Bench, the shipped presets), normalised."""
    banned = set(spec_bench_turns())
    if PROMPT_PRESETS.is_file():
        for line in PROMPT_PRESETS.read_text(encoding="utf-8").splitlines():
            if line.strip():
                banned.add(" ".join(str(json.loads(line).get("prompt", "")).split()))
    return banned


def human_turns(record: dict, banned: set[str]) -> list[str]:
    """The record's human turns in order (up to the first odd turn); empty when it must not be used."""
    out: list[str] = []
    expect = "user"
    for turn in record.get("conversations") or []:
        role = ROLES.get(str(turn.get("from", "")).lower())
        text = str(turn.get("value", "")).strip()
        if role != expect or not text:
            break
        if role == "user":
            if " ".join(text.split()) in banned:
                return []
            if not _mostly_ascii(text):
                break
            out.append(text)
        expect = "assistant" if role == "user" else "user"
    return out


def shard_records(n_records: int, k: int, seed: int = SEED) -> list[int]:
    """The ShareGPT record indices of shard k (a seeded permutation of all records cut into SHARD slices)."""
    order = list(range(n_records))
    random.Random(seed).shuffle(order)
    return sorted(order[k * SHARD : (k + 1) * SHARD])


def _git_commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def _cpu() -> str:
    """The CPU's model name and the matrix flags that decide bf16 speed (AMX, AVX-512 bf16), as one label."""
    name, flags = platform.processor() or "unknown", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
            elif line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    have = [f for f in ("amx_bf16", "avx512_bf16", "avx512f") if f in flags]
    return f"{name} ({', '.join(have) or 'no avx512'})"


# --- the decoding loop -------------------------------------------------------------------------------


def _keep_rows(cache: Any, keep: torch.Tensor) -> None:
    """Drop finished rows from every layer of a KV cache (its keys/values and any spare buffer)."""
    for layer in cache.layers:
        for name in ("keys", "values"):
            setattr(layer, name, getattr(layer, name).index_select(0, keep))
        for name in ("_kbuf", "_vbuf"):
            if getattr(layer, name, None) is not None:
                setattr(layer, name, None)  # the next append starts a fresh buffer from keys/values


def gumbel_pick(logits: torch.Tensor, temperature: float, gen: torch.Generator) -> torch.Tensor:
    """One exact sample per row from softmax(logits / T): argmax of logits / T plus Gumbel noise.

    No sort and no normalisation over the 49,152 tokens (torch.multinomial cost ~70 ms a step at batch 64).
    """
    u = torch.rand(logits.shape, generator=gen, dtype=torch.float32).clamp_(1e-20, 1.0)
    return (logits.float() / temperature - torch.log(-torch.log(u))).argmax(-1)


@torch.inference_mode()
def decode_batch(
    hf: Any,
    prompts: list[list[int]],
    greedy: list[bool],
    max_new: int,
    stop: set[int],
    gen: torch.Generator,
    temperature: float = TEMPERATURE,
    pad: int = 2,
) -> list[list[int]]:
    """Answers to a batch of prompts: one forward per step over the rows still open, with the model's cache.

    Left padding with explicit positions; the prefill computes logits for the last position only (the
    LM head over every prompt position would cost more than the trunk). A row stops at a stop token
    (kept) or after max_new tokens. Sampled rows draw by Gumbel-max (argmax of logits / T plus Gumbel
    noise: an exact sample, without sorting 49,152 probabilities); greedy rows take the argmax.
    Finished rows leave the batch once a quarter of it has finished, so they cost nothing after.
    """
    from specviz.kv_cache import growing_cache

    dev = next(hf.parameters()).device
    width = max(len(p) for p in prompts)
    width = -(-width // 32) * 32  # few distinct shapes: oneDNN prepares its kernels per shape
    b = len(prompts)
    ids = torch.full((b, width), pad, dtype=torch.long)
    att = torch.zeros((b, width), dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, width - len(p) :] = torch.tensor(p)
        att[row, width - len(p) :] = 1
    pos = (att.cumsum(1) - 1).clamp(min=0)
    cache = growing_cache(hf.config)
    out = hf.model(
        input_ids=ids.to(dev),
        attention_mask=att.to(dev),
        position_ids=pos.to(dev),
        past_key_values=cache,
        use_cache=True,
    )
    last = out.last_hidden_state[:, -1]
    rows = torch.arange(b)  # original row of each row still in the batch
    samp = ~torch.tensor(greedy)
    answers: list[list[int]] = [[] for _ in range(b)]
    done = torch.zeros(b, dtype=torch.bool)
    next_pos = pos[:, -1] + 1
    for _step in range(max_new):
        logits = hf.lm_head(last).float().cpu()
        s = samp[rows]
        tok = gumbel_pick(logits, temperature, gen) if bool(s.any()) else logits.argmax(-1)
        tok = torch.where(s, tok, logits.argmax(-1))
        for i, r in enumerate(rows.tolist()):
            if not done[r]:
                answers[r].append(int(tok[i]))
                if int(tok[i]) in stop or len(answers[r]) >= max_new:
                    done[r] = True
        live = ~done[rows]
        if not bool(live.any()):
            break
        if int((~live).sum()) * 4 >= len(rows):
            keep = live.nonzero().view(-1)
            _keep_rows(cache, keep.to(dev))
            rows, tok, next_pos, att = rows[keep], tok[keep], next_pos[keep], att[keep]
        att = torch.cat([att, torch.ones(len(rows), 1, dtype=torch.long)], dim=1)
        out = hf.model(
            input_ids=tok.view(-1, 1).to(dev),
            attention_mask=att.to(dev),
            position_ids=next_pos.view(-1, 1).to(dev),
            past_key_values=cache,
            use_cache=True,
        )
        next_pos = next_pos + 1
        last = out.last_hidden_state[:, -1]
    return answers


# --- a shard -----------------------------------------------------------------------------------------


class Turns:
    """The chat template, turn by turn: the ids that open a conversation and the ids of each next user turn."""

    def __init__(self, tokenizer: Any) -> None:
        self.tok = tokenizer

    def _templated(self, msgs: list[dict]) -> list[int]:
        out = self.tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True)
        if isinstance(out, dict) or hasattr(out, "input_ids"):
            out = out["input_ids"]
        return [int(t) for t in out]

    def first(self, text: str) -> list[int]:
        """The opening ids (system prompt, the user's turn, the assistant's header)."""
        return self._templated([{"role": "user", "content": text}])

    def next(self, text: str) -> list[int]:
        """What follows an answer that ended with its end-of-turn token: the next user turn and the header."""
        first = self._templated([{"role": "user", "content": "x"}])
        both = self._templated(
            [{"role": "user", "content": "x"}, {"role": "assistant", "content": "y"}, {"role": "user", "content": text}]
        )
        y = self.tok.encode("y", add_special_tokens=False)
        # both = first + y + <end of turn> + the next turn's ids; the answer carries its own end token
        return both[len(first) + len(y) + 1 :]


def conversations_of(records: dict[int, dict], banned: set[str], settings: Settings, k: int) -> list[Conversation]:
    """The usable conversations of shard k, each marked greedy or sampled by a seeded draw."""
    rng = random.Random(f"{settings.seed}:{k}")
    out = []
    for idx in sorted(records):
        greedy = rng.random() < settings.greedy_share
        if idx % settings.heldout_every == settings.heldout_every - 1:
            continue
        human = human_turns(records[idx], banned)
        if human:
            out.append(Conversation(source=idx, human=human, greedy=greedy))
    return out


def answer_shard(
    hf: Any,
    tokenizer: Any,
    convs: list[Conversation],
    settings: Settings,
    stop: set[int],
    k: int,
    batch: int = BATCH,
    log: Any = None,
) -> dict[str, int]:
    """Answer every turn of convs in place, turn by turn in length-sorted batches; return counts."""
    turns = Turns(tokenizer)
    gen = torch.Generator().manual_seed(settings.seed * 100_003 + k)
    counts = {"answer_tokens": 0, "prompt_tokens": 0, "answers": 0, "batches": 0}
    for t in range(max((len(c.human) for c in convs), default=0)):
        todo: list[tuple[Conversation, list[int]]] = []
        for c in convs:
            if not c.open or t >= len(c.human):
                continue
            new = turns.first(c.human[t]) if t == 0 else turns.next(c.human[t])
            if len(c.ids) + len(new) > settings.max_context:
                c.open = False
                continue
            todo.append((c, new))
        todo.sort(key=lambda cn: len(cn[0].ids) + len(cn[1]))
        for at in range(0, len(todo), batch):
            part = todo[at : at + batch]
            prompts = [c.ids + new for c, new in part]
            answers = decode_batch(
                hf, prompts, [c.greedy for c, _ in part], settings.max_answer, stop, gen, settings.temperature
            )
            counts["batches"] += 1
            for (c, new), ans in zip(part, answers, strict=True):
                c.ids += new + ans
                c.role += [ROLE_CONTEXT] * len(new) + [ROLE_GREEDY if c.greedy else ROLE_SAMPLED] * len(ans)
                c.answered += 1
                counts["answers"] += 1
                counts["answer_tokens"] += len(ans)
                counts["prompt_tokens"] += len(new)
                if not ans or ans[-1] not in stop:
                    c.open = False  # cut at max_answer: the conversation cannot go on from half an answer
            if log is not None:
                log(
                    f"shard {k} turn {t + 1}: {min(at + batch, len(todo))}/{len(todo)} answers, "
                    f"{counts['answer_tokens']} answer tokens"
                )
    return counts


def pack_shard(convs: list[Conversation]) -> bytes:
    """The shard's arrays as gzip-compressed safetensors bytes (answered conversations only)."""
    from safetensors.numpy import save

    kept = [c for c in convs if c.answered]
    offsets = np.zeros(len(kept) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(c.ids) for c in kept])
    arrays = {
        "ids": np.array([t for c in kept for t in c.ids], dtype=np.uint16),
        "offsets": offsets,
        "role": np.array([r for c in kept for r in c.role], dtype=np.uint8),
        "source": np.array([c.source for c in kept], dtype=np.int32),
        "turns": np.array([c.answered for c in kept], dtype=np.int16),
    }
    return gzip.compress(save(arrays, metadata={"format": FORMAT}), compresslevel=9)


@dataclass(frozen=True)
class Shard:
    """One shard read back: its arrays, checked."""

    ids: np.ndarray
    offsets: np.ndarray
    role: np.ndarray
    source: np.ndarray
    turns: np.ndarray

    def conversations(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(ids, role) of each conversation."""
        for a, b in zip(self.offsets[:-1], self.offsets[1:], strict=True):
            yield self.ids[a:b], self.role[a:b]


def read_shard(path: Path, vocab: int | None = None) -> Shard:
    """A shard's arrays, validated (shapes, offsets, ids below vocab); CorpusError when it is not one."""
    from safetensors.numpy import load

    try:
        arrays = load(gzip.decompress(Path(path).read_bytes()))
    except (OSError, EOFError, ValueError, gzip.BadGzipFile, Exception) as exc:  # safetensors raises its own type
        raise CorpusError(f"{path} is not a corpus shard ({type(exc).__name__}); delete it and regenerate.") from exc
    need = {"ids": np.uint16, "offsets": np.int64, "role": np.uint8, "source": np.int32, "turns": np.int16}
    for name, dt in need.items():
        if name not in arrays or arrays[name].dtype != dt or arrays[name].ndim != 1:
            raise CorpusError(f"{path}: array {name!r} is missing or not 1-D {np.dtype(dt).name}.")
    s = Shard(**{n: arrays[n] for n in need})
    n = len(s.ids)
    if len(s.role) != n or len(s.offsets) != len(s.source) + 1 or len(s.turns) != len(s.source):
        raise CorpusError(f"{path}: array lengths disagree.")
    if len(s.offsets) and (s.offsets[0] != 0 or s.offsets[-1] != n or np.any(np.diff(s.offsets) < 0)):
        raise CorpusError(f"{path}: offsets do not cover the ids.")
    if vocab is not None and n and int(s.ids.max()) >= vocab:
        raise CorpusError(f"{path}: a token id is not below the vocabulary size {vocab}.")
    if n and int(s.role.max()) > ROLE_GREEDY:
        raise CorpusError(f"{path}: an unknown role value.")
    return s


# --- the folder --------------------------------------------------------------------------------------


def shard_path(folder: Path, k: int) -> Path:
    return folder / f"shard_{k:05d}.safetensors.gz"


def read_manifest(folder: Path) -> dict:
    """The folder's manifest ({} when it has none); CorpusError when it cannot be read."""
    path = folder / "manifest.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise CorpusError(f"{path} cannot be read ({exc}); restore it from git.") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("shards"), list):
        raise CorpusError(f"{path} is not a {FORMAT} manifest.")
    return data


def write_manifest(folder: Path, data: dict) -> None:
    shards = sorted(data["shards"], key=lambda s: s["shard"])
    data["shards"] = shards
    data["totals"] = {
        "shards": len(shards),
        "conversations": sum(s["conversations"] for s in shards),
        "answers": sum(s["answers"] for s in shards),
        "answer_tokens": sum(s["answer_tokens"] for s in shards),
        "tokens": sum(s["tokens"] for s in shards),
    }
    tmp = folder / "manifest.json.partial"
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    tmp.rename(folder / "manifest.json")


def shard_files(folder: Path = CORPUS_DIR) -> list[Path]:
    """The folder's shards in order."""
    return sorted(Path(folder).glob("shard_*.safetensors.gz"))


def generate(folder: Path, shards: list[int], batch: int, threads: int, log: Any = print) -> None:
    """Make the missing shards of `shards` under folder, each written atomically with its manifest entry."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specviz.model_files import DEFAULT_MODEL, resolve

    torch.set_num_threads(threads)
    folder.mkdir(parents=True, exist_ok=True)
    where = resolve("default", lambda _m: None)
    hf = AutoModelForCausalLM.from_pretrained(where, dtype=torch.bfloat16, attn_implementation="sdpa").eval()
    tok = AutoTokenizer.from_pretrained(where)
    settings = Settings(model=DEFAULT_MODEL)
    manifest = read_manifest(folder) or {"format": FORMAT, "settings": asdict(settings), "shards": []}
    if manifest["settings"] != asdict(settings):
        raise CorpusError(f"{folder} was made with other settings: {manifest['settings']}")
    stop = (
        {int(t) for t in (hf.generation_config.eos_token_id or [])}
        if isinstance(hf.generation_config.eos_token_id, list)
        else {int(hf.generation_config.eos_token_id)}
    )
    stop.add(int(tok.eos_token_id))
    records = list(sharegpt_conversations())
    banned = evaluation_prompts()
    for k in shards:
        path = shard_path(folder, k)
        if path.is_file():
            continue
        idx = shard_records(len(records), k, settings.seed)
        if not idx:
            log(f"shard {k}: past the end of the data ({len(records)} records)")
            continue
        convs = conversations_of({i: records[i] for i in idx}, banned, settings, k)
        load0 = os.getloadavg()[0]
        t0 = time.perf_counter()
        counts = answer_shard(hf, tok, convs, settings, stop, k, batch, log)
        secs = time.perf_counter() - t0
        tmp = path.with_suffix(".partial")
        tmp.write_bytes(pack_shard(convs))
        tmp.rename(path)
        entry = {
            "shard": k,
            "file": path.name,
            "records": [idx[0], idx[-1]] if idx else [],
            "conversations": sum(1 for c in convs if c.answered),
            "tokens": sum(len(c.ids) for c in convs if c.answered),
            **counts,
            "seconds": round(secs, 1),
            "answer_tokens_per_s": round(counts["answer_tokens"] / secs, 1),
            "batch": batch,
            "threads": threads,
            "dtype": "bfloat16",
            "torch": torch.__version__,
            "cpu": _cpu(),
            "cores": os.cpu_count(),
            "load_start": round(load0, 2),
            "load_end": round(os.getloadavg()[0], 2),
            "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            "commit": _git_commit(),
            "bytes": path.stat().st_size,
        }
        manifest = read_manifest(folder) or manifest
        manifest["shards"] = [s for s in manifest["shards"] if s["shard"] != k] + [entry]
        write_manifest(folder, manifest)
        log(
            f"shard {k} written: {entry['answer_tokens']} answer tokens in {secs:.0f} s "
            f"({entry['answer_tokens_per_s']} tokens/s, load {load0:.1f}->{entry['load_end']})"
        )


def parse_shards(text: str) -> list[int]:
    """'0-9' or '3,5,8-10' as shard numbers, bounded (at most 10,000 shards)."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if not lo.isdigit() or (hi and not hi.isdigit()):
            raise CorpusError(f"Bad shard range {part!r}; write e.g. 0-9 or 3,5.")
        a, b = int(lo), int(hi or lo)
        if b < a or b >= 10_000:
            raise CorpusError(f"Shard range {part!r} is empty or past 9999.")
        out.extend(range(a, b + 1))
    return out


def main(argv: list[str] | None = None) -> int:
    """python -m specviz.training.corpus --shards 0-9: answer ShareGPT's turns with the target; resumable."""
    ap = argparse.ArgumentParser(prog="python -m specviz.training.corpus", description=main.__doc__)
    ap.add_argument("--shards", default="0-69", help="shard numbers, e.g. 0-9 or 3,5 (made ones are skipped)")
    ap.add_argument("--dir", type=Path, default=CORPUS_DIR)
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--log", type=Path, default=None, help="append progress lines here too")
    args = ap.parse_args(argv)

    def log(line: str) -> None:
        stamp = datetime.datetime.now().strftime("%H:%M:%S")
        print(f"{stamp} {line}", flush=True)
        if args.log is not None:
            with args.log.open("a", encoding="utf-8") as f:
                f.write(f"{stamp} {line}\n")

    try:
        generate(args.dir, parse_shards(args.shards), args.batch, args.threads, log)
    except CorpusError as exc:
        print(f"error: {exc}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
