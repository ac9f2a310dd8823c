"""One held-out set for every head: fp32 greedy continuations of ShareGPT conversations no head trained on.

The opening user turns of the held-out conversations (sharegpt.held_out: the ones no training set reads, less
those the committed heads' self-distilled sets held before 2026-12-04: sharegpt.heldout_prompts) are decoded
greedily by the fp32 target, with its post-norm hidden state at every position: exactly what a head sees at decode
time. Rank accuracies of every head kind on this set are comparable across training recipes (self-distilled or
fixed-dataset, bf16 or fp32 features); the learning curves of `python -m specviz train` are measured on it.
Spec-Bench turns are excluded as everywhere.
"""

from __future__ import annotations

from specviz.core.model import LoadedModel
from specviz.core.paths import cache_root
from specviz.corpus.distill import distill_batch
from specviz.corpus.shards import Sequence, read_shard, write_shard
from specviz.corpus.sharegpt import heldout_prompts


def heldout_set(lm: LoadedModel, n: int = 64, max_new_tokens: int = 128, batch: int = 16) -> list[Sequence]:
    """The held-out sequences (cached under the cache root once built)."""
    path = cache_root() / "heldout" / f"unseen-{n}-{max_new_tokens}.safetensors"  # "distilled-": the leaky set
    if path.is_file():
        return read_shard(path)
    prompts = heldout_prompts(n)
    seqs: list[Sequence] = []
    for at in range(0, len(prompts), batch):
        seqs.extend(distill_batch(lm, prompts[at : at + batch], max_new_tokens))
    path.parent.mkdir(parents=True, exist_ok=True)
    write_shard(path, seqs)
    return seqs
