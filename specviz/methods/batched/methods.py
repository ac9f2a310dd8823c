"""The batched methods by name: plain decoding, prompt lookup and EAGLE-2, each decoding B prompts at once."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from specviz.core.model import LoadedModel
from specviz.core.sampling import ConfigError, Sampling
from specviz.heads.eagle import EagleHead, HeadError
from specviz.methods import eagle, prompt_lookup
from specviz.methods.batched.chain import Chain
from specviz.methods.batched.eagle import BatchEagle
from specviz.methods.batched.loop import BatchRun, Method
from specviz.methods.batched.record import BatchTrace

NAMES = ("ar", "pld", "eagle")  # the methods that decode a batch


def build(lm: LoadedModel, name: str, config: Any = None, head: EagleHead | None = None) -> tuple[Method, dict]:
    """The batched step for a method name, and its config as plain data."""
    if name == "ar":
        return Chain(), {}
    if name == "pld":
        cfg = config or prompt_lookup.Config()
        return Chain(cfg), asdict(cfg)
    if name == "eagle":
        cfg = config or eagle.Config()
        try:
            head = head or eagle.get_head(lm, cfg)
        except HeadError as exc:
            raise ConfigError(str(exc)) from None
        return BatchEagle(lm, head, cfg), asdict(cfg)
    raise ConfigError(f"No batched {name!r}; batched decoding has {', '.join(NAMES)}.")


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
