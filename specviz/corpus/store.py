"""The committed corpus on disk: token-id shards (gzip'd safetensors of numpy arrays) and the manifest that
records their provenance.

A shard holds `ids` uint16 [N] (conversations concatenated), `offsets` int64 [C+1], `role` uint8 [N]
(0 template or user text, 1 a sampled answer token, 2 a greedy answer token), `source` int32 [C] (the
ShareGPT record) and `turns` int16 [C] (turns answered). Everything read is checked: a damaged shard or
manifest raises DataError with one sentence, never a numpy or safetensors exception.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from specviz.core.paths import REPO
from specviz.corpus.shards import DataError

CORPUS_DIR = REPO / "data" / "corpus"
FORMAT = "specviz-corpus-1"
ROLE_CONTEXT, ROLE_SAMPLED, ROLE_GREEDY = 0, 1, 2


def pack_shard(ids: Sequence[list[int]], roles: Sequence[list[int]], source: list[int], turns: list[int]) -> bytes:
    """Conversations (ids, role per token, ShareGPT record, turns answered) as gzip'd safetensors bytes."""
    from safetensors.numpy import save

    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(i) for i in ids])
    arrays = {
        "ids": np.array([t for i in ids for t in i], dtype=np.uint16),
        "offsets": offsets,
        "role": np.array([r for rs in roles for r in rs], dtype=np.uint8),
        "source": np.array(source, dtype=np.int32),
        "turns": np.array(turns, dtype=np.int16),
    }
    return gzip.compress(save(arrays, metadata={"format": FORMAT}), compresslevel=9)


@dataclass(frozen=True)
class Shard:
    """One shard read back: its arrays, checked."""

    ids: np.ndarray
    offsets: np.ndarray
    role: np.ndarray
    source: np.ndarray
    turns: np.ndarray

    def conversations(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """(ids, role) of each conversation."""
        for a, b in zip(self.offsets[:-1], self.offsets[1:], strict=True):
            yield self.ids[a:b], self.role[a:b]


def read_shard(path: Path, vocab: int | None = None) -> Shard:
    """A shard's arrays, validated (shapes, offsets, ids below vocab); DataError when it is not one."""
    from safetensors.numpy import load

    try:
        arrays = load(gzip.decompress(Path(path).read_bytes()))
    except (OSError, EOFError, ValueError, gzip.BadGzipFile, Exception) as exc:  # safetensors raises its own type
        raise DataError(f"{path} is not a corpus shard ({type(exc).__name__}); delete it and regenerate.") from exc
    need = {"ids": np.uint16, "offsets": np.int64, "role": np.uint8, "source": np.int32, "turns": np.int16}
    for name, dt in need.items():
        if name not in arrays or arrays[name].dtype != dt or arrays[name].ndim != 1:
            raise DataError(f"{path}: array {name!r} is missing or not 1-D {np.dtype(dt).name}.")
    s = Shard(**{n: arrays[n] for n in need})
    n = len(s.ids)
    if len(s.role) != n or len(s.offsets) != len(s.source) + 1 or len(s.turns) != len(s.source):
        raise DataError(f"{path}: array lengths disagree.")
    if len(s.offsets) and (s.offsets[0] != 0 or s.offsets[-1] != n or np.any(np.diff(s.offsets) < 0)):
        raise DataError(f"{path}: offsets do not cover the ids.")
    if vocab is not None and n and int(s.ids.max()) >= vocab:
        raise DataError(f"{path}: a token id is not below the vocabulary size {vocab}.")
    if n and int(s.role.max()) > ROLE_GREEDY:
        raise DataError(f"{path}: an unknown role value.")
    return s


# --- the folder --------------------------------------------------------------------------------------


def shard_path(folder: Path, k: int) -> Path:
    return folder / f"shard_{k:05d}.safetensors.gz"


def read_manifest(folder: Path) -> dict:
    """The folder's manifest ({} when it has none); DataError when it cannot be read."""
    path = folder / "manifest.json"
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise DataError(f"{path} cannot be read ({exc}); restore it from git.") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT or not isinstance(data.get("shards"), list):
        raise DataError(f"{path} is not a {FORMAT} manifest.")
    return data


def write_manifest(folder: Path, data: dict) -> None:
    shards = sorted(data["shards"], key=lambda s: s["shard"])
    data["shards"] = shards
    data["totals"] = {
        "shards": len(shards),
        "conversations": sum(s["conversations"] for s in shards),
        "answers": sum(s["answers"] for s in shards),
        "answer_tokens": sum(s["answer_tokens"] for s in shards),
        "tokens": sum(s["tokens"] for s in shards),
    }
    tmp = folder / "manifest.json.partial"
    tmp.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    tmp.rename(folder / "manifest.json")


def shard_files(folder: Path = CORPUS_DIR) -> list[Path]:
    """The folder's shards in order."""
    return sorted(Path(folder).glob("shard_*.safetensors.gz"))


def shard_prefix(folder: Path = CORPUS_DIR) -> list[Path]:
    """Shards 0, 1, 2, … up to the first one missing: what a resumable reader takes. The generator writes shards a
    little out of order, and a reader that counted shard k+1 before shard k landed would misplace its resume point."""
    out = []
    for k, path in enumerate(shard_files(folder)):
        if path != shard_path(Path(folder), k):
            break
        out.append(path)
    return out
