"""Jacobi decoding: guess n tokens, refine them all in one forward pass, commit the converged prefix."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from specviz.core.details import JacobiDetail
from specviz.core.drafting import INIT_SOURCES, initial_guesses, pad_id
from specviz.core.model import LoadedModel, crop_to
from specviz.core.sampling import ConfigError
from specviz.methods.base import Card, Outcome, Run, generator
from specviz.trees.walk import judge

__all__ = ["INIT_SOURCES", "Config", "generate", "initial_guesses", "jacobi_fixed_point", "pad_id"]

CARD = Card(
    name="jacobi",
    label="Jacobi decoding",
    summary="Guess n tokens, refine all of them in parallel each forward pass, commit the converged prefix.",
    colour="#999933",
    order=6,
)


@dataclass(frozen=True)
class Config:
    """Jacobi settings; each step feeds 1 + guesses tokens."""

    guesses: int = 7  # n future tokens refined per pass; an 8-token forward costs r ≈ 1.3 here
    init: str = "prompt"  # first guesses: the "pad" token, "random" ids, or tokens drawn from the prompt

    def __post_init__(self) -> None:
        if not isinstance(self.guesses, int) or not 1 <= self.guesses <= 32:
            raise ConfigError(f"jacobi guesses must be an integer from 1 to 32, got {self.guesses!r}.")
        if self.init not in INIT_SOURCES:
            raise ConfigError(f"jacobi init must be one of {', '.join(INIT_SOURCES)}, got {str(self.init)[:40]!r}.")


def jacobi_fixed_point(
    lm: LoadedModel, prompt_ids: list[int], n: int, init: str = "pad", seed: int = 0, max_iters: int | None = None
) -> list[list[int]]:
    """Pure greedy Jacobi on one block of n tokens after the prompt: every iteration's guess vector.

    y_1 = argmax p(. | prompt), y_j = argmax p(. | prompt, y_<j) of the previous vector; iterate until
    nothing changes. The last vector is the fixed point, reached in at most n iterations.
    """
    gen = torch.Generator().manual_seed(seed)
    y = initial_guesses(init, n, prompt_ids, pad_id(lm), lm.hf.config.vocab_size, gen)
    cache = lm.new_cache()
    lm.forward(prompt_ids[:-1], cache)  # the last prompt token is fed with the block
    base = cache.get_seq_length()
    trajectory = [y]
    for _ in range(max_iters or n + 1):
        logits, _ = lm.forward([prompt_ids[-1], *y[:-1]], cache)  # [n, V]: row j predicts y_{j+1}
        crop_to(cache, base)
        nxt = torch.argmax(logits, dim=-1).tolist()
        trajectory.append(nxt)
        if nxt == y:
            break
        y = nxt
    return trajectory


@dataclass
class JacobiState:
    """The guesses carried from one pass to the next, keyed by output index."""

    cfg: Config
    guesses: list[int]
    prev: dict[int, int] = field(default_factory=dict)  # output index -> token of the last guess row
    fresh: set[int] = field(default_factory=set)  # output indices whose guess came from the init source

    def step(self, run: Run, root: int) -> Outcome:
        """propose (the last pass's guesses) → verify (root + guesses fed causally) → accept (the agreeing prefix) →
        commit (crop the cache; the rest, refined, are the next pass's guesses)."""
        base, offset = run.seq_len, len(run.output)
        with run.phase("propose"):
            guesses = self.guesses  # carried over from the last pass: Jacobi drafts by iterating
        with run.phase("verify"):
            logits, hidden = run.lm.forward([root, *guesses], run.cache)  # [n+1, V]: row j predicts index j+1
        with run.phase("accept"):
            verdict = judge(logits[0], [guesses], [logits[1:]], run.sampling, run.gen)  # the row: a one-branch tree
        m, row = len(verdict.accepted), [root, *guesses]
        with run.phase("commit"):
            crop_to(run.cache, base + 1 + m)
        preds = torch.argmax(logits, dim=-1).tolist()
        status = _statuses(offset, row, m, self)
        self.prev = {offset + j: tok for j, tok in enumerate(row)}
        fill = initial_guesses(self.cfg.init, m, run.prompt_ids, pad_id(run.lm), run.lm.hf.config.vocab_size, run.gen)
        self.guesses = preds[m + 1 :] + fill  # refined guesses for the indices after the next root
        start = offset + m + 2
        self.fresh = set(range(start + len(guesses) - m, start + len(guesses)))
        return Outcome(
            accepted=verdict.accepted,
            proposed=len(guesses),
            forward_tokens=len(row),
            logits=logits[m],
            hidden=hidden[m],
            next_root=verdict.forced,
            detail=lambda: JacobiDetail(offset, row, [run.lm.token_text(x) for x in row], status, preds, m),
        )


def _statuses(offset: int, row: list[int], accepted: int, state: JacobiState) -> list[str]:
    """Per cell of this iteration's row: committed, init, fixed (same as last pass) or changed."""
    out = []
    for j, tok in enumerate(row):
        idx = offset + j
        if j <= accepted:
            out.append("committed")
        elif idx in state.fresh:
            out.append("init")
        else:
            out.append("fixed" if state.prev.get(idx) == tok else "changed")
    return out


def begin(run: Run, cfg: Config) -> JacobiState:
    """The run's first guesses, drawn before its prefill from its generator."""
    lm = run.lm
    first = initial_guesses(cfg.init, cfg.guesses, run.prompt_ids, pad_id(lm), lm.hf.config.vocab_size, run.gen)
    return JacobiState(cfg, first, fresh=set(range(1, cfg.guesses + 1)))


generate = generator(CARD.name, Config, lambda run, cfg: begin(run, cfg).step, "Decode, one Jacobi iteration per step.")
