"""Plain autoregressive decoding: one token per forward pass, the baseline every method is measured against."""

from __future__ import annotations

from dataclasses import dataclass

from specviz.methods.base import Card, Outcome, Run, generator

CARD = Card(
    name="ar",
    label="Autoregressive",
    summary="One token per forward pass: the serial baseline.",
    colour="#6b7280",
    order=0,
    batched="chain",
    short="plain decoding",
)


@dataclass(frozen=True)
class Config:
    """Plain decoding has no settings of its own."""


def step(run: Run, root: int) -> Outcome:
    """propose nothing (the root alone) → verify (run it through the model) → accept nothing more → commit (the
    forward pass already appended it to the cache): the four phases every method has, three of them empty here."""
    with run.phase("propose"):
        chain = [root]  # the target's own pick, drafted by no one
    with run.phase("verify"):
        logits, hidden = run.lm.forward(chain, run.cache)
    with run.phase("accept"):
        accepted: list[int] = []  # nothing was drafted, so nothing more is accepted
    with run.phase("commit"):
        pass  # the cache already holds the root; Run.decode commits the token
    return Outcome(accepted=accepted, proposed=0, forward_tokens=1, logits=logits[-1], hidden=hidden[-1])


generate = generator(CARD.name, Config, lambda run, cfg: step, "Decode until EOS or max_new_tokens.")
