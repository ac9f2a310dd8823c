"""What every decoding method shares: the run state, the commit rule and the trace it leaves."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, is_dataclass
from typing import Any

import torch

from specviz.model import LoadedModel
from specviz.sampling import Sampling, choose, entropy, target_probs, top_alts
from specviz.trace import StepTrace, Trace

OnStep = Callable[[StepTrace], None]


class Run:
    """One generation in progress: cache, generator, committed tokens and step records.

    Every method follows the same rhythm. After the prefill the run holds `pending`, the target's
    logits for the next position. A step picks the root token from `pending`, optionally proposes
    more, runs one target forward, accepts a prefix, and commits root + accepted tokens.
    """

    def __init__(self, lm: LoadedModel, prompt_ids: list[int], sampling: Sampling, method: str,
                 config: Any = None, prompt: str = "", on_step: OnStep | None = None) -> None:
        if not prompt_ids:
            raise ValueError("The prompt is empty.")
        self.lm, self.sampling, self.method = lm, sampling, method
        self.prompt, self.prompt_ids = prompt, list(prompt_ids)
        self.config = asdict(config) if is_dataclass(config) else dict(config or {})
        self.gen = torch.Generator().manual_seed(sampling.seed)
        self.cache = lm.new_cache()
        self.output: list[int] = []
        self.steps: list[StepTrace] = []
        self.stopped = ""
        self.on_step = on_step
        self.pending: torch.Tensor | None = None  # logits [V] for the next position
        self.pending_hidden: torch.Tensor | None = None  # hidden [H] that produced them
        self.prefill_s = 0.0
        self._t0 = time.perf_counter()

    @property
    def done(self) -> bool:
        return bool(self.stopped)

    @property
    def remaining(self) -> int:
        return self.sampling.max_new_tokens - len(self.output)

    @property
    def seq_len(self) -> int:
        """Tokens held in the KV cache (prompt + committed, minus the pending root)."""
        return self.cache.get_seq_length()

    def prefill(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the prompt; keep the last position's logits as `pending`; return (logits, hidden)."""
        t = time.perf_counter()
        logits, hidden = self.lm.forward(self.prompt_ids, self.cache, logits_for=slice(-1, None))
        self.pending, self.pending_hidden = logits[-1], hidden[-1]
        self.prefill_s = time.perf_counter() - t
        return logits, hidden

    def pick_root(self) -> int:
        """The target's own next token, drawn from `pending`."""
        return choose(self.pending, self.sampling, self.gen)

    def is_final(self, token: int) -> bool:
        """Whether committing `token` ends the run (EOS, or the length budget reached)."""
        return token in self.lm.eos_ids or self.remaining <= 1

    def clip(self, tokens: list[int]) -> list[int]:
        """Cut a proposed commit at the first EOS and at the token budget, and set `stopped`."""
        out: list[int] = []
        for tok in tokens[: self.remaining]:
            out.append(tok)
            if tok in self.lm.eos_ids:
                self.stopped = "eos"
                return out
        if len(self.output) + len(out) >= self.sampling.max_new_tokens:
            self.stopped = "length"
        return out

    def commit(self, tokens: list[int], *, forward_tokens: int, draft_s: float, verify_s: float,
               started: float, detail: dict[str, Any] | None = None,
               dist_logits: torch.Tensor | None = None) -> StepTrace:
        """Append tokens to the output and record the step; `dist_logits` is the root's distribution."""
        tokens = self.clip(tokens)
        dist = target_probs(self.pending if dist_logits is None else dist_logits, self.sampling)
        first = tokens[0]
        step = StepTrace(
            index=len(self.steps), committed=tokens, texts=[self.lm.token_text(t) for t in tokens],
            forward_tokens=forward_tokens, draft_s=draft_s, verify_s=verify_s,
            wall_s=time.perf_counter() - started, prob=round(float(dist[first]), 6),
            entropy=round(entropy(dist), 6), top=top_alts(dist, self.lm.token_text), detail=detail or {},
        )
        self.output.extend(tokens)
        self.steps.append(step)
        if self.on_step is not None:
            self.on_step(step)
        return step

    def trace(self) -> Trace:
        """The finished run as plain data."""
        cfg = {"sampling": asdict(self.sampling), "method": self.config}
        return Trace(
            method=self.method, model=self.lm.name, device=self.lm.describe(), prompt=self.prompt,
            prompt_ids=self.prompt_ids, config=cfg, steps=self.steps, output_ids=self.output,
            text=self.lm.decode(self.output), total_s=time.perf_counter() - self._t0,
            prefill_s=self.prefill_s, stopped=self.stopped or "length",
        )
