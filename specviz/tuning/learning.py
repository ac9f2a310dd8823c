"""What data buys: the learning curves stored beside every trained draft and head, and the recorded data
experiments, as plain records for the figures and the page.

A curve is the one training loop's record (training.loop): held-out top-1 by depth or head (the shared held-out
set of unseen ShareGPT openings decoded by the fp32 target) against the training positions seen, with where the
data came from: the corpus (the target's own answers), ShareGPT's own responses (the fixed dataset), or the
target's self-distilled greedy text. A recorded experiment row is one such measurement at one point, from a run
whose curve was not kept (docs/experiments/*.json).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specviz import methods
from specviz.core.measure import Provenance
from specviz.core.paths import MODELS, REPO
from specviz.core.schema import SchemaError, read_json
from specviz.heads.files import MAX_CONFIG_BYTES

EXPERIMENTS_DIR = REPO / "docs" / "experiments"
KIND_NAMES = {c.head: c.head_label for c in methods.cards() if c.head}  # training kind -> its name, from the cards
DATA_NAMES = {
    "corpus": "the target's own answers (corpus)",
    "corpus-greedy": "the target's own greedy answers (corpus)",
    "corpus-sampled": "the target's own sampled answers (corpus)",
    "corpus-opening": "the openings of the target's own answers (corpus)",
    "sharegpt": "ShareGPT's own responses",
    "self-distilled": "the target's greedy continuations",
}


@dataclass(frozen=True)
class Curve:
    """One trained head's learning curve: (positions seen, held-out top-1 by depth or head) from the start."""

    kind: str  # a training kind: a method card's head (eagle, medusa, draft, …)
    data: tuple[str, ...]  # where its positions came from, keys of DATA_NAMES, in the order they were read
    points: tuple[tuple[int, tuple[float, ...]], ...]
    folder: str  # relative to the repository
    where: Provenance | None
    command: str
    start: str = ""  # the trained head it started from ('' for a fresh one)
    variant: str = ""  # what sets this run apart from another of the same kind, data and start (a kept run's note)

    @property
    def label(self) -> str:
        name = f"{KIND_NAMES.get(self.kind, self.kind)} · {' + '.join(self.data)}"
        name = f"{name}, from {self.start}" if self.start else name
        return f"{name} ({self.variant})" if self.variant else name

    def top1(self, depth: int) -> list[tuple[int, float]]:
        """(positions, top-1 at depth `depth`, 1-based) for every point that measured that depth."""
        return [(n, acc[depth - 1]) for n, acc in self.points if len(acc) >= depth]


@dataclass(frozen=True)
class Row:
    """One recorded measurement: a head trained on `positions` positions of `data`, from a fresh head or not."""

    kind: str
    data: str
    fresh: bool
    positions: int
    top1: tuple[float, ...]
    label: str
    source: str  # the experiment file, relative to the repository
    where: Provenance | None


def data_sources(data: dict[str, Any]) -> tuple[str, ...]:
    """Where a manifest's training data came from: a feature folder's split names the corpus ('train-corpus', or
    'train-corpus-greedy' / '-sampled' / '-opening' for a part of its answers) or ShareGPT ('train');
    self-distilled shards are the target's greedy text."""
    if data.get("kind") != "features":
        return ("self-distilled",)
    folders = data.get("manifest") or {}
    if "split" in folders:  # one folder: its own manifest; several: folder -> manifest
        folders = {"": folders}
    splits = [m.get("split", "") for m in folders.values() if isinstance(m, dict)]
    return tuple(dict.fromkeys(_source(s) for s in splits)) or ("sharegpt",)


def _source(split: str) -> str:
    """'train-corpus' -> corpus, 'train-corpus-greedy' -> corpus-greedy, anything else ShareGPT's."""
    parts = split.split("-")
    if "corpus" not in parts:
        return "sharegpt"
    return "corpus" if parts[-1] == "corpus" else f"corpus-{parts[-1]}"


def _provenance(data: Any) -> Provenance | None:
    try:
        return Provenance.from_dict(data)
    except ValueError:
        return None


def _read(path: Path) -> dict[str, Any] | None:
    """A manifest or experiment record through the project's bounded JSON reader; None when it cannot be used."""
    try:
        data = read_json(path, MAX_CONFIG_BYTES, "a learning-curve record")
    except SchemaError:
        return None
    return data if isinstance(data, dict) else None


def _points(stages: list[dict[str, Any]]) -> tuple[tuple[int, tuple[float, ...]], ...]:
    """The stages' curves as one: the first stage's untrained start, then every measured point, its positions
    counted from the first stage's start (a later stage begins where the one before it stopped)."""
    first = stages[0].get("curve_start")
    points, offset = [(0, tuple(float(x) for x in first["top1"]))] if first else [], 0
    for stage in stages:
        points += [(offset + int(p["positions"]), tuple(float(x) for x in p["top1"])) for p in stage.get("curve") or []]
        offset += int(stage.get("positions") or 0)
    return tuple(points)


def curve_of(manifest: dict[str, Any], folder: str) -> Curve | None:
    """The learning curve in a head folder's manifest (with its untrained starting point when recorded); a head
    continued from another keeps the earlier stages' curves ('earlier'), and its curve is all of them in turn."""
    stages = [s for s in [*(manifest.get("earlier") or []), manifest] if isinstance(s, dict)]
    try:
        points = _points(stages)
    except (KeyError, TypeError, ValueError):
        return None
    if len(points) < 2:
        return None
    trainer = manifest.get("trainer") or {}
    kind = str(trainer.get("kind", "")) or Path(folder).name
    data = tuple(dict.fromkeys(d for s in stages for d in data_sources(s.get("data") or {})))
    return Curve(
        kind=kind,
        data=data,
        points=points,
        folder=folder,
        where=_provenance(manifest.get("provenance")),
        command=" ; ".join(str(s.get("command", "")) for s in stages),
        start=str((stages[0].get("trainer") or {}).get("init") or ""),
        variant=str(manifest.get("variant") or "")[:60],
    )


def curves(root: Path = MODELS, experiments: Path = EXPERIMENTS_DIR) -> list[Curve]:
    """Every learning curve stored under models/ (a head folder's manifest.json, one level or two down), then
    those kept in recorded experiments (a run whose head was not kept: docs/experiments/*.json 'curves')."""
    found = []
    for path in sorted([*root.glob("*/manifest.json"), *root.glob("*/*/manifest.json")]):
        manifest = _read(path)
        got = curve_of(manifest, str(path.parent.relative_to(root.parent))) if manifest else None
        if got is not None:
            found.append(got)
    for path in sorted(experiments.glob("*.json")):
        kept = (_read(path) or {}).get("curves")
        for manifest in kept if isinstance(kept, list) else []:
            got = (
                curve_of(manifest, str(path.relative_to(experiments.parent.parent)))
                if isinstance(manifest, dict)
                else None
            )
            if got is not None:
                found.append(got)
    return found


def experiment_rows(folder: Path = EXPERIMENTS_DIR) -> list[Row]:
    """Every recorded data experiment's rows (docs/experiments/*.json with 'rows'); unreadable files are skipped."""
    rows = []
    for path in sorted(folder.glob("*.json")):
        data = _read(path)
        if not data or not isinstance(data.get("rows"), list):
            continue
        where = _provenance(data.get("provenance"))
        for r in data["rows"]:
            try:
                rows.append(
                    Row(
                        kind=str(r["head"]),
                        data=str(r["data"]),
                        fresh=r.get("start") == "fresh",
                        positions=int(r["positions"]),
                        top1=tuple(float(x) for x in r["top1"]),
                        label=str(r.get("label", "")),
                        source=str(path.relative_to(folder.parent.parent)),
                        where=where,
                    )
                )
            except (KeyError, TypeError, ValueError):
                continue
    return rows


@dataclass(frozen=True)
class CorpusSummary:
    """The committed corpus in numbers: its totals and how fast its shards were made, where."""

    shards: int
    conversations: int
    answer_tokens: int
    rates: tuple[float, ...]  # answer tokens per second, shard by shard
    dtypes: tuple[str, ...]
    last: Provenance | None  # where the newest shard was made


def corpus_summary(folder: Path | None = None) -> CorpusSummary | None:
    """The corpus manifest's totals and rates (None when the folder holds no readable manifest)."""
    from specviz.corpus.store import CORPUS_DIR, DataError, read_manifest

    try:
        manifest = read_manifest(folder or CORPUS_DIR)
    except DataError:
        return None
    shards = sorted(manifest.get("shards") or [], key=lambda s: str((s.get("provenance") or {}).get("date", "")))
    totals = manifest.get("totals") or {}
    if not shards:
        return None
    return CorpusSummary(
        shards=len(shards),
        conversations=int(totals.get("conversations", 0)),
        answer_tokens=int(totals.get("answer_tokens", 0)),
        rates=tuple(float(s.get("answer_tokens_per_s", 0)) for s in shards),
        dtypes=tuple(dict.fromkeys(str(s.get("dtype", "bfloat16")) for s in shards)),
        last=_provenance(shards[-1].get("provenance")),
    )


@dataclass(frozen=True)
class Checkpoint:
    """A shipped EAGLE-2 head with what it was trained on: one bar of 'A on this prompt, head by head'."""

    folder: str  # relative to the repository
    data: str
    positions: int
    label: str


def eagle_checkpoints(found: list[Curve], rows: list[Row], root: Path = MODELS) -> list[Checkpoint]:
    """Every EAGLE-2 head under models/ whose data is known, fewest positions first: those with a learning curve
    (`found`, as curves() read them), and the committed head as its recorded run (`rows`) describes it
    (self-distilled, trained from scratch)."""
    out = [
        Checkpoint(c.folder, c.data[0], c.points[-1][0], c.label)
        for c in found
        if c.kind == "eagle" and not c.start and (root.parent / c.folder / "model.safetensors").is_file()
    ]
    committed = root / "eagle"
    for r in rows:
        if r.kind == "eagle" and r.fresh and r.data == "self-distilled" and (committed / "model.safetensors").is_file():
            out.append(
                Checkpoint(str(committed.relative_to(root.parent)), r.data, r.positions, "committed EAGLE-2 head")
            )
            break
    return sorted(out, key=lambda c: c.positions)
