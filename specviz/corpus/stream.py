"""Continuous batching for the corpus: many answers decoded together over one KV cache, in the training dtype.

Measured on a 2-core AMD EPYC (avx512_bf16, no AMX), bf16, batch 64: attention over the cache is most of a
step (57-70% of the loop's time by py-spy), so the cache's width (the longest live row) sets the rate. The
corpus reads it with `core.kernels.grouped_decode` from an fp32 cache (`cache_dtype`), prompts are prefilled
in groups of one padded width, and the columns no live row can see are trimmed: a step at about 700 columns
went from 247-253 to 177-187 ms, and prefilling 64 prompts from 45-54 to 7 s
(docs/experiments/2026-12-02-corpus-throughput.md).
"""

from __future__ import annotations

import heapq
from typing import Any

import torch

from specviz.core.kv_cache import growing_cache
from specviz.core.slot_cache import SlotCache

PREFILL_STEP = 64  # prompts are prefilled in groups padded to a multiple of this (few distinct shapes for oneDNN)


def gumbel_pick(logits: torch.Tensor, temperature: float, gen: torch.Generator) -> torch.Tensor:
    """One exact sample per row from softmax(logits / T): argmax of logits / T plus Gumbel noise.

    No sort and no normalisation over the 49,152 tokens (torch.multinomial cost ~70 ms a step at batch 64).
    """
    u = torch.rand(logits.shape, generator=gen, dtype=torch.float32).clamp_(1e-20, 1.0)
    return (logits.float() / temperature - torch.log(-torch.log(u))).argmax(-1)


class Stream:
    """Continuous batching: `slots` rows decoded together over one KV cache, a finished row's slot refilled.

    One forward per step over every slot (one new token each, explicit positions, the slot cache's `held` as the
    2D padding mask). A new request is prefilled on its own rows (right padding to a multiple of 64: causal, so
    the real positions never see the padding, and few distinct shapes for oneDNN), its keys and values placed
    into its row at the right end of the cache (core.slot_cache.SlotCache.place: left of them let go), so rows
    of any length share the cache. Columns no live row can see are shifted off the left now and then; a prompt
    longer than the cache widens it on the left. Sampling is Gumbel-max at `temperature`, or argmax for greedy requests.
    A row ends at a stop token (kept) or after max_new tokens; `done(request, answer)` is called then,
    and may `push` a follow-up request (a conversation's next turn). Requests are admitted by rank, then
    shortest first; `run(done, more)` calls `more()` whenever fewer requests wait than there are slots, so a
    caller can keep the batch full across many shards (a shard alone drains to a few long conversations).
    """

    def __init__(
        self,
        hf: Any,
        slots: int,
        max_new: int,
        stop: set[int],
        gen: torch.Generator,
        temperature: float,
        pad: int = 2,
        cache_dtype: torch.dtype | None = None,
    ) -> None:
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
        # the cache's keys and values in cache_dtype (None: the model's dtype); its layers are DynamicLayers here
        self.cache = SlotCache(growing_cache(hf.config), slots, self.dev, cache_dtype)
        self.pos = torch.zeros(slots, dtype=torch.long)
        self.last = torch.zeros(slots, int(hf.config.hidden_size), dtype=next(hf.parameters()).dtype)
        self.req: list[Any] = [None] * slots
        self.greedy = torch.ones(slots, dtype=torch.bool)
        self.out: list[list[int]] = [[] for _ in range(slots)]
        self.pending: list[tuple[int, int, int, list[int], bool, Any]] = []  # (rank, length, order, prompt, …)
        self.order = 0
        self.prefilled = 0  # prompt tokens run through prefills (padding excluded)
        self.steps = 0  # decoding steps, and the sum of the cache's width over them (its mean shows the cost)
        self.width_sum = 0

    def push(self, prompt: list[int], greedy: bool, request: Any, rank: int = 0) -> None:
        """Queue a request; a lower rank is admitted first (a caller's older shard), then shorter prompts."""
        heapq.heappush(self.pending, (rank, len(prompt), self.order, prompt, greedy, request))
        self.order += 1

    @property
    def width(self) -> int:
        return self.cache.slots

    def _admit(self, free: list[int]) -> None:
        """Prefill the first pending requests into the free slots, in groups of one padded width each (a short
        prompt is not padded out to the longest one taken: 64 prompts of 118 tokens on average, one of them 640,
        took 45-54 s to prefill as one [64, 640] batch)."""
        take = [heapq.heappop(self.pending) for _ in range(min(len(free), len(self.pending)))]
        lengths = [len(p) for _k, _n, _o, p, _g, _r in take]
        groups: dict[int, list[int]] = {}
        for row, n in enumerate(lengths):
            groups.setdefault(-(-n // PREFILL_STEP) * PREFILL_STEP, []).append(row)
        self.prefilled += sum(lengths)
        for width, rows in sorted(groups.items()):
            ids = torch.full((len(rows), width), self.pad, dtype=torch.long)
            for i, row in enumerate(rows):
                ids[i, : lengths[row]] = torch.tensor(take[row][3])
            self._place(ids, [(free[row], take[row]) for row in rows], max(lengths))

    def _place(self, ids: torch.Tensor, placed: list[tuple[int, tuple]], longest: int) -> None:
        """Prefill one group (right padded) and place each row's keys and values into its slot, at the cache's
        right end (a prompt longer than the cache widens it on the left first)."""
        from transformers import DynamicCache

        tmp: Any = DynamicCache(config=self.hf.config)
        out = self.hf.model(input_ids=ids.to(self.dev), past_key_values=tmp, use_cache=True)
        if longest > self.width:
            self.cache.shift(longest - self.width)
        for row, (slot, (_k, n, _o, _p, greedy, request)) in enumerate(placed):
            self.cache.place(slot, [(src.keys[row, :, :n], src.values[row, :, :n]) for src in tmp.layers])
            self.pos[slot] = n
            self.last[slot] = out.last_hidden_state[row, n - 1].to("cpu")
            self.req[slot], self.greedy[slot], self.out[slot] = request, greedy, []

    def _trim(self) -> None:
        """Shift off the left the columns that no live row can see (once there are 128 of them)."""
        live = [i for i, r in enumerate(self.req) if r is not None]
        if live and (first := self.cache.first_held(live)) >= 128:
            self.cache.shift(-first)

    def run(self, done: Any, more: Any = None) -> None:
        """Decode until no request is pending and every slot is free; call done(request, answer) per answer, and
        more() (when given) while fewer requests wait than there are slots: it queues more and says if it did."""
        while True:
            while more is not None and len(self.pending) < self.slots and more():
                pass
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
                continue  # more() may refill it; otherwise the loop's top returns
            self.cache.append(torch.ones(self.slots, 1, dtype=torch.bool))
            out = self.hf.model(
                input_ids=tok.view(-1, 1).to(self.dev),
                attention_mask=self.cache.held.long(),
                position_ids=self.pos.view(-1, 1).to(self.dev),
                past_key_values=self.cache.cache,
                use_cache=True,
            )
            self.pos += 1
            self.last = out.last_hidden_state[:, -1].to("cpu")
            self.steps += 1
            self.width_sum += self.width
            if self.steps % 32 == 0:
                self._trim()


# --- a shard -----------------------------------------------------------------------------------------
