"""Reading a head's files (EAGLE's, EAGLE-3's, Medusa's, Hydra's) as untrusted input: the config.json checked
by a schema before anything is built from it, the weights file bounded in size, and the token-id map (draft
vocabulary) checked against the vocabulary. Every failure is the head's own error, in one sentence."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import torch

from specviz.core.schema import SchemaError, build, check, read_json

C = TypeVar("C")

MAX_CONFIG_BYTES = 1 << 20  # a head's config.json or calibration.json (the committed ones are a few KB)
MAX_WEIGHT_BYTES = 1 << 30  # a head's weights (the committed ones are 5-12 MB)
MAX_VOCAB = 1 << 20  # vocabulary sizes a config may state


@dataclass(frozen=True)
class Kind:
    """What a head's files are: the format its config.json names, the head in words, its error, how to remake it."""

    fmt: str
    name: str  # "an EAGLE head"
    error: type[Exception]
    hint: str  # "retrain with: python -m specviz train eagle"


def read_config(
    path: Path, cls: type[C], specs: dict[str, Any], kind: Kind, extra: Callable[[C], None] | None = None
) -> C:
    """The dataclass `cls` from a config.json of `kind`, every field checked by `specs` (or its annotation) and
    then by `extra` (which raises SchemaError); the kind's error with one sentence otherwise."""
    try:
        data = read_json(path, MAX_CONFIG_BYTES, "a head config")
        found = data.get("format") if isinstance(data, dict) else None
        if found != kind.fmt:
            shown = found if isinstance(found, str) and len(found) <= 40 else type(found).__name__
            raise kind.error(f"{path} is not {kind.name} config (format {shown!r}); {kind.hint}.")
        cfg = build(cls, data, specs, "the head config")
        if extra is not None:
            extra(cfg)
    except SchemaError as exc:
        raise kind.error(f"{path} is corrupt ({str(exc).rstrip('.')}); {kind.hint}.") from None
    return cfg


def read_table(path: Path, spec: Any, key: str, kind: Kind, hint: str) -> Any:
    """One field of a small JSON file beside the head (a calibration table), checked by `spec`."""
    try:
        data = read_json(path, MAX_CONFIG_BYTES, "a calibration table")
        check(data, {key: spec}, str(path))
    except SchemaError as exc:
        raise kind.error(f"{path} is corrupt ({str(exc).rstrip('.')}); {hint}.") from None
    return data[key]


def read_weights(path: Path, kind: Kind) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file of at most MAX_WEIGHT_BYTES; the kind's error with one sentence otherwise."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        if path.stat().st_size > MAX_WEIGHT_BYTES:
            raise kind.error(f"{path} is larger than {MAX_WEIGHT_BYTES >> 20} MB, more than any head; {kind.hint}.")
        state = load_file(str(path))
    except (OSError, SafetensorError) as exc:
        raise kind.error(f"Cannot read {path} ({str(exc).strip()[:120]}); {kind.hint}.") from None
    bad = next((k for k, v in state.items() if v.is_floating_point() and not torch.isfinite(v).all()), None)
    if bad is not None:  # a NaN head drafts NaN logits: argmax picks token 0, sampling raises deep in torch
        raise kind.error(f"{path} holds weights that are not finite numbers ({bad[:60]}); {kind.hint}.")
    return state


def is_file(path: Path) -> bool:
    """Path.is_file, False (not an OSError) where the path cannot even be looked at (too long, no permission)."""
    try:
        return path.is_file()
    except OSError:
        return False


def stamp(path: Path) -> int:
    """The file's modification time in ns (0 when it is not a readable file): a cache key's version."""
    try:
        return path.stat().st_mtime_ns if path.is_file() else 0
    except OSError:
        return 0


def ids_fit(ids: torch.Tensor | None, size: int, vocab: int) -> bool:
    """Whether `ids` is a 1-D integer tensor of `size` token ids, each in [0, vocab)."""
    if ids is None or ids.dim() != 1 or ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
        return False
    return ids.numel() == size > 0 and 0 <= int(ids.min()) <= int(ids.max()) < vocab
