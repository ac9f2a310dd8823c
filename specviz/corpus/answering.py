"""The corpus's answering loop: ShareGPT's human turns answered by the target, many shards through one Stream.

`Settings` is what a corpus is made with (a folder's shards share them; the manifest checks it). `Answerer`
keeps every shard of a run in one `corpus.stream.Stream`: a conversation's next turn is queued as soon as
the target has answered its last one (its own answers as history), the next shard is loaded whenever fewer
turns wait than the batch has slots, and each shard is handed back as its own last answer lands.
`corpus.answers` writes the shards; docs/experiments/2026-12-02-corpus-throughput.md has the rates.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

import torch

from specviz.core.kernels import GROUPED_DECODE
from specviz.corpus.conversations import Conversation, Turns
from specviz.corpus.shards import HELDOUT_EVERY
from specviz.corpus.stream import Stream

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
        # the cache in fp32 under a bf16 model when the grouped decoding kernel reads it (faster; corpus.stream)
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
