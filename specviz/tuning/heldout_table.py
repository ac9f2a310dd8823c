"""`calibrate KIND` for a heads tree (Medusa, Hydra): a saved head's held-out rank accuracies a_k^(i), written
beside it as calibration.json (the table its tree is chosen from)."""

from __future__ import annotations

from pathlib import Path

from specviz.core.cli_args import Parser
from specviz.core.measure import provenance
from specviz.core.model import load_model
from specviz.corpus.shards import load_dataset
from specviz.heads import store
from specviz.training.kinds import TRAINERS
from specviz.training.trainer import rank_accuracy

HEADS = tuple(TRAINERS)  # the head kinds `train` and `calibrate` name


def calibrate_heads(kind: str, argv: list[str]) -> int:
    """`calibrate KIND` for a heads tree: measure a saved head's a_k^(i) on held-out shards into calibration.json."""
    ap = Parser(prog=f"python -m specviz calibrate {kind}")
    ap.add_argument("--data", type=Path, default=None, help="self-distilled shards (default: the cache's)")
    ap.add_argument("--heads-dir", type=Path, default=None, help="heads to calibrate (default: models/KIND)")
    ap.add_argument("--ranks", type=int, default=10, help="ranks per head in the calibration table")
    a = ap.parse_args(argv)
    if not 1 <= a.ranks <= 64:
        raise ValueError(f"--ranks must be between 1 and 64, got {a.ranks}.")
    trainer = TRAINERS[kind]()
    lm = load_model("default", device="cpu", dtype="fp32")
    folder = a.heads_dir or trainer.models  # type: ignore[attr-defined]
    head = trainer.load(lm, folder)
    acc, n = rank_accuracy(trainer.ranks(lm, head, load_dataset(a.data, "heldout")), a.ranks)
    note = f"held-out self-distilled continuations in {a.data or 'the cache'}"
    path = store.write_calibration(folder, acc, n, note, provenance(lm.describe()).to_dict())
    print(f"wrote {path} from {n} held-out positions")
    for k, row in enumerate(acc, start=1):
        print(f"head {k}: " + "  ".join(f"r{i + 1} {v:.3f}" for i, v in enumerate(row[:5])))
    return 0
