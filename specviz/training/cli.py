"""`python -m specviz train KIND [--data DIR] [--minutes M] [--out DIR] [--resume] …`: any head through the one loop.

Every kind takes the same options: the data (a folder of self-distilled or of feature shards), the held-out set
its learning curve is measured on, where the head and the checkpoint go, and the loop's settings (TrainConfig,
with the kind's own defaults); then its trainer's own settings. Each option's help is its field's comment.
`train heldout --KIND DIR …` measures saved heads' held-out top-1 on the shared held-out set.
"""

from __future__ import annotations

import argparse
import inspect
import json
import re
import shlex
from dataclasses import MISSING, fields, replace
from pathlib import Path

import torch
from tqdm import tqdm

from specviz.core.cli_args import Parser, fail, guard
from specviz.core.kernels import can_pack
from specviz.core.model import LoadedModel, load_model
from specviz.core.paths import cache_root
from specviz.corpus.data import held_out, open_folders
from specviz.corpus.features import corpus_features
from specviz.corpus.heldout import heldout_set
from specviz.corpus.shards import Sequence
from specviz.training.kinds import TRAINERS
from specviz.training.loop import finish, fit
from specviz.training.trainer import TrainConfig, Trainer, rank_accuracy

HEADS = tuple(TRAINERS)
CORPUS = "corpus"  # --data corpus: the committed corpus through its teacher-forced features
DEFAULTS_SHOWN = argparse.ArgumentDefaultsHelpFormatter
OBJECTIVE = ("feature_weight", "ce_weight", "noise", "unroll", "unroll_weight", "unroll_geometric", "align_top")


def train(kind: str, argv: list[str], lm: LoadedModel | None = None) -> int:
    """`train KIND …`; returns an exit code. `lm` replaces the built-in model (tests pass a tiny one)."""
    if kind == "heldout":
        return guard(measure_heldout, argv)
    if kind not in TRAINERS:
        return fail(f"Unknown head {kind!r}; choose from {', '.join(HEADS)}, or heldout.")
    return guard(lambda args: run(TRAINERS[kind], args, lm), argv)


def helps(cls: type) -> dict[str, str]:
    """Each dataclass field's trailing comment in its class's source (and its bases'): the option's help."""
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__[:-1]):
        for m in re.finditer(r"^\s+(\w+): [^=\n]+=[^#\n]*#\s*(.+)$", inspect.getsource(klass), re.M):
            out[m[1]] = m[2]
    return out


def add_options(ap: argparse.ArgumentParser, cls: type, defaults: object) -> None:
    """An option for every int, float, str or bool field of a dataclass, defaulting to `defaults`' value."""
    notes = helps(cls)
    for f in fields(cls):  # type: ignore[arg-type]
        value = getattr(defaults, f.name)
        if f.default is MISSING or not isinstance(value, int | float | str):
            continue
        flag, note = "--" + f.name.replace("_", "-"), notes.get(f.name)
        if isinstance(value, bool):
            ap.add_argument(flag, action=argparse.BooleanOptionalAction, default=value, help=note)
        else:
            ap.add_argument(flag, type=type(value), default=value, help=note)


def parser(cls: type[Trainer]) -> Parser:
    """`train KIND`'s options: where things are, then the loop's settings, then the trainer's."""
    doc = (cls.__doc__ or "").strip()
    ap = Parser(prog=f"python -m specviz train {cls.kind}", description=doc, formatter_class=DEFAULTS_SHOWN)
    data = Path(CORPUS) if getattr(cls, "reads_ids", False) else cache_root() / getattr(cls, "data_dir", "distill")
    ap.add_argument(
        "--data",
        type=Path,
        nargs="+",
        default=[data],
        help="self-distilled or feature shards (several feature folders: their shards taken in turn), or "
        f"'{CORPUS}': the committed corpus (data/corpus), its teacher-forced features made or extended first",
    )
    ap.add_argument("--heldout", default="shared", help="'shared' (corpus.heldout) or a folder's held-out shards")
    ap.add_argument("--heldout-sequences", type=int, default=64, help="held-out sequences measured")
    ap.add_argument("--out", type=Path, default=cls.models, help="the head folder")  # type: ignore[attr-defined]
    ap.add_argument("--checkpoint", type=Path, default=cache_root() / f"{cls.kind}-train", help="checkpoint folder")
    ap.add_argument("--resume", action="store_true", help="continue the run checkpointed there")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (1 is faster on a busy machine)")
    ap.add_argument("--variant", default="", help="what sets this run apart on What data buys (<= 60 characters; "
                    "default: its objective settings that differ from the kind's)")  # fmt: skip
    add_options(ap, TrainConfig, cls.recipe)
    add_options(ap, cls, cls())
    return ap


def teacher(lm: LoadedModel, given: bool) -> LoadedModel:
    """The model that makes the corpus's training features: the target in bf16 where the CPU has bf16 units (2.2×
    fp32's rate on a 2-core EPYC, 776 against 351 tokens/s, and the same argmax label at 98.2% of 32,195 answer
    positions; hidden states at cosine 0.9999), else the fp32 target itself, as for a model passed in (tests).
    The held-out set stays fp32."""
    if given or not can_pack(torch.device("cpu"), torch.bfloat16):
        return lm
    return load_model("default", device="cpu", dtype="bf16", kernels="aten")


def held_set(lm: LoadedModel, where: str, n: int) -> list[Sequence]:
    """The held-out sequences: the shared set (fp32 greedy answers to unseen ShareGPT openings) or a folder's."""
    if n < 1:
        raise ValueError(f"--heldout-sequences must be at least 1, got {n}.")
    return heldout_set(lm, n) if where == "shared" else held_out(Path(where), n)


def run(cls: type[Trainer], argv: list[str], lm: LoadedModel | None = None) -> int:
    """Parse and check everything, open the data, then train, save the head with its manifest, and report."""
    a = parser(cls).parse_args(argv)
    if a.threads < 1:
        raise ValueError(f"--threads must be at least 1, got {a.threads}.")
    if len(a.variant) > 60 or not a.variant.isprintable():
        raise ValueError(f"--variant must be one printable line of at most 60 characters, got {a.variant[:70]!r}.")
    cfg = replace(cls.recipe, **{f.name: getattr(a, f.name) for f in fields(TrainConfig) if hasattr(a, f.name)})
    trainer = cls(**{f.name: getattr(a, f.name) for f in fields(cls) if hasattr(a, f.name)})  # type: ignore[arg-type]
    from_corpus = [str(f) == CORPUS and not f.is_dir() for f in a.data]
    if any(from_corpus) and getattr(cls, "data_dir", "") == "distill-layers":
        raise ValueError(f"{cls.kind} reads three layers' inputs, which corpus features do not hold; see its --help.")
    if getattr(cls, "reads_ids", False):  # the trainer makes its own features: the corpus's ids are its data
        if a.data != [Path(CORPUS)]:
            raise ValueError(f"{cls.kind} reads the committed corpus's token ids: --data {CORPUS} (its default).")
        data = trainer.own_data()  # type: ignore[attr-defined]  # an ids-reading trainer opens its own
    else:
        data = None if any(from_corpus) else open_folders(a.data)  # a bad folder fails before the model loads
        if data is None and not all(from_corpus):  # beside the corpus: feature folders, opened lazily, checked first
            open_folders([f for f, c in zip(a.data, from_corpus, strict=True) if not c])
    torch.set_num_threads(a.threads)
    # plain kernels: a trainer reads the target's own weights (the draft copies its layers), which packing drops
    given = lm is not None
    lm = lm or load_model("default", device="cpu", dtype="fp32", kernels="aten")
    if data is None:
        made = corpus_features(teacher(lm, given), lambda done, _t, r: print(f"corpus features: {done} positions"))
        data = open_folders([made if c else f for f, c in zip(a.data, from_corpus, strict=True)])
    held = held_set(lm, a.heldout, a.heldout_sequences)
    bar = tqdm(desc=f"train {cls.kind}", unit="step")

    def tick(state: dict, logs: dict[str, float]) -> None:
        bar.total, bar.n = state["planned"], state["step"]
        bar.set_postfix({k: f"{v:.3f}" for k, v in logs.items() if k == "loss" or k.startswith("acc")}, refresh=True)

    result = fit(lm, trainer, data, cfg, a.checkpoint, held, a.resume, tick)
    bar.close()
    command = "python -m specviz train " + shlex.join([cls.kind, *argv])
    extra = {"heldout": f"{a.heldout} ({len(held)} sequences)", "threads": a.threads, "command": command}
    extra |= {"variant": note} if (note := a.variant or variant(cls, trainer, cfg)) else {}
    manifest = finish(lm, trainer, result, held, a.out, extra)
    keys = ("stopped", "steps", "positions", "train_seconds", "heldout_top1_by_depth")
    print(json.dumps({k: manifest[k] for k in keys} | {"saved": str(a.out)}, indent=1))
    return 0


def variant(cls: type[Trainer], trainer: Trainer, cfg: TrainConfig) -> str:
    """The objective settings of a run that differ from its kind's defaults, e.g. 'feature_weight 0, align_top 3,
    keep best' ('' when none): what tells its curve apart from the others of its kind and data."""
    base = cls()
    notes = []
    for k in OBJECTIVE:
        value = getattr(trainer, k, None)
        if value is not None and value != getattr(base, k):
            notes.append(("" if value else "no ") + k if isinstance(value, bool) else f"{k} {value:g}")
    notes += ["keep best"] if cfg.keep_best else []
    notes += [f"seed {cfg.seed}"] if cfg.seed != cls.recipe.seed else []
    return ", ".join(notes)


def measure_heldout(argv: list[str]) -> int:
    """`train heldout --eagle DIR … --medusa DIR …`: held-out top-1 of saved heads, by depth (EAGLE's, drafting from
    its own outputs) or by head, on the shared held-out set."""
    ap = Parser(prog="python -m specviz train heldout", description=measure_heldout.__doc__)
    for kind in TRAINERS:
        ap.add_argument(f"--{kind}", type=Path, nargs="*", default=[], help=f"{kind} head folders")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    lm = load_model("default", device="cpu", dtype="fp32", progress=lambda _m: None)
    seqs = heldout_set(lm, a.prompts)
    out: dict[str, int | list[float]] = {
        "heldout_sequences": len(seqs),
        "positions": sum(int(s.mask.sum()) for s in seqs),
    }
    for kind, trainer in ((k, cls()) for k, cls in TRAINERS.items()):
        for folder in getattr(a, kind):
            acc, _n = rank_accuracy(trainer.ranks(lm, trainer.load(lm, folder), seqs), 1)
            out[f"{kind}:{folder}"] = [round(row[0], 4) for row in acc]
    print(json.dumps(out, indent=1))
    return 0
