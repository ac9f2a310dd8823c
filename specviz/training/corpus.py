"""The corpus: the target's own answers to ShareGPT's human turns, kept as token-id shards in the repository.

Every strong draft recipe since EAGLE-3 trains on the target's own text, not on the dataset's answers
(here the target's argmax matched ShareGPT's next token at 55% of positions). This module makes that
text at scale and keeps only the token ids (features are recomputed from them by a teacher-forced
pass at training time, see `specviz.training.features`), so the corpus grows across machines.

How a shard is made: `SHARD` ShareGPT records (a fixed, seeded slice of the whole file, so shard k is
the same conversations on every machine) are answered through one `training.stream.Stream` shared by
every shard of a run: every conversation's first human turn is queued, and as soon as the target has
answered a turn, the conversation's next turn is queued with the target's own answers as its history.
The next shard is loaded whenever fewer turns wait than the batch has rows (older shards' turns go
first), and a shard is written as its last answer lands, so the batch stays full: a shard alone
drained to a few long conversations and made 62-66 answer tokens/s (the rates and the other levers:
docs/experiments/2026-12-02-corpus-throughput.md). Decoding is bf16 by
default: in this loop (masked attention, prefills, refills) it made 111 answer tokens/s against fp32's 60 on a
2-core AMD EPYC without AMX, although one unmasked decoding step alone timed fp32 faster (389 against 682 ms):
a probe of that step chose fp32 for shards 9-16 and was removed. `--dtype` picks either, each shard records its
dtype, and the text is the target's own either way. Sampling is by Gumbel-max at `TEMPERATURE`, or greedy
for a `GREEDY_SHARE` of the conversations. Held-out conversations (record i with i % 10 == 9, as in
training.features) and any conversation with a Spec-Bench or shipped evaluation prompt are never answered.

The shards and the manifest (`training.corpus_files`) live in `data/corpus/` and are committed:
`python -m specviz.training.corpus --shards 0-9` makes the missing ones and skips the rest.
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from specviz.core import measure
from specviz.core.kernels import GROUPED_DECODE, grouped_decode
from specviz.core.model_files import DEFAULT_MODEL
from specviz.training.conversations import Conversation, Turns, conversations_of, evaluation_prompts, shard_records
from specviz.training.corpus_files import (
    CORPUS_DIR,
    FORMAT,
    CorpusError,
    pack_shard,
    read_manifest,
    shard_path,
    write_manifest,
)
from specviz.training.distill import sharegpt_conversations
from specviz.training.features import HELDOUT_EVERY
from specviz.training.stream import Stream

SHARD = 128  # ShareGPT records per shard (held-out and unusable ones included, so shard k is fixed)
SEED = 0  # the order of the records over the shards
TEMPERATURE = 0.7
GREEDY_SHARE = 0.25  # conversations answered greedily throughout
MAX_ANSWER = 320  # new tokens per answer; an answer cut here ends its conversation
# a turn whose prompt (the conversation so far) is longer is not answered: long pasted inputs cost prefill
# and attention at every step (answer tokens per second fell by half past ~600 tokens of context)
MAX_CONTEXT = 640
BATCH = 64


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


# --- the decoding loop -------------------------------------------------------------------------------


COUNTS = ("answer_tokens", "prompt_tokens", "answers", "prefill_tokens")


@dataclass
class InFlight:
    """A shard being answered: its conversations, counts, and how many conversations still have a turn queued."""

    k: int
    convs: list[Conversation]
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0))
    open: int = 0
    t0: float = 0.0
    made0: int = 0  # the loop's answer tokens when the shard was loaded
    load0: float = 0.0
    meta: dict = field(default_factory=dict)


class Answerer:
    """Many shards answered through one Stream: each conversation's next turn is queued as soon as the target
    has answered its last, and the next shard is loaded whenever fewer turns wait than there are slots, so
    the batch stays full (one shard alone ends on a few long conversations, the rest of the batch idle: shards
    17-18 made 62-66 answer tokens/s that way). `finished(shard)` is called as each shard's last answer lands.
    """

    def __init__(
        self,
        hf: Any,
        tokenizer: Any,
        settings: Settings,
        stop: set[int],
        seed: int,
        batch: int,
        log: Any,
        finished: Any,
    ) -> None:
        self.settings, self.stop, self.log, self.finished = settings, stop, log, finished
        self.turns = Turns(tokenizer)
        gen = torch.Generator().manual_seed(settings.seed * 100_003 + seed)
        # the cache in fp32 under a bf16 model when the grouped decoding kernel reads it (faster; training.stream)
        half = next(hf.parameters()).dtype in (torch.bfloat16, torch.float16)
        wide = torch.float32 if half and hf.config._attn_implementation == GROUPED_DECODE else None
        self.stream = Stream(hf, batch, settings.max_answer, stop, gen, settings.temperature, cache_dtype=wide)
        self.made = self.answers = 0  # answer tokens and answers over every shard
        self.t0 = time.perf_counter()
        self.live: list[int] = []

    def add(self, shard: InFlight) -> None:
        """Queue every conversation's first turn; a shard with nothing to answer is finished at once."""
        shard.t0, shard.made0, shard.load0 = time.perf_counter(), self.made, os.getloadavg()[0]
        self.live.append(shard.k)
        shard.open = sum(self._ask(shard, c) for c in shard.convs)
        if shard.open == 0:
            self._finish(shard)

    def _ask(self, shard: InFlight, c: Conversation) -> bool:
        """Queue c's next turn (with its own answers as history); False when the conversation is over."""
        if not c.open or c.answered >= len(c.human):
            return False
        text = c.human[c.answered]
        new = self.turns.first(text) if c.answered == 0 else self.turns.next(text)
        if len(c.ids) + len(new) > self.settings.max_context:
            c.open = False
            return False
        shard.counts["prefill_tokens"] += len(c.ids) + len(new)
        self.stream.push(c.ids + new, c.greedy, (shard, c, new), rank=shard.k)
        return True

    def _done(self, request: tuple[InFlight, Conversation, list[int]], ans: list[int]) -> None:
        shard, c, new = request
        c.add_answer(new, ans, ended=bool(ans) and ans[-1] in self.stop)
        shard.counts["answers"] += 1
        shard.counts["answer_tokens"] += len(ans)
        shard.counts["prompt_tokens"] += len(new)
        self.made += len(ans)
        self.answers += 1
        if not self._ask(shard, c):
            shard.open -= 1
            if shard.open == 0:
                self._finish(shard)
        if self.log is not None and self.answers % 64 == 0:
            self.log(self.progress())

    def _finish(self, shard: InFlight) -> None:
        self.live.remove(shard.k)
        self.finished(shard)

    def progress(self) -> str:
        """One line on the loop: shards in flight, answers, their tokens and rate, steps, the cache's mean width."""
        st, secs = self.stream, time.perf_counter() - self.t0
        return (
            f"shards {','.join(map(str, self.live)) or '-'} in flight: {self.answers} answers, {self.made} answer "
            f"tokens ({self.made / secs:.0f}/s), {st.steps} steps, mean width {st.width_sum / max(1, st.steps):.0f}, "
            f"{len(st.pending)} pending"
        )

    def run(self, more: Any = None) -> None:
        """Decode until every queued turn is answered; more() loads the next shard and says whether it did."""
        self.stream.run(self._done, more)


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
    """Answer every turn of one shard's convs in place (an Answerer with that shard alone). Returns counts."""
    shard = InFlight(k, convs)
    answerer = Answerer(hf, tokenizer, settings, stop, k, batch, log, lambda _s: None)
    answerer.add(shard)
    answerer.run()
    return shard.counts


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


def generate(
    folder: Path, shards: list[int], batch: int, threads: int, log: Any = print, dtype: str = "bfloat16"
) -> None:
    """Make the missing shards of `shards` under folder through one Answerer (the next shard loaded as the batch
    frees up), each shard written atomically with its manifest entry as its last answer lands."""
    folder.mkdir(parents=True, exist_ok=True)
    settings = Settings(model=DEFAULT_MODEL)
    manifest = read_manifest(folder) or {"format": FORMAT, "settings": asdict(settings), "shards": []}
    manifest["settings"].pop("dtype", None)  # a per-shard record now (the first shards were all bf16)
    if manifest["settings"] != asdict(settings):
        raise CorpusError(f"{folder} was made with other settings: {manifest['settings']}")
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
        secs = time.perf_counter() - shard.t0
        made = answerer.made - shard.made0  # what the loop answered over this shard's life, every shard counted
        entry = {
            "shard": shard.k,
            **shard.meta,
            **shard.counts,
            "seconds": round(secs, 1),
            "answer_tokens_per_s": round(made / max(secs, 1e-9), 1),
            "rate_of": "the loop over the shard's life, all shards in flight",
            "stream_seed": first,
            "load_start": round(shard.load0, 2),  # the provenance's load is the one at the end
            **provenance(batch, threads, dtype),
        }
        write_shard(folder, shard.k, shard.convs, entry)
        rate, load1 = entry["answer_tokens_per_s"], entry["provenance"]["load"]
        log(
            f"shard {shard.k} written: {shard.counts['answer_tokens']} answer tokens, {secs:.0f} s in flight; the "
            f"loop made {rate} tokens/s meanwhile (load {shard.load0:.1f}->{load1})"
        )

    def load(k: int) -> InFlight:
        pass_, idx = shard_plan(len(records), k, settings)
        greedy = settings.greedy_share if pass_ == 0 else 0.0  # a greedy answer exists once, in pass 0
        convs = conversations_of({i: records[i] for i in idx}, banned, k, settings.seed, greedy, settings.heldout_every)
        return InFlight(k, convs, meta={"pass": pass_, "records": [idx[0], idx[-1]]})

    answerer = Answerer(hf, tok, settings, stop, first, batch, log, finished)
    answerer.add(load(first))

    def more() -> bool:
        k = next(todo, None)
        if k is not None:
            answerer.add(load(k))
        return k is not None

    with torch.inference_mode():
        answerer.run(more)


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
    ap.add_argument("--shards", default="0-139", help="shard numbers, e.g. 0-9 or 3,5 (made ones are skipped)")
    ap.add_argument("--dir", type=Path, default=CORPUS_DIR)
    ap.add_argument("--batch", type=int, default=BATCH)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument(
        "--dtype", choices=list(DTYPES), default="bfloat16", help="bf16 measured faster in this loop (see above)"
    )
    ap.add_argument("--log", type=Path, default=None, help="append progress lines here too")
    args = ap.parse_args(argv)

    def log(line: str) -> None:
        stamp = datetime.datetime.now().strftime("%H:%M:%S")
        print(f"{stamp} {line}", flush=True)
        if args.log is not None:
            with args.log.open("a", encoding="utf-8") as f:
                f.write(f"{stamp} {line}\n")

    try:
        generate(args.dir, parse_shards(args.shards), args.batch, args.threads, log, args.dtype)
    except CorpusError as exc:
        print(f"error: {exc}")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
