"""The batched methods by name: those whose card names a batched step (plain decoding, prompt lookup and EAGLE-2),
each decoding B prompts at once."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from specviz import methods
from specviz.core.model import LoadedModel
from specviz.core.sampling import ConfigError, Sampling
from specviz.heads.eagle import EagleHead
from specviz.heads.eagle_drafter import head_for
from specviz.methods.base import settled
from specviz.methods.batched.chain import Chain
from specviz.methods.batched.eagle import BatchEagle
from specviz.methods.batched.loop import BatchRun, Method
from specviz.methods.batched.record import BatchTrace


def names() -> list[str]:
    """The methods that decode a batch (their cards name a batched step), in the cards' order."""
    return [c.name for c in methods.cards() if c.batched]


def build(lm: LoadedModel, name: str, config: Any = None, head: EagleHead | None = None) -> tuple[Method, dict]:
    """The batched step for a method name (its card's batched kind: a chain or an EAGLE tree), and its config as
    plain data."""
    if name not in names():
        raise ConfigError(f"No batched {name!r}; batched decoding has {', '.join(names())}.")
    cfg = settled(config or methods.get(name).Config())  # a shape left unset for the fit: its fallback
    if methods.card(name).batched == "eagle":
        return BatchEagle(lm, head_for(lm, cfg.head, head), cfg), asdict(cfg)
    return Chain(cfg), asdict(cfg)


def generate(
    lm: LoadedModel,
    prompts: list[list[int]],
    sampling: Sampling,
    name: str = "ar",
    config: Any = None,
    head: EagleHead | None = None,
) -> BatchTrace:
    """Decode every prompt together with method `name` (greedy) until each ends at EOS or max_new_tokens."""
    method, cfg = build(lm, name, config, head)
    return BatchRun(lm, prompts, sampling, name, cfg).decode(method)
