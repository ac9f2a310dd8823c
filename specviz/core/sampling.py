"""Sampling settings and the small pure functions that turn logits into choices."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from specviz.core.trace import Alt


class ConfigError(ValueError):
    """A setting outside its valid range; the message names it."""


@dataclass(frozen=True)
class Sampling:
    """How tokens are chosen; temperature 0 means greedy."""

    max_new_tokens: int = 64  # stop after this many new tokens
    temperature: float = 0.0  # 0 = greedy argmax; > 0 samples from softmax(logits / T)
    top_p: float = 1.0  # nucleus: keep the smallest set of tokens whose mass reaches top_p
    seed: int = 0  # seeds the explicit torch.Generator of a run

    def __post_init__(self) -> None:
        if not isinstance(self.max_new_tokens, int) or self.max_new_tokens < 1:
            raise ConfigError(f"max_new_tokens must be a positive integer, got {self.max_new_tokens!r}.")
        if not (math.isfinite(self.temperature) and 0 <= self.temperature <= 10):
            raise ConfigError(f"temperature must be between 0 and 10, got {self.temperature!r}.")
        if not (0 < self.top_p <= 1):
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p!r}.")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


def target_probs(logits: torch.Tensor, s: Sampling) -> torch.Tensor:
    """The distribution tokens are drawn from: softmax(logits/T) cut to top-p; logits [..., V]."""
    if s.greedy:
        return torch.softmax(logits.float(), dim=-1)
    probs = torch.softmax(logits.float() / s.temperature, dim=-1)
    return top_p_filter(probs, s.top_p) if s.top_p < 1 else probs


def top_p_filter(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """Zero the tail beyond the nucleus and renormalise; probs [..., V]."""
    sorted_p, order = probs.sort(dim=-1, descending=True)
    keep = sorted_p.cumsum(-1) - sorted_p < top_p  # always keeps the top token
    sorted_p = sorted_p * keep
    out = torch.zeros_like(probs).scatter(-1, order, sorted_p)
    return out / out.sum(-1, keepdim=True)


def choose(logits: torch.Tensor, s: Sampling, gen: torch.Generator) -> int:
    """One token from logits [V]: argmax when greedy, else a draw from target_probs."""
    if s.greedy:
        return int(torch.argmax(logits))
    probs = target_probs(logits, s)
    return int(torch.multinomial(probs.cpu(), 1, generator=gen))


def entropy(probs: torch.Tensor) -> float:
    """Shannon entropy in nats of probs [V]."""
    p = probs.float().clamp_min(1e-30)
    return float(-(p * p.log()).sum())


def top_alts(probs: torch.Tensor, decode, k: int = 5) -> list[Alt]:
    """The k most likely tokens of probs [V] as plain data."""
    vals, ids = probs.float().topk(k)
    return [Alt(int(i), decode(int(i)), round(float(v), 6)) for v, i in zip(vals, ids)]
