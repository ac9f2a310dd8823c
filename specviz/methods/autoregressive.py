"""Plain autoregressive decoding: one token per forward pass, the baseline every method is measured against."""

from __future__ import annotations

import time
from dataclasses import dataclass

from specviz.methods.base import OnStep, Run
from specviz.model import LoadedModel
from specviz.sampling import Sampling
from specviz.trace import Trace

NAME = "ar"
LABEL = "Autoregressive"
SUMMARY = "One token per forward pass: the serial baseline."


@dataclass(frozen=True)
class Config:
    """Plain decoding has no settings of its own."""


def step(run: Run) -> None:
    """Pick the next token from the pending logits, then run it through the model."""
    started = time.perf_counter()
    root = run.pick_root()
    if run.is_final(root):  # nothing more to compute: the last token needs no forward pass
        run.commit([root], forward_tokens=0, draft_s=0.0, verify_s=0.0, started=started)
        return
    t = time.perf_counter()
    logits, hidden = run.lm.forward([root], run.cache)
    verify_s = time.perf_counter() - t
    run.commit([root], forward_tokens=1, draft_s=0.0, verify_s=verify_s, started=started)
    run.pending, run.pending_hidden = logits[-1], hidden[-1]


def generate(lm: LoadedModel, prompt_ids: list[int], sampling: Sampling, config: Config | None = None,
             prompt: str = "", on_step: OnStep | None = None) -> Trace:
    """Decode until EOS or max_new_tokens."""
    run = Run(lm, prompt_ids, sampling, NAME, config or Config(), prompt, on_step)
    run.prefill()
    while not run.done:
        step(run)
    return run.trace()
