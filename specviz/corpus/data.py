"""What a training run reads, as chunks: the self-distilled set (corpus.distill) is one chunk held in memory, a
folder of teacher-forced features (corpus.features, from ShareGPT or the corpus) is one chunk per shard, read
when the run reaches it. Either way a run's position in its data is (pass, chunk, batch)."""

from __future__ import annotations

import functools
import itertools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from specviz.corpus.shards import DataError, Sequence, load_dataset, read_shard, shard_paths

SAMPLE_TOKENS = 2_000_000  # tokens of a streamed folder counted for a head's draft vocabulary


@dataclass(frozen=True)
class Data:
    """Training data as chunks, with what a manifest says about them."""

    chunks: tuple[Callable[[], list[Sequence]], ...]  # each reads one chunk's sequences
    sample: Callable[[], list[Sequence]]  # sequences whose tokens choose a draft vocabulary (all, or a stream's head)
    source: dict = field(default_factory=dict)  # kind, folder, size: for the manifest and the resume check
    folder: Path | None = None

    def read(self, chunk: int) -> list[Sequence]:
        """The sequences of one chunk."""
        return self.chunks[chunk]()

    def key(self) -> dict:
        """What a checkpoint's data must match for a run to resume: kind, folder and, held in memory, the size (a
        feature folder may grow by whole shards while a run trains on the first ones; those stay as they were)."""
        drop = ("manifest", "shards") if self.source.get("kind") == "features" else ("manifest",)
        return {k: v for k, v in self.source.items() if k not in drop}


def in_memory(seqs: list[Sequence], source: dict | None = None, folder: Path | None = None) -> Data:
    """Sequences already loaded, as one chunk."""
    if not seqs:
        raise DataError("No training sequences.")
    source = source or {"kind": "sequences"}
    return Data((lambda: seqs,), lambda: seqs, {**source, "sequences": len(seqs)}, folder)


def open_folder(folder: Path) -> Data:
    """A folder of self-distilled shards (held in memory) or of feature shards (streamed); DataError when empty."""
    paths = shard_paths(folder, "train")
    if not paths:
        raise DataError(
            f"No train shards in {folder}; build them with: python -m specviz corpus distill "
            "(or python -m specviz corpus features --out FOLDER)"
        )
    manifest = _manifest(folder)
    if not _labelled(paths[0]):
        source = {"kind": "self-distilled", "folder": str(folder), "shards": len(paths), "manifest": manifest}
        return in_memory(load_dataset(folder, "train"), source, folder)
    paths = sorted(folder.glob("shard_*.safetensors"))  # a feature folder holds one split, every shard of it
    chunks = tuple(functools.partial(read_shard, p) for p in paths)
    source = {"kind": "features", "folder": str(folder), "shards": len(paths), "manifest": manifest}
    return Data(chunks, lambda: token_sample(paths), source, folder)


def open_folders(folders: list[Path]) -> Data:
    """One folder as open_folder reads it, or several feature folders as one stream: their shards taken in turn (the
    first shard of each, then the second of each, ...), so every part of a pass mixes the sources."""
    if len(folders) == 1:
        return open_folder(folders[0])
    parts = [open_folder(f) for f in folders]
    if any(d.source.get("kind") != "features" for d in parts):
        raise DataError("Several --data folders must all be feature folders (python -m specviz corpus features).")
    turns = itertools.zip_longest(*(d.chunks for d in parts))
    chunks = tuple(c for turn in turns for c in turn if c is not None)
    shards = sum(d.source["shards"] for d in parts)
    source = {"kind": "features", "folder": " + ".join(str(f) for f in folders), "shards": shards}
    source["manifest"] = {str(f): d.source.get("manifest", {}) for f, d in zip(folders, parts, strict=True)}
    return Data(chunks, parts[0].sample, source, folders[0])


def held_out(folder: Path, n: int) -> list[Sequence]:
    """The first n held-out sequences in a folder: the held-out shards of a self-distilled set, or a feature folder
    made from held-out conversations (features --split heldout), all of whose shards are held out."""
    paths = sorted(folder.glob("shard_*.safetensors"))
    if not paths or not _labelled(paths[0]):
        return load_dataset(folder, "heldout")[:n]
    out: list[Sequence] = []
    for path in paths:
        out += read_shard(path)
        if len(out) >= n:
            break
    return out[:n]


def _manifest(folder: Path) -> dict:
    """The data folder's manifest.json (what made it), or {} without one."""
    path = folder / "manifest.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def _labelled(path: Path) -> bool:
    """Whether a shard is a feature shard (it carries the target's labels), not a self-distilled one."""
    from safetensors import safe_open

    with safe_open(str(path), "pt") as f:
        return "label" in f.keys()  # noqa: SIM118 (safe_open is not a mapping)


def token_sample(paths: list[Path], limit: int = SAMPLE_TOKENS) -> list[Sequence]:
    """The first shards' token ids and masks (no features: they are not read), up to `limit` tokens."""
    from safetensors import safe_open

    out: list[Sequence] = []
    for path in paths:
        with safe_open(str(path), "pt") as f:
            ids, mask, off = f.get_tensor("ids").long(), f.get_tensor("mask").bool(), f.get_tensor("offsets").tolist()
        out += [Sequence(ids[a:b], torch.empty(b - a, 0), mask[a:b]) for a, b in itertools.pairwise(off)]
        if sum(len(s.ids) for s in out) >= limit:
            break
    return out
