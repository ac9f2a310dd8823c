"""The corpus: the target's own answers to ShareGPT's human turns, kept as token-id shards in the repository.

Every strong draft recipe since EAGLE-3 trains on the target's own text, not on the dataset's answers
(here the target's argmax matched ShareGPT's next token at 55% of positions). This module makes that
text at scale and keeps only the token ids (features are recomputed from them by a teacher-forced
pass at training time, see `specviz.corpus.features`), so the corpus grows across machines.

How a shard is made: `SHARD` ShareGPT records (a fixed, seeded slice of the whole file, so shard k is
the same conversations on every machine) are answered by `corpus.answering.Answerer`, one Stream shared
by every shard of a run: every conversation's first human turn is queued, and as soon as the target has
answered a turn, the conversation's next turn is queued with the target's own answers as its history.
The next shard is loaded whenever fewer turns wait than the batch has rows (older shards' turns go
first), and a shard is written as its last answer lands, so the batch stays full: a shard alone
drained to a few long conversations and made 62-66 answer tokens/s (the rates and the other levers:
docs/experiments/2026-12-02-corpus-throughput.md). Decoding is bf16 by
default: in this loop (masked attention, prefills, refills) it made 111 answer tokens/s against fp32's 60 on a
2-core AMD EPYC without AMX, although one unmasked decoding step alone timed fp32 faster (389 against 682 ms):
a probe of that step chose fp32 for shards 9-16 and was removed. `--dtype` picks either, each shard records its
dtype, and the text is the target's own either way; `--dtype auto` (the default) takes bf16 only where the CPU has
bf16 units (`core.kernels.can_pack`): an AVX2-only EPYC emulates it and made no shard in 27 minutes.
Sampling is by Gumbel-max at `TEMPERATURE`, or greedy for a `GREEDY_SHARE` of the conversations. Held-out
conversations (record i with i % 10 == 9, as in corpus.features) and any conversation with a Spec-Bench or
shipped evaluation prompt are never answered.

The shards and the manifest (`corpus.store`) live in `data/corpus/` and are committed:
`python -m specviz corpus answer --shards 0-9` makes the missing ones and skips the rest.
"""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from specviz.core import measure
from specviz.core.kernels import can_pack, grouped_decode
from specviz.core.model_files import DEFAULT_MODEL
from specviz.corpus.answering import Answerer, InFlight, Settings
from specviz.corpus.conversations import Conversation, conversations_of, shard_records
from specviz.corpus.sharegpt import evaluation_prompts, sharegpt_conversations
from specviz.corpus.store import (
    FORMAT,
    DataError,
    pack_shard,
    read_manifest,
    shard_path,
    write_manifest,
)

DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32}


def load_target(threads: int) -> tuple[Any, Any, set[int]]:
    """The default model (bf16, to be cast) with the grouped decoding kernel (core.kernels.grouped_decode: the
    batch's one-token steps read the cache without copying it out per query head), its tokenizer and stop tokens."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from specviz.core.model_files import resolve

    torch.set_num_threads(threads)
    where = resolve("default", lambda _m: None)
    hf = AutoModelForCausalLM.from_pretrained(where, dtype=torch.bfloat16, attn_implementation=grouped_decode()).eval()
    tok = AutoTokenizer.from_pretrained(where)
    eos = hf.generation_config.eos_token_id
    stop = {int(t) for t in eos} if isinstance(eos, list) else {int(eos)}
    return hf, tok, stop | {int(tok.eos_token_id)}


def provenance(batch: int, threads: int, dtype: str) -> dict:
    """How a shard was made (batch, threads, dtype) and where: core.measure's record of this machine (CPU and its
    flags, cores, memory, hashed machine id, load, torch, commit, date), as every stored figure carries."""
    where = measure.provenance(f"{DEFAULT_MODEL} · cpu · {dtype} · {threads} threads").to_dict()
    return {"batch": batch, "threads": threads, "dtype": dtype, "provenance": where}


def write_shard(folder: Path, k: int, convs: list[Conversation], entry: dict) -> None:
    """The shard's file (atomically) and its manifest entry."""
    path = shard_path(folder, k)
    kept = [c for c in convs if c.answered]
    tmp = path.with_suffix(".partial")
    tmp.write_bytes(
        pack_shard([c.ids for c in kept], [c.role for c in kept], [c.source for c in kept], [c.answered for c in kept])
    )
    tmp.rename(path)
    entry |= {
        "file": path.name,
        "bytes": path.stat().st_size,
        "conversations": len(kept),
        "tokens": sum(len(c.ids) for c in kept),
    }
    manifest = read_manifest(folder)
    manifest["shards"] = [s for s in manifest["shards"] if s["shard"] != k] + [entry]
    write_manifest(folder, manifest)


def shard_plan(n_records: int, k: int, settings: Settings) -> tuple[int, list[int]]:
    """(pass, ShareGPT records) of shard k: pass p answers the same records again as shard k - p·n_shards, with
    another seed, so the corpus grows past one sampled answer per turn (shards 0-138 are pass 0 for 17.7k
    records at 128 a shard, 139-277 pass 1, …)."""
    per_pass = -(-n_records // settings.shard_records)
    pass_, j = divmod(k, per_pass)
    return pass_, shard_records(n_records, j, settings.seed, settings.shard_records)


def load_shard(records: list[dict], banned: set[str], k: int, settings: Settings) -> InFlight:
    """Shard k's usable conversations, ready for an Answerer."""
    pass_, idx = shard_plan(len(records), k, settings)
    greedy = settings.greedy_share if pass_ == 0 else 0.0  # a greedy answer exists once, in pass 0
    convs = conversations_of({i: records[i] for i in idx}, banned, k, settings.seed, greedy, settings.heldout_every)
    return InFlight(k, convs, meta={"pass": pass_, "records": [idx[0], idx[-1]]})


def shard_entry(shard: InFlight, made: int, stream_seed: int, where: dict) -> dict:
    """A finished shard's manifest entry: its counts, its life in seconds, and the loop's rate over that life
    (`made`: the loop's answer tokens so far, every shard in flight counted), with where it was made."""
    secs = time.perf_counter() - shard.t0
    return {
        "shard": shard.k,
        **shard.meta,
        **shard.counts,
        "seconds": round(secs, 1),
        "answer_tokens_per_s": round((made - shard.made0) / max(secs, 1e-9), 1),
        "rate_of": "the loop over the shard's life, all shards in flight",
        "stream_seed": stream_seed,
        "load_start": round(shard.load0, 2),  # the provenance's load is the one at the end
        **where,
    }


def generate(
    folder: Path, shards: list[int], batch: int, threads: int, log: Any = print, dtype: str = "bfloat16"
) -> None:
    """Make the missing shards of `shards` under folder through one Answerer (the next shard loaded as the batch
    frees up), each shard written atomically with its manifest entry as its last answer lands."""
    folder.mkdir(parents=True, exist_ok=True)
    settings = Settings(model=DEFAULT_MODEL)
    manifest = read_manifest(folder) or {"format": FORMAT, "settings": asdict(settings), "shards": []}
    if manifest["settings"] != asdict(settings):
        raise DataError(f"{folder} was made with other settings: {manifest['settings']}")
    write_manifest(folder, manifest)
    todo = iter([k for k in shards if not shard_path(folder, k).is_file()])
    first = next(todo, None)
    if first is None:
        return
    hf, tok, stop = load_target(threads)
    hf.to(DTYPES[dtype])
    records = list(sharegpt_conversations())
    banned = evaluation_prompts()

    def finished(shard: InFlight) -> None:
        entry = shard_entry(shard, answerer.made, first, provenance(batch, threads, dtype))
        write_shard(folder, shard.k, shard.convs, entry)
        rate, load1 = entry["answer_tokens_per_s"], entry["provenance"]["load"]
        log(
            f"shard {shard.k} written: {shard.counts['answer_tokens']} answer tokens, {entry['seconds']:.0f} s in "
            f"flight; the loop made {rate} tokens/s meanwhile (load {shard.load0:.1f}->{load1})"
        )

    answerer = Answerer(hf, tok, settings, stop, first, batch, log, finished)
    answerer.add(load_shard(records, banned, first, settings))

    def more() -> bool:
        k = next(todo, None)
        if k is not None:
            answerer.add(load_shard(records, banned, k, settings))
        return k is not None

    with torch.inference_mode():
        answerer.run(more)


def parse_shards(text: str) -> list[int]:
    """'0-9' or '3,5,8-10' as shard numbers, bounded (at most 10,000 shards)."""
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.strip().partition("-")
        if not (lo.isascii() and lo.isdigit()) or (hi and not (hi.isascii() and hi.isdigit())):  # int('²') fails
            raise DataError(f"Bad shard range {part!r}; write e.g. 0-9 or 3,5.")
        a, b = int(lo), int(hi or lo)
        if b < a or b >= 10_000:
            raise DataError(f"Shard range {part!r} is empty or past 9999.")
        out.extend(range(a, b + 1))
    return out


def decode_dtype(asked: str) -> str:
    """The dtype a run decodes in: the one asked for, or for 'auto' bf16 where the CPU has bf16 units, else fp32."""
    if asked != "auto":
        return asked
    return "bfloat16" if can_pack(torch.device("cpu"), torch.bfloat16) else "float32"
