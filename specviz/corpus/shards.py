"""The one shard layout every training set is stored in: Sequence, packed flat into safetensors, and the split.

A shard holds sequences flattened: token ids, the target's final post-norm hidden state at every position
(fp16), a 0/1 mask over the positions a head learns from, the offsets where each sequence starts, and, when every
sequence has them, `label` (the target's argmax: feature windows, corpus.features) and `layers` (three layers'
inputs: EAGLE-3's self-distilled set). Every HELDOUT_EVERY-th shard of a self-distilled set, and every
HELDOUT_EVERY-th ShareGPT record, is held out. The committed corpus itself is token ids only (corpus.store).
"""

from __future__ import annotations

import itertools
from collections import abc
from dataclasses import dataclass
from pathlib import Path

import torch

from specviz.core.paths import cache_root

HELDOUT_EVERY = 10  # record (or shard) i is held out when i % 10 == 9
HIDDEN_DTYPE = torch.float16  # post-norm hidden states stay well inside fp16's range


class DataError(ValueError):
    """Missing, damaged or mismatched data (a shard, a folder, a manifest); the message says what to run."""


def held_out(index: int) -> bool:
    """Whether ShareGPT record (or self-distilled shard) `index` belongs to the held-out split."""
    return index % HELDOUT_EVERY == HELDOUT_EVERY - 1


@dataclass
class Sequence:
    """One sequence of a shard: ids, the target's hidden states, the mask of positions a head learns from."""

    ids: torch.Tensor  # [L] int64, prompt + continuation
    hidden: torch.Tensor  # [L, H] fp16, final post-norm hidden state at each position
    mask: torch.Tensor  # [L] bool, True on the positions learnt from (the answer, up to and including EOS)
    layers: torch.Tensor | None = None  # [L, 3H] fp16: the residual stream entering three layers (EAGLE-3)
    label: torch.Tensor | None = None  # [L] int32: the target's argmax at each position (label[j] predicts ids[j+1])


def shard_file(folder: Path, index: int) -> Path:
    """Where shard `index` of a folder lives."""
    return folder / f"shard_{index:05d}.safetensors"


def write_shard(path: Path, seqs: abc.Sequence[Sequence]) -> Path:
    """Sequences as one shard file, written atomically (a half-written shard is never read)."""
    from safetensors.torch import save_file

    tmp = path.with_suffix(".partial")
    save_file(pack(seqs), str(tmp), metadata={"format": "pt"})
    tmp.rename(path)
    return path


def read_shard(path: Path) -> list[Sequence]:
    """The sequences stored in one shard."""
    from safetensors.torch import load_file

    return unpack(load_file(str(path)))


def default_dir() -> Path:
    """Where the distillation shards live by default (under the cache root)."""
    return cache_root() / "distill"


def pack(seqs: abc.Sequence[Sequence]) -> dict[str, torch.Tensor]:
    """Flatten sequences into one safetensors dict."""
    lengths = torch.tensor([len(s.ids) for s in seqs], dtype=torch.long)
    extra = {}
    if seqs and all(s.layers is not None for s in seqs):
        extra["layers"] = torch.cat([s.layers for s in seqs]).contiguous()  # type: ignore[misc]
    if seqs and all(s.label is not None for s in seqs):
        extra["label"] = torch.cat([s.label for s in seqs])  # type: ignore[misc]
    return {
        **extra,
        "ids": torch.cat([s.ids for s in seqs]).to(torch.int32),
        "hidden": torch.cat([s.hidden for s in seqs]).contiguous(),
        "mask": torch.cat([s.mask for s in seqs]).to(torch.uint8),
        "offsets": torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)]),
    }


def unpack(tensors: dict[str, torch.Tensor]) -> list[Sequence]:
    """Inverse of pack."""
    off = tensors["offsets"].tolist()
    layers, label = tensors.get("layers"), tensors.get("label")
    return [
        Sequence(
            ids=tensors["ids"][a:b].long(),
            hidden=tensors["hidden"][a:b],
            mask=tensors["mask"][a:b].bool(),
            layers=None if layers is None else layers[a:b],
            label=None if label is None else label[a:b],
        )
        for a, b in itertools.pairwise(off)
    ]


def shard_paths(out_dir: Path | None = None, split: str = "train") -> list[Path]:
    """The shards of one split: "train", "heldout" or "all"."""
    if split not in ("train", "heldout", "all"):
        raise ValueError(f"split must be train, heldout or all, got {split!r}.")
    paths = sorted(Path(out_dir or default_dir()).glob("shard_*.safetensors"))
    if split == "all":
        return paths
    held = [held_out(int(p.stem.split("_")[1])) for p in paths]
    return [p for p, h in zip(paths, held, strict=True) if h == (split == "heldout")]


def load_dataset(out_dir: Path | None = None, split: str = "train") -> list[Sequence]:
    """Every sequence of a split; raise DataError when there is none."""
    paths = shard_paths(out_dir, split)
    if not paths:
        raise DataError(
            f"No {split} shards in {out_dir or default_dir()}; build them first "
            "(python -m specviz corpus distill builds them)."
        )
    seqs: list[Sequence] = []
    for p in paths:
        try:
            seqs.extend(read_shard(p))
        except Exception as exc:  # a corrupt shard: name it
            raise DataError(f"Shard {p} is unreadable ({exc}); delete it and rebuild.") from exc
    return seqs
