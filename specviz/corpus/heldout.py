"""One held-out set for every head: fp32 greedy continuations of ShareGPT conversations no head trained on.

The opening user turns of the held-out conversations (index % HELDOUT_EVERY == HELDOUT_EVERY - 1, the
ones `features` never reads) are decoded greedily by the fp32 target, with its post-norm hidden state
at every position: exactly what a head sees at decode time. Rank accuracies of every head kind on this set
are comparable across training recipes (self-distilled or fixed-dataset, bf16 or fp32 features); the learning
curves of `python -m specviz train` are measured on it. Spec-Bench turns are excluded as everywhere.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from specviz.core.model import LoadedModel, load_model
from specviz.core.paths import cache_root
from specviz.training import distill
from specviz.training.features import HELDOUT_EVERY
from specviz.training.kinds import TRAINERS
from specviz.training.shards import Sequence, pack, unpack
from specviz.training.trainer import rank_accuracy


def heldout_prompts(n: int) -> list[str]:
    """The first n usable opening turns of held-out conversations, in file order."""
    banned = distill.spec_bench_turns()
    out: list[str] = []
    for i, record in enumerate(distill.sharegpt_conversations()):
        if i % HELDOUT_EVERY != HELDOUT_EVERY - 1:
            continue
        text = distill.first_human_turn(record)
        if text is None or len(text) > 3 * distill.MAX_PROMPT_TOKENS or " ".join(text.split()) in banned:
            continue
        if sum(c.isascii() for c in text) < 0.95 * len(text):
            continue
        out.append(text)
        if len(out) == n:
            break
    return out


def heldout_set(lm: LoadedModel, n: int = 64, max_new_tokens: int = 128, batch: int = 16) -> list[Sequence]:
    """The held-out sequences (cached under the cache root once built)."""
    from safetensors.torch import load_file, save_file

    path = cache_root() / "heldout" / f"distilled-{n}-{max_new_tokens}.safetensors"
    if path.is_file():
        return unpack(load_file(str(path)))
    prompts = heldout_prompts(n)
    seqs: list[Sequence] = []
    for at in range(0, len(prompts), batch):
        seqs.extend(distill.distill_batch(lm, prompts[at : at + batch], max_new_tokens))
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(pack(seqs), str(path.with_suffix(".partial")), metadata={"format": "pt"})
    path.with_suffix(".partial").rename(path)
    return seqs


def top1(lm: LoadedModel, kind: str, folder: Path, seqs: list[Sequence]) -> list[float]:
    """Held-out top-1 by depth (EAGLE's, drafting from its own outputs) or by head of the `kind` head in folder."""
    trainer = TRAINERS[kind]()
    acc, _n = rank_accuracy(trainer.ranks(lm, trainer.load(lm, folder), seqs), 1)
    return [row[0] for row in acc]


def main(argv: list[str] | None = None) -> int:
    """python -m specviz.training.heldout --eagle DIR … --medusa DIR …: held-out top-1 by depth / head."""
    ap = argparse.ArgumentParser(prog="python -m specviz.training.heldout", description=main.__doc__)
    for kind in TRAINERS:
        ap.add_argument(f"--{kind}", type=Path, nargs="*", default=[], help=f"{kind} head folders")
    ap.add_argument("--prompts", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    lm = load_model("default", device="cpu", dtype="fp32", progress=lambda _m: None)
    seqs = heldout_set(lm, args.prompts)
    out: dict[str, int | list[float]] = {
        "heldout_sequences": len(seqs),
        "positions": int(sum(int(s.mask.sum()) for s in seqs)),
    }
    for kind in TRAINERS:
        for f in getattr(args, kind):
            out[f"{kind}:{f}"] = [round(a, 4) for a in top1(lm, kind, f, seqs)]
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
