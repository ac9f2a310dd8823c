"""The self-distilled set on disk: Sequence, the flat safetensors shard layout (and its labelled form for feature
windows), the held-out split, loading.

A shard holds a batch of sequences, flattened: token ids (prompt + continuation), the target's final
post-norm hidden state at every position (fp16), a 0/1 mask over continuation positions, and the
offsets where each sequence starts. Every HELDOUT_EVERY-th shard is held out for measuring accuracy.
"""

from __future__ import annotations

import itertools
from collections import abc
from dataclasses import dataclass
from pathlib import Path

import torch

from specviz.core.paths import cache_root

HELDOUT_EVERY = 10  # shard i is held out when i % 10 == 9
HIDDEN_DTYPE = torch.float16  # post-norm hidden states stay well inside fp16's range


class DataError(RuntimeError):
    """Missing or unusable distillation data; the message says what to run."""


@dataclass
class Sequence:
    """One distilled sequence."""

    ids: torch.Tensor  # [L] int64, prompt + continuation
    hidden: torch.Tensor  # [L, H] fp16, final post-norm hidden state at each position
    mask: torch.Tensor  # [L] bool, True on continuation tokens (up to and including EOS)
    layers: torch.Tensor | None = None  # [L, 3H] fp16: the residual stream entering three layers (EAGLE-3)


class LabelledSequence(Sequence):
    """A Sequence plus the target's argmax at each position (label[j] predicts ids[j + 1]): a feature window."""

    def __init__(self, ids: torch.Tensor, hidden: torch.Tensor, mask: torch.Tensor, label: torch.Tensor) -> None:
        super().__init__(ids=ids, hidden=hidden, mask=mask)
        self.label = label


def write_labelled(out_dir: Path, index: int, seqs: list[LabelledSequence]) -> None:
    """One feature shard, written atomically: the pack layout plus `label`."""
    from safetensors.torch import save_file

    tmp = out_dir / f"shard_{index:05d}.partial"
    save_file(pack(seqs) | {"label": torch.cat([s.label for s in seqs])}, str(tmp), metadata={"format": "pt"})
    tmp.rename(out_dir / f"shard_{index:05d}.safetensors")


def read_labelled(path: Path) -> list[LabelledSequence]:
    """The windows stored in one feature shard."""
    from safetensors.torch import load_file

    t = load_file(str(path))
    return [
        LabelledSequence(t["ids"][a:b].long(), t["hidden"][a:b], t["mask"][a:b].bool(), t["label"][a:b])
        for a, b in itertools.pairwise(t["offsets"].tolist())
    ]


def default_dir() -> Path:
    """Where the distillation shards live by default (under the cache root)."""
    return cache_root() / "distill"


def pack(seqs: abc.Sequence[Sequence]) -> dict[str, torch.Tensor]:
    """Flatten sequences into one safetensors dict."""
    lengths = torch.tensor([len(s.ids) for s in seqs], dtype=torch.long)
    extra = {}
    if seqs and all(s.layers is not None for s in seqs):
        extra["layers"] = torch.cat([s.layers for s in seqs]).contiguous()  # type: ignore[misc]
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
    layers = tensors.get("layers")
    return [
        Sequence(
            ids=tensors["ids"][a:b].long(),
            hidden=tensors["hidden"][a:b],
            mask=tensors["mask"][a:b].bool(),
            layers=None if layers is None else layers[a:b],
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
    held = [int(p.stem.split("_")[1]) % HELDOUT_EVERY == HELDOUT_EVERY - 1 for p in paths]
    return [p for p, h in zip(paths, held, strict=True) if h == (split == "heldout")]


def load_dataset(out_dir: Path | None = None, split: str = "train") -> list[Sequence]:
    """Every sequence of a split; raise DataError when there is none."""
    from safetensors.torch import load_file

    paths = shard_paths(out_dir, split)
    if not paths:
        raise DataError(
            f"No {split} shards in {out_dir or default_dir()}; build them first "
            "(python -m specviz train medusa builds them)."
        )
    seqs: list[Sequence] = []
    for p in paths:
        try:
            seqs.extend(unpack(load_file(str(p))))
        except Exception as exc:  # a corrupt shard: name it
            raise DataError(f"Shard {p} is unreadable ({exc}); delete it and rebuild.") from exc
    return seqs


def check_manifest(out_dir: Path, block_batches: int, manifest: dict) -> None:
    """Refuse to mix shards built with different settings (n_prompts may grow by whole blocks); record them."""
    import json

    path = out_dir / "manifest.json"
    if path.is_file():
        old = json.loads(path.read_text())
        diff = [k for k in manifest if k != "n_prompts" and old.get(k) != manifest[k]]
        block = block_batches * manifest["batch_size"]
        if old.get("n_prompts", 0) % block and manifest["n_prompts"] > old.get("n_prompts", 0):
            diff.append(f"n_prompts (grow a build only from a multiple of {block})")
        if diff:
            raise DataError(
                f"{out_dir} was built with other settings ({', '.join(diff)}); use another --data-dir or delete it."
            )
        # asking for fewer prompts reuses the first shards; the record keeps what the folder holds
        manifest = {**manifest, "n_prompts": max(manifest["n_prompts"], old.get("n_prompts", 0))}
    path.write_text(json.dumps(manifest, indent=1))
