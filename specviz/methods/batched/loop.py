"""The batched decode loop: B requests, one target forward per step, each row accepting its own tokens.

The rhythm is base.Run's, per row: after the prefill a row holds its root (the target's greedy pick for
its next position); a root that ends the request (EOS, or the last token of its budget) is committed
without a forward; the other rows go through the method's step together (propose → one verify forward
→ accept → commit), and each commits its root plus what it accepted, cut at EOS and at its budget. A
finished request leaves the batch at once: its rows are dropped from every cache, so later steps run
only the requests still decoding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import torch

from specviz.core.decoding import clip, forward_rows, greedy_picks, is_final, synced_now
from specviz.core.kv_cache import growing_cache
from specviz.core.model import LoadedModel
from specviz.core.prompts import check_context
from specviz.core.sampling import ConfigError, Sampling
from specviz.core.slot_cache import SlotCache
from specviz.methods.batched.record import BatchStep, BatchTrace

PAD = 0  # the token id written into a pad slot (never attended, so any id will do)
PREFILL_CHUNK = 512  # prompt slots per prefill forward


@dataclass
class Row:
    """One request in the batch: its prompt, what it has committed, and the root it decodes from next."""

    index: int  # position in the batch's prompt list
    prompt_ids: list[int]
    budget: int  # max_new_tokens
    output: list[int] = field(default_factory=list)
    stopped: str = ""
    root: int = -1  # the target's greedy pick after the last committed token
    hidden: torch.Tensor | None = None  # [H] the final hidden state that produced it (what a draft head reads)

    @property
    def feature(self) -> torch.Tensor:
        """The hidden state [H] behind the root (set by the prefill, then by every step)."""
        if self.hidden is None:
            raise RuntimeError("The batch has not been prefilled yet.")
        return self.hidden

    @property
    def context(self) -> list[int]:
        return self.prompt_ids + self.output

    @property
    def remaining(self) -> int:
        return self.budget - len(self.output)


@dataclass(frozen=True)
class RowOut:
    """What a method's step hands back for one row: accepted drafts after the root, and the next root."""

    accepted: list[int]
    root: int
    hidden: torch.Tensor  # [H]
    forward: int  # this row's real slots in the forward (root included)


class Method(Protocol):
    """A batched method: set up after the prefill, step every active row at once, forget rows that left."""

    def start(self, run: BatchRun, ids: torch.Tensor, hidden: torch.Tensor, live: torch.Tensor) -> None: ...

    def step(self, run: BatchRun) -> list[RowOut]: ...

    def select(self, keep: list[int]) -> None: ...


class BatchRun:
    """B generations in progress: the shared target cache, the rows still decoding and the step records."""

    def __init__(
        self, lm: LoadedModel, prompts: list[list[int]], sampling: Sampling, method: str, config: dict | None = None
    ) -> None:
        if not sampling.greedy:
            raise ConfigError("Batched decoding is greedy only (temperature 0) for now.")
        if not prompts or any(not p for p in prompts):
            raise ConfigError("Batched decoding needs at least one prompt, none of them empty.")
        check_context(lm, max(len(p) for p in prompts), sampling.max_new_tokens)
        self.lm, self.sampling, self.method, self.config = lm, sampling, method, dict(config or {})
        self.eos = lm.eos_ids  # read once: the property rebuilds the set on every call
        self.rows = [Row(i, list(p), sampling.max_new_tokens) for i, p in enumerate(prompts)]
        self.active = list(self.rows)  # batch order, which is the caches' row order
        self.cache = SlotCache(growing_cache(lm.hf.config), len(prompts), lm.device)
        self.steps: list[BatchStep] = []
        self.prefill_s = 0.0

    def now(self) -> float:
        """perf_counter after the device has finished its queued work (core.decoding's clock)."""
        return synced_now(self.lm.device)

    @torch.inference_mode()
    def verify(
        self, ids: list[list[int]], positions: torch.Tensor, see: torch.Tensor, live: torch.Tensor, last: bool = False
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One target forward over a block of q slots per active row → (greedy picks [B, q], hidden [B, q, H]).

        `last`: pick only at the block's last slot (picks [B, 1]), as a prefill needs.
        """
        dev = self.lm.device
        mask = self.cache.open(see.to(dev), live.to(dev), self.lm.dtype)
        hidden = forward_rows(
            self.lm, torch.tensor(ids, dtype=torch.long, device=dev), positions, mask, self.cache.cache
        )
        return greedy_picks(self.lm, hidden[:, -1:] if last else hidden), hidden  # [B, q or 1], [B, q, H]

    def prefill(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Every prompt, left-padded to the longest, in chunks of PREFILL_CHUNK slots → (ids [B, P],
        hidden [B, P, H], live [B, P]).

        Chunks keep the explicit mask and the attention scores at [B, ·, chunk, S] instead of [B, ·, P, P]
        (about 2.3 GB of scores for one 8k-token prompt): each chunk attends the slots its row already holds
        plus its own causal block, which is the one-forward prefill's attention, in a different order of sums.
        """
        lens = torch.tensor([len(r.prompt_ids) for r in self.rows])
        width = int(lens.max())
        ids = [[PAD] * (width - len(r.prompt_ids)) + r.prompt_ids for r in self.rows]
        live = torch.arange(width)[None, :] >= (width - lens)[:, None]
        positions = (torch.arange(width)[None, :] - (width - lens)[:, None]).clamp_min(0)
        hiddens, picks = [], torch.empty(0)
        for lo in range(0, width, PREFILL_CHUNK):
            hi = min(width, lo + PREFILL_CHUNK)
            causal = torch.ones(hi - lo, hi - lo, dtype=torch.bool).tril().expand(len(self.rows), hi - lo, hi - lo)
            chunk = [row[lo:hi] for row in ids]
            picks, hidden = self.verify(chunk, positions[:, lo:hi], causal, live[:, lo:hi], last=hi == width)
            hiddens.append(hidden)
        hidden = torch.cat(hiddens, dim=1)
        for b, row in enumerate(self.rows):
            row.root, row.hidden = int(picks[b, -1]), hidden[b, -1]
        return torch.tensor(ids), hidden, live

    def decode(self, method: Method) -> BatchTrace:
        """Prefill, let the method set up, then step until every request has ended."""
        with torch.inference_mode():
            t = self.now()
            ids, hidden, live = self.prefill()
            method.start(self, ids, hidden, live)
            self.prefill_s = self.now() - t
            while self.active:
                self._finish_roots(method)
                if self.active:
                    self._step(method)
        return self.trace()

    def _finish_roots(self, method: Method) -> None:
        """Commit the roots that end their request (EOS, or the budget's last token) without a forward."""
        started = self.now()
        final = [r for r in self.active if is_final(r.root, r.remaining, self.eos)]
        if not final:
            return
        committed = [self._commit(r, [r.root]) for r in final]
        self._leave(method)
        self.steps.append(
            BatchStep(self.now() - started, [r.index for r in final], committed, [0] * len(final), 0, self.cache.slots)
        )

    def _step(self, method: Method) -> None:
        started = self.now()
        rows = list(self.active)
        outs = method.step(self)
        committed = []
        for row, out in zip(rows, outs, strict=True):
            committed.append(self._commit(row, [row.root, *out.accepted]))
            row.root, row.hidden = out.root, out.hidden
        width = max(o.forward for o in outs)
        self._leave(method)
        self.steps.append(
            BatchStep(
                self.now() - started,
                [r.index for r in rows],
                committed,
                [o.forward for o in outs],
                width,
                self.cache.slots,
            )
        )

    def _commit(self, row: Row, tokens: list[int]) -> list[int]:
        """Cut a commit at the first EOS and at the budget (core.decoding.clip), append it and set `stopped`."""
        out, row.stopped = clip(tokens, row.remaining, self.eos)
        row.output.extend(out)
        return out

    def _leave(self, method: Method) -> None:
        """Drop the finished rows from the target cache and the method's own state."""
        keep = [b for b, r in enumerate(self.active) if not r.stopped]
        if len(keep) == len(self.active):
            return
        self.active = [self.active[b] for b in keep]
        if keep:
            self.cache.select(keep)
            method.select(keep)

    def trace(self) -> BatchTrace:
        """The finished batch as plain data."""
        return BatchTrace(
            method=self.method,
            model=self.lm.name,
            device=self.lm.describe(),
            config=self.config,
            max_new_tokens=self.sampling.max_new_tokens,
            prompt_ids=[r.prompt_ids for r in self.rows],
            outputs=[r.output for r in self.rows],
            stopped=[r.stopped or "length" for r in self.rows],
            prefill_s=self.prefill_s,
            steps=self.steps,
        )
