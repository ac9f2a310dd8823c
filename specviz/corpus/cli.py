"""`python -m specviz corpus answer|distill|features …`: the commands that make training data, resumable.

- `answer --shards 0-9`: the target's own answers to ShareGPT's human turns, as token shards (data/corpus);
- `distill --prompts N`: the self-distilled set, greedy continuations with hidden states (EAGLE-3's with --layers);
- `features --source corpus|sharegpt`: teacher-forced features of the corpus or of ShareGPT's own answers.

Every option is checked before any work: a bad one is one line on stderr and exit code 2.
"""

from __future__ import annotations

import argparse
import datetime
import json
import time
from pathlib import Path

import torch

from specviz.core.cli_args import Parser, count, guard
from specviz.core.kernels import can_pack
from specviz.core.model import load_model
from specviz.corpus import answers, distill, features
from specviz.corpus.answering import BATCH
from specviz.corpus.store import CORPUS_DIR


def parser() -> Parser:
    """The three commands and their options."""
    ap = Parser(prog="python -m specviz corpus", description=(__doc__ or "").split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    a = sub.add_parser("answer", help="the target's answers to ShareGPT's turns, token shards in data/corpus")
    a.add_argument("--shards", default="0-139", help="shard numbers, e.g. 0-9 or 3,5 (made ones are skipped)")
    a.add_argument("--dir", type=Path, default=CORPUS_DIR)
    a.add_argument("--batch", type=count(1, 1024), default=BATCH)
    a.add_argument("--threads", type=count(1, 1024), default=2)
    a.add_argument("--dtype", choices=[*answers.DTYPES, "auto"], default="auto", help="auto: bf16 where the CPU has it")
    a.add_argument("--log", type=Path, default=None, help="append progress lines here too")
    d = sub.add_parser("distill", help="the self-distilled set: greedy continuations with hidden states")
    d.add_argument("--prompts", type=count(1), default=1280)
    d.add_argument("--max-new-tokens", type=count(1), default=128)
    d.add_argument("--batch-size", type=count(1, 1024), default=32)
    d.add_argument("--out", type=Path, default=None, help="the folder (default: the cache's distill/)")
    d.add_argument("--layers", action="store_true", help="also keep three layers' inputs (for EAGLE-3 heads)")
    f = sub.add_parser("features", help="teacher-forced features of the corpus or of ShareGPT's own answers")
    f.add_argument("--out", type=Path, default=None)
    f.add_argument("--split", choices=["train", "heldout"], default="train")
    f.add_argument("--source", choices=["sharegpt", "corpus"], default="sharegpt", help="corpus: the target's own")
    f.add_argument("--answers", choices=list(features.ANSWERS), default="all", help="of the corpus: which to keep")
    f.add_argument("--positions", type=count(1), default=3_000_000, help="assistant positions to make")
    f.add_argument("--max-len", type=count(2, 1 << 16), default=512)
    f.add_argument("--dtype", choices=["bf16", "fp32", "auto"], default="auto", help="auto: bf16 where the CPU has it")
    f.add_argument("--threads", type=count(1, 1024), default=2)
    return ap


def main(argv: list[str]) -> int:
    """Run one corpus command; returns an exit code."""
    return guard(run, argv)


def run(argv: list[str]) -> int:
    a = parser().parse_args(argv)
    return {"answer": answer, "distill": distill_set, "features": feature_folder}[a.command](a)


def answer(a: argparse.Namespace) -> int:
    """`corpus answer`: make the missing shards of --shards."""
    shards = answers.parse_shards(a.shards)  # a bad range fails before the model loads

    def log(line: str) -> None:
        stamp = datetime.datetime.now().strftime("%H:%M:%S")
        print(f"{stamp} {line}", flush=True)
        if a.log is not None:
            with a.log.open("a", encoding="utf-8") as out:
                out.write(f"{stamp} {line}\n")

    answers.generate(a.dir, shards, a.batch, a.threads, log, answers.decode_dtype(a.dtype))
    return 0


def distill_set(a: argparse.Namespace) -> int:
    """`corpus distill`: build (or extend) the self-distilled set."""
    from tqdm import tqdm

    lm = load_model("default", device="cpu", dtype="fp32")
    bar = tqdm(total=(a.prompts + a.batch_size - 1) // a.batch_size, unit="shard")

    def tick(done: int, _total: int, name: str) -> None:
        bar.n = done
        bar.set_postfix_str(name)
        bar.refresh()

    distill.build_dataset(lm, a.prompts, a.max_new_tokens, a.batch_size, a.out, tick, with_layers=a.layers)
    bar.close()
    return 0


def feature_folder(a: argparse.Namespace) -> int:
    """`corpus features`: teacher-forced features into a folder (resumable); prints the progress record."""
    if a.source == "corpus" and a.split != "train":
        raise ValueError("the corpus holds training conversations only; the held-out set is ShareGPT's")
    if a.answers != "all" and a.source != "corpus":
        raise ValueError("--answers chooses among the corpus's answers; use it with --source corpus")
    torch.set_num_threads(a.threads)
    dtype = a.dtype if a.dtype != "auto" else "bf16" if can_pack(torch.device("cpu"), torch.bfloat16) else "fp32"
    lm = load_model("default", device="cpu", dtype=dtype, kernels="aten")
    kept = features.answers_suffix(a.answers)
    out = a.out or features.default_dir() / f"{a.split}-{dtype}{'-corpus' * (a.source == 'corpus')}{kept}"
    last = [time.perf_counter()]

    def tick(done: int, total: int, rec: dict) -> None:
        if time.perf_counter() - last[0] > 20:
            last[0] = time.perf_counter()
            print(f"{done}/{total} positions, {rec['tokens_per_s']} tokens/s, {rec['seconds']} s", flush=True)

    cfg = features.FeatureConfig(a.split, a.source, a.answers, max_positions=a.positions, max_len=a.max_len)
    print(json.dumps(features.build(lm, out, cfg, tick), indent=1))
    return 0
