"""Sampling settings and the small pure functions that turn logits into choices."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from specviz.core.host import fetch
from specviz.core.trace import Alt


class ConfigError(ValueError):
    """A setting outside its valid range; the message names it."""


MIN_TEMPERATURE = 0.01  # below it logits / T overflows float32 (1e-300 rounds to 0); 0 itself means greedy
MAX_NEW_TOKENS = 1 << 16  # beyond any context here; a run also checks the model's own (core.prompts.check_context)
MAX_SEED = (1 << 63) - 1  # what torch.Generator.manual_seed takes


def check_between(name: str, value: float, lo: float, hi: float, unit: str = "") -> None:
    """ConfigError unless lo ≤ value ≤ hi (a Config's numeric setting; `unit` follows the bounds)."""
    if not lo <= value <= hi:
        raise ConfigError(f"{name} must be between {lo} and {hi}{unit}, got {value}.")


@dataclass(frozen=True)
class Sampling:
    """How tokens are chosen; temperature 0 means greedy."""

    max_new_tokens: int = 64  # stop after this many new tokens
    temperature: float = 0.0  # 0 = greedy argmax; > 0 samples from softmax(logits / T)
    top_p: float = 1.0  # nucleus: keep the smallest set of tokens whose mass reaches top_p
    seed: int = 0  # seeds the explicit torch.Generator of a run

    def __post_init__(self) -> None:
        n, t, seed = self.max_new_tokens, self.temperature, self.seed
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_NEW_TOKENS:
            raise ConfigError(f"max_new_tokens must be a positive integer up to {MAX_NEW_TOKENS}, got {n!r}.")
        if not (isinstance(t, (int, float)) and math.isfinite(t) and (t == 0 or MIN_TEMPERATURE <= t <= 10)):
            raise ConfigError(f"temperature must be 0 (greedy) or between {MIN_TEMPERATURE} and 10, got {t!r}.")
        if not (isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1):
            raise ConfigError(f"top_p must be in (0, 1], got {self.top_p!r}.")
        if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
            raise ConfigError(f"seed must be an integer from 0 to 2^63 - 1, got {str(seed)[:40]}.")

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


def entropies(probs: torch.Tensor) -> torch.Tensor:
    """Shannon entropy in nats of each row of probs [..., V], as a tensor (read it with core.host.fetch)."""
    p = probs.float().clamp_min(1e-30)
    return -(p * p.log()).sum(-1)


def entropy(probs: torch.Tensor) -> float:
    """Shannon entropy in nats of probs [V]."""
    return fetch(entropies(probs))[0][0]


def summary(probs: torch.Tensor, token: int, decode, k: int = 5) -> tuple[float, float, list[Alt]]:
    """A step record's view of probs [V], in one host read: the chosen token's probability, the entropy, and the
    k most likely tokens as plain data."""
    vals, ids = probs.float().topk(k)
    p, h, v, i = fetch(probs[token], entropies(probs), vals, ids)
    return p[0], h[0], [Alt(int(t), decode(int(t)), round(x, 6)) for x, t in zip(v, i, strict=True)]


def top_alts(probs: torch.Tensor, decode, k: int = 5) -> list[Alt]:
    """The k most likely tokens of probs [V] as plain data."""
    vals, ids = probs.float().topk(k)
    v, i = fetch(vals, ids)
    return [Alt(int(t), decode(int(t)), round(x, 6)) for x, t in zip(v, i, strict=True)]
