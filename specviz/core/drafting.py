"""What several drafters share: a layer-prefix draft of the target (sps, the lossless lab) and the
starting guesses of a Jacobi window (jacobi, lookahead), and the measured verify-cost curve prompt lookup (one-row and
batched) steers its draft length by."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from specviz.core.model import LoadedModel, growing_cache
from specviz.core.sampling import ConfigError

INIT_SOURCES = ("pad", "random", "prompt")  # where the first Jacobi guesses come from


MAX_LAYERS = 1024  # deeper than any model specviz loads; the bound when the model's depth is not known
MAX_SPEC = 4 * MAX_LAYERS  # characters of a layers string


def parse_layers(spec: str, n_layers: int | None) -> list[int]:
    """'0-3' or '0,1,2,29' -> sorted layer indices, each below n_layers (MAX_LAYERS when not known).

    Every bound is checked on the numbers before any range is built, so '0-9999999999' costs nothing.
    """
    if not isinstance(spec, str) or len(spec) > MAX_SPEC:
        raise ConfigError(f"layers must be a short string like '0-3' or '0,1,2,29', got {str(spec)[:40]!r}.")
    limit = n_layers if n_layers is not None else MAX_LAYERS
    spans = []
    try:
        for part in spec.replace(" ", "").split(","):
            lo, _, hi = part.partition("-")
            spans.append((int(lo), int(hi or lo)))
    except ValueError:
        raise ConfigError(f"layers must look like '0-3' or '0,1,2,29', got {spec[:40]!r}.") from None
    if not spans or any(lo < 0 or hi >= limit or lo > hi for lo, hi in spans):
        has = f" (the model has {n_layers})" if n_layers is not None else f" (at most {MAX_LAYERS})"
        raise ConfigError(f"layers {spec[:40]!r} names no valid layer{has}.")
    return sorted({i for lo, hi in spans for i in range(lo, hi + 1)})


@dataclass(frozen=True)
class DraftParts:
    """What a draft runs: decoder blocks, a final norm, LM-head rows [Vd, H] and the token id of each row."""

    blocks: list[nn.Module]
    norm: nn.Module
    head: torch.Tensor
    ids: torch.Tensor | None = None  # [Vd] token ids of the head's rows; None: the first Vd ids of the vocabulary


class LayerDraft:
    """A small draft with its own KV cache: by default the target's chosen layers, final norm and (part of
    the) LM head; given `parts`, any blocks at the target's width (a trained draft, heads.draft)."""

    def __init__(self, lm: LoadedModel, layers: list[int], vocab: int, parts: DraftParts | None = None) -> None:
        self.lm, self.model = lm, lm.hf.model
        if parts is None:
            weight = lm.lm_head.get_parameter("weight")  # [V, H]
            parts = DraftParts(
                [self.model.layers[i] for i in layers], self.model.norm, weight[: vocab or weight.shape[0]]
            )
        self.blocks, self.norm, self.head, self.ids = parts.blocks, parts.norm, parts.head, parts.ids
        self.cache = growing_cache(lm.hf.config)
        self.length = 0  # tokens held in the draft cache

    @torch.inference_mode()
    def forward(self, ids: list[int] | torch.Tensor) -> torch.Tensor:
        """Feed new tokens (a list, or a tensor [k] already on the device); return the draft logits [Vd] for the
        position after the last one."""
        k, past, dev = len(ids), self.length, self.lm.device
        x = self.model.embed_tokens(torch.as_tensor(ids, device=dev).view(1, -1))  # [1, k, H]
        pos = torch.arange(past, past + k, device=dev).view(1, -1)
        rope = self.model.rotary_emb(x, position_ids=pos)
        mask = None
        if k > 1:  # causal over the new tokens; the cached prefix stays visible
            mask = torch.zeros(1, 1, k, past + k, dtype=x.dtype, device=dev)
            mask[0, 0, :, past:] = torch.full((k, k), self.lm.neg_inf(), dtype=x.dtype, device=dev).triu(1)
        for block in self.blocks:
            x = block(
                x, attention_mask=mask, position_ids=pos, cache=self.cache, use_cache=True, position_embeddings=rope
            )
        self.length += k
        return (self.norm(x[0, -1]) @ self.head.T).float()

    def rollback(self, length: int) -> None:
        """Forget cached tokens beyond `length`."""
        if self.length > length:
            self.cache.crop(length - self.length)
            self.length = length


def as_full(probs: torch.Tensor, vocab: int, ids: torch.Tensor | None = None) -> torch.Tensor:
    """A draft distribution over its Vd rows as one over the whole vocabulary [V] (zero elsewhere): the rows
    are the token ids `ids`, or the first Vd ids when ids is None."""
    if ids is not None:
        return probs.new_zeros(vocab).index_copy_(0, ids.to(probs.device), probs)
    if probs.shape[0] == vocab:
        return probs
    return torch.cat([probs, probs.new_zeros(vocab - probs.shape[0])])


def initial_guesses(
    source: str, n: int, prompt_ids: list[int], pad_id: int, vocab: int, gen: torch.Generator
) -> list[int]:
    """n starting guesses: the pad token, uniform vocabulary ids, or tokens drawn from the prompt."""
    if n <= 0:
        return []
    if source == "pad":
        return [pad_id] * n
    if source == "random":
        return torch.randint(vocab, (n,), generator=gen).tolist()
    if source == "prompt":
        picks = torch.randint(len(prompt_ids), (n,), generator=gen).tolist()
        return [prompt_ids[i] for i in picks]
    raise ConfigError(f"Unknown initial-guess source {source!r}; choose from {', '.join(INIT_SOURCES)}.")


def pad_id(lm: LoadedModel) -> int:
    pid = lm.tokenizer.pad_token_id
    return int(pid) if pid is not None else min(lm.eos_ids)


@dataclass(frozen=True)
class VerifyLatency:
    """This device's measured forward latency (ms) against k new tokens, from k = 1 in increasing k: the evidence a
    method steers its draft length by, measured by the caller (specviz.tuning.probe.verify_cost) and passed in its
    Config."""

    ks: tuple[int, ...]
    ms: tuple[float, ...]

    def __post_init__(self) -> None:
        try:
            ks, ms = tuple(int(k) for k in self.ks), tuple(float(m) for m in self.ms)
        except (TypeError, ValueError):
            raise ConfigError("A latency curve is two lists of numbers, ks and ms.") from None
        if len(ks) != len(ms) or not ks or ks[0] != 1 or any(m <= 0 for m in ms) or list(ks) != sorted(set(ks)):
            raise ConfigError("A latency curve needs positive times for k = 1, … in increasing k.")
        object.__setattr__(self, "ks", ks)
        object.__setattr__(self, "ms", ms)

    @classmethod
    def of(cls, value: object) -> VerifyLatency | None:
        """A curve from itself, None, or its plain form ({"ks": [...], "ms": [...]}, as a trace records it)."""
        if value is None or isinstance(value, VerifyLatency):
            return value
        if isinstance(value, Mapping) and set(value) == {"ks", "ms"}:
            return cls(value["ks"], value["ms"])
        raise ConfigError("latency is a measured curve (the latency probe's), not an option to type.")

    def relative(self, k: int) -> float:
        """Cost of a forward with k new tokens over one with 1, linearly interpolated (flat past the last k)."""
        ks, ms = self.ks, self.ms
        if k <= ks[0]:
            return 1.0
        for (k0, m0), (k1, m1) in zip(zip(ks, ms), zip(ks[1:], ms[1:])):
            if k <= k1:
                return (m0 + (m1 - m0) * (k - k0) / (k1 - k0)) / ms[0]
        return ms[-1] / ms[0]


# the metadata of a Config field for evidence the caller measured (a verify-cost curve), not a setting a person
# picks: the app draws no widget for it and the command line takes no option for it (see specviz.methods.settings)
MEASURED = {"measured": True}


def fit_field(fallback: int, unset: int = 0) -> dict[str, Any]:
    """The metadata of a Config field the device's fit chooses (a tree's depth, width and budget; Lookahead's W, N,
    G): `unset` (0, or -1 where 0 is a setting) means "fit it where the run starts" (specviz.tuning.fit.measured),
    and `fallback` is what a run that skips the fit (a library call on a model without trained heads, the tests'
    tiny models) takes instead."""
    return {"fitted": True, "fallback": fallback, "unset": unset}


def suffix_matches(seq: list[int], max_ngram: int, min_ngram: int) -> Iterator[tuple[int, int]]:
    """(n, start of its continuation) for each earlier occurrence of seq's last n tokens, n from max_ngram down to
    min_ngram, most recent first; the continuation is never empty (prompt lookup's match, the hybrid's pool).

    Only the places where seq's last token recurs can end a match; `list.index` finds them in C, so a step
    compares a few n-grams rather than slicing the whole context once per n (0.35 ms at 1,000 tokens).
    """
    if len(seq) < 2:
        return
    last, body = seq[-1], seq[:-1]
    ends: list[int] = []
    i = -1
    while True:
        try:
            i = body.index(last, i + 1)
        except ValueError:
            break
        ends.append(i)
    for n in range(min(max_ngram, len(seq) - 1), min_ngram - 1, -1):
        pattern = seq[-n:]
        for e in reversed(ends):
            if e >= n - 1 and seq[e - n + 1 : e + 1] == pattern:
                yield n, e + 1
