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

from specviz.core.paths import PROMPT_PRESETS, REPO
from specviz.training.distill import sharegpt_conversations, spec_bench_turns
from specviz.training.features import HELDOUT_EVERY, ROLES

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


def gumbel_pick(logits: torch.Tensor, temperature: float, gen: torch.Generator) -> torch.Tensor:
    """One exact sample per row from softmax(logits / T): argmax of logits / T plus Gumbel noise.

    No sort and no normalisation over the 49,152 tokens (torch.multinomial cost ~70 ms a step at batch 64).
    """
    u = torch.rand(logits.shape, generator=gen, dtype=torch.float32).clamp_(1e-20, 1.0)
    return (logits.float() / temperature - torch.log(-torch.log(u))).argmax(-1)


class Stream:
    """Continuous batching: `slots` rows decoded together over one KV cache, a finished row's slot refilled.

    One forward per step over every slot (one new token each, explicit positions, a 2D padding mask).
    A new request is prefilled on its own rows (right padding to a multiple of 64: causal, so the real
    positions never see the padding, and few distinct shapes for oneDNN), its keys and values copied
    into its slot at the right end of the cache (left of them masked), so rows of any length share the
    cache. Columns no live row can see are trimmed from the left now and then; a prompt longer than the
    cache widens it on the left. Sampling is Gumbel-max at `temperature`, or argmax for greedy requests.
    A row ends at a stop token (kept) or after max_new tokens; `done(request, answer)` is called then,
    and may `push` a follow-up request (a conversation's next turn).
    """

    def __init__(
        self, hf: Any, slots: int, max_new: int, stop: set[int], gen: torch.Generator, temperature: float, pad: int = 2
    ) -> None:
        from specviz.core.kv_cache import growing_cache

        self.hf, self.slots, self.max_new, self.stop, self.gen, self.t, self.pad = (
            hf,
            slots,
            max_new,
            stop,
            gen,
            temperature,
            pad,
        )
        self.dev = next(hf.parameters()).device
        self.cache = growing_cache(hf.config)
        self.att = torch.zeros(slots, 0, dtype=torch.long)
        self.pos = torch.zeros(slots, dtype=torch.long)
        self.last = torch.zeros(slots, int(hf.config.hidden_size), dtype=next(hf.parameters()).dtype)
        self.req: list[Any] = [None] * slots
        self.greedy = torch.ones(slots, dtype=torch.bool)
        self.out: list[list[int]] = [[] for _ in range(slots)]
        self.pending: list[tuple[int, int, list[int], bool, Any]] = []  # (length, order, prompt, greedy, request)
        self.order = 0
        self.prefilled = 0  # prompt tokens run through prefills (padding excluded)

    def push(self, prompt: list[int], greedy: bool, request: Any) -> None:
        """Queue a request; shorter prompts are admitted first."""
        import heapq

        heapq.heappush(self.pending, (len(prompt), self.order, prompt, greedy, request))
        self.order += 1

    @property
    def width(self) -> int:
        return int(self.att.shape[1])

    def _relayout(self, left: int) -> None:
        """Add `left` empty columns on the left of the cache (left > 0) or drop -left of them (left < 0)."""
        m = self.width
        new_m = m + left
        for layer in self.cache.layers:
            for name, buf in (("keys", "_kbuf"), ("values", "_vbuf")):
                old = getattr(layer, name)
                fresh = old.new_zeros(*old.shape[:-2], new_m + 64, old.shape[-1])
                fresh[..., max(0, left) : new_m, :] = old[..., max(0, -left) : m, :]
                setattr(layer, buf, fresh)
                setattr(layer, name, fresh[..., :new_m, :])
        cols = torch.zeros(self.slots, max(0, left), dtype=torch.long)
        self.att = torch.cat([cols, self.att[:, max(0, -left) :]], dim=1)

    def _admit(self, free: list[int]) -> None:
        """Prefill the shortest pending requests into the free slots."""
        import heapq

        from transformers import DynamicCache

        take = [heapq.heappop(self.pending) for _ in range(min(len(free), len(self.pending)))]
        lengths = [len(p) for _n, _o, p, _g, _r in take]
        width = -(-max(lengths) // 64) * 64
        ids = torch.full((len(take), width), self.pad, dtype=torch.long)
        for row, (_n, _o, p, _g, _r) in enumerate(take):
            ids[row, : len(p)] = torch.tensor(p)
        tmp = DynamicCache(config=self.hf.config)
        out = self.hf.model(input_ids=ids.to(self.dev), past_key_values=tmp, use_cache=True)
        self.prefilled += sum(lengths)
        if not self.cache.layers[0].is_initialized:  # the first admission: layers take their dtype and device
            for layer, src in zip(self.cache.layers, tmp.layers, strict=True):
                layer.lazy_initialization(src.keys, src.values)
                layer.keys = src.keys.new_zeros(self.slots, *src.keys.shape[1:-2], 0, src.keys.shape[-1])
                layer.values = src.values.new_zeros(self.slots, *src.values.shape[1:-2], 0, src.values.shape[-1])
        if max(lengths) > self.width:
            self._relayout(max(lengths) - self.width)
        m = self.width
        for row, (slot, (n, _o, _p, greedy, request)) in enumerate(zip(free, take, strict=False)):
            for layer, src in zip(self.cache.layers, tmp.layers, strict=True):
                layer.keys[slot, :, m - n :] = src.keys[row, :, :n]
                layer.values[slot, :, m - n :] = src.values[row, :, :n]
            self.att[slot] = 0
            self.att[slot, m - n :] = 1
            self.pos[slot] = n
            self.last[slot] = out.last_hidden_state[row, n - 1].to("cpu")
            self.req[slot], self.greedy[slot], self.out[slot] = request, greedy, []

    def _trim(self) -> None:
        """Drop the columns on the left that no live row can see (once there are 128 of them)."""
        live = [i for i, r in enumerate(self.req) if r is not None]
        if not live:
            return
        first = int(self.att[live].argmax(dim=1).min())  # each live row's first visible column
        if first >= 128:
            self._relayout(-first)

    def run(self, done: Any) -> None:
        """Decode until no request is pending and every slot is free; call done(request, answer) per answer."""
        steps = 0
        while True:
            free = [i for i, r in enumerate(self.req) if r is None]
            busy = self.slots - len(free)
            if self.pending and free and (len(free) * 4 >= self.slots or busy == 0 or len(self.pending) <= len(free)):
                self._admit(free)
            if all(r is None for r in self.req):
                return
            logits = self.hf.lm_head(self.last.to(self.dev)).float().cpu()
            tok = torch.where(self.greedy, logits.argmax(-1), gumbel_pick(logits, self.t, self.gen))
            for i, r in enumerate(self.req):
                if r is None:
                    continue
                self.out[i].append(int(tok[i]))
                if int(tok[i]) in self.stop or len(self.out[i]) >= self.max_new:
                    self.req[i] = None
                    done(r, self.out[i])
            if all(r is None for r in self.req) and not self.pending:
                return
            self.att = torch.cat([self.att, torch.ones(self.slots, 1, dtype=torch.long)], dim=1)
            out = self.hf.model(
                input_ids=tok.view(-1, 1).to(self.dev),
                attention_mask=self.att.to(self.dev),
                position_ids=self.pos.view(-1, 1).to(self.dev),
                past_key_values=self.cache,
                use_cache=True,
            )
            self.pos += 1
            self.last = out.last_hidden_state[:, -1].to("cpu")
            steps += 1
            if steps % 32 == 0:
                self._trim()


@torch.inference_mode()
def decode_batch(
    hf: Any,
    prompts: list[list[int]],
    greedy: list[bool],
    max_new: int,
    stop: set[int],
    gen: torch.Generator,
    temperature: float = TEMPERATURE,
    slots: int | None = None,
) -> list[list[int]]:
    """Answers to prompts through one Stream (all of them at once unless fewer slots are given)."""
    stream = Stream(hf, slots or len(prompts), max_new, stop, gen, temperature)
    answers: list[list[int]] = [[] for _ in prompts]
    for i, (p, g) in enumerate(zip(prompts, greedy, strict=True)):
        stream.push(p, g, i)
    stream.run(lambda i, ans: answers.__setitem__(i, list(ans)))
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


@torch.inference_mode()
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
    """Answer every turn of convs in place through one Stream; a conversation's next turn is queued as soon
    as the target has answered its last one. Returns counts."""
    turns = Turns(tokenizer)
    gen = torch.Generator().manual_seed(settings.seed * 100_003 + k)
    stream = Stream(hf, batch, settings.max_answer, stop, gen, settings.temperature)
    counts = {"answer_tokens": 0, "prompt_tokens": 0, "answers": 0}

    def ask(c: Conversation) -> None:
        if not c.open or c.answered >= len(c.human):
            return
        text = c.human[c.answered]
        new = turns.first(text) if c.answered == 0 else turns.next(text)
        if len(c.ids) + len(new) > settings.max_context:
            c.open = False
            return
        stream.push(c.ids + new, c.greedy, (c, new))

    def done(request: tuple[Conversation, list[int]], ans: list[int]) -> None:
        c, new = request
        c.ids += new + ans
        c.role += [ROLE_CONTEXT] * len(new) + [ROLE_GREEDY if c.greedy else ROLE_SAMPLED] * len(ans)
        c.answered += 1
        counts["answers"] += 1
        counts["answer_tokens"] += len(ans)
        counts["prompt_tokens"] += len(new)
        if not ans or ans[-1] not in stop:
            c.open = False  # cut at max_answer: the conversation cannot go on from half an answer
        ask(c)
        if log is not None and counts["answers"] % 64 == 0:
            log(f"shard {k}: {counts['answers']} answers, {counts['answer_tokens']} answer tokens")

    for c in convs:
        ask(c)
    stream.run(done)
    counts["prefill_tokens"] = stream.prefilled
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

    from specviz.core.model_files import DEFAULT_MODEL, resolve

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
