"""Self-distillation data: the model's own greedy continuations of ShareGPT prompts, with hidden states.

The hidden states are caught during batched generation itself (a hook on the final norm), which equals
a teacher-forced pass (tested) and saves that second pass on a shared 2-core CPU. Shards (their layout:
specviz.corpus.shards) are written atomically, so a killed build resumes where it stopped. Spec-Bench
prompts are evaluation-only: any ShareGPT prompt equal to a Spec-Bench first turn is dropped.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

from specviz.core.model import LoadedModel, fused_layers  # the layers a fused-feature head reads
from specviz.corpus.shards import HELDOUT_EVERY, HIDDEN_DTYPE, DataError, Sequence, default_dir, shard_file, write_shard
from specviz.corpus.sharegpt import training_prompts

BLOCK = 8  # batches per length-sorted block (see shard_prompts)

Progress = Callable[[int, int, str], None]


def _left_pad(lm: LoadedModel, prompts: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Left-padded ids and attention mask [B, P], and the pad id."""
    pad = 2 if lm.tokenizer.pad_token_id is None else int(lm.tokenizer.pad_token_id)
    width = max(len(p) for p in prompts)
    ids = torch.full((len(prompts), width), pad, dtype=torch.long)
    att = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, width - len(p) :] = torch.tensor(p)
        att[row, width - len(p) :] = 1
    return ids, att, pad


@contextlib.contextmanager
def _caught(lm: LoadedModel, with_layers: bool) -> Iterator[list[list[torch.Tensor]]]:
    """Hooks that keep, per forward call, the final post-norm hidden state [B, t, H] (and with_layers the
    residual stream entering each of fused_layers), removed on exit."""
    caught: list[list[torch.Tensor]] = [[] for _ in range(4 if with_layers else 1)]
    hooks = [lm.hf.model.norm.register_forward_hook(lambda _m, _i, out: caught[0].append(out.to("cpu", HIDDEN_DTYPE)))]
    blocks = lm.hf.model.layers
    for keep, index in zip(caught[1:], fused_layers(len(blocks)), strict=False):
        hook = blocks[index].register_forward_pre_hook(
            lambda _m, a, keep=keep: keep.append(a[0].to("cpu", HIDDEN_DTYPE))
        )
        hooks.append(hook)
    try:
        yield caught
    finally:
        for h in hooks:
            h.remove()


@torch.inference_mode()
def greedy_batch(
    lm: LoadedModel, prompts: list[list[int]], max_new_tokens: int, with_layers: bool = False
) -> list[tuple[list[int], torch.Tensor]]:
    """Greedy continuations of a batch (left padding), each cut after its first EOS, with hidden states.

    A hook on the final norm keeps the post-norm hidden state of every token the model reads while
    generating (the prompt in the prefill, then one token per step), so no second pass is needed.
    Returns per prompt (continuation, hidden [len(prompt) + len(continuation), H]); a continuation
    token whose hidden state was never computed (the very last one generated) is dropped.
    With with_layers, each row also carries the residual stream entering the fused_layers: [.., 4H].
    """
    ids, att, pad = _left_pad(lm, prompts)
    with _caught(lm, with_layers) as caught:
        out = lm.hf.generate(
            input_ids=ids.to(lm.device),
            attention_mask=att.to(lm.device),
            do_sample=False,
            max_new_tokens=max_new_tokens + 1,
            pad_token_id=pad,
            eos_token_id=sorted(lm.eos_ids),
            temperature=None,
            top_p=None,
            top_k=None,
        )
    hidden = torch.cat([torch.cat(c, dim=1) for c in caught], dim=-1)  # [B, P + steps - 1, H or 4H]
    width = ids.shape[1]
    result = []
    for row, p in enumerate(prompts):
        gen = out[row, width:].tolist()
        cut = next((i + 1 for i, t in enumerate(gen) if t in lm.eos_ids), len(gen))
        cont = gen[: min(cut, max_new_tokens, hidden.shape[1] - width)]
        result.append((cont, hidden[row, width - len(p) : width + len(cont)].clone()))
    return result


def distill_batch(
    lm: LoadedModel, prompts: list[str], max_new_tokens: int, with_layers: bool = False
) -> list[Sequence]:
    """Greedy continuations of prompts with the hidden state of every token (and the fused layers'), as Sequences."""
    prompt_ids = [lm.encode_prompt(p) for p in prompts]
    h = int(lm.hf.config.hidden_size)
    out = []
    for p, (cont, hidden) in zip(prompt_ids, greedy_batch(lm, prompt_ids, max_new_tokens, with_layers), strict=True):
        mask = torch.zeros(len(p) + len(cont), dtype=torch.bool)
        mask[len(p) :] = True
        layers = hidden[:, h:].clone() if with_layers else None
        out.append(Sequence(ids=torch.tensor(p + cont), hidden=hidden[:, :h].clone(), mask=mask, layers=layers))
    return out


def shard_prompts(prompts: list[str], batch_size: int) -> list[list[str]]:
    """Batches of prompts: each block of BLOCK batches is sorted by length, so left padding stays small.

    With left padding every row is as long as the batch's longest prompt, and one long prompt would
    make the prefill cost several times the decoding; sorting inside blocks keeps the shard layout
    fixed as n_prompts grows by whole blocks.
    """
    block = BLOCK * batch_size
    out = []
    for b in range(0, len(prompts), block):
        part = sorted(prompts[b : b + block], key=len)
        out.extend(part[i : i + batch_size] for i in range(0, len(part), batch_size))
    return out


def _manifest(
    lm: LoadedModel, n_prompts: int, max_new_tokens: int, batch_size: int, seed: int, with_layers: bool = False
) -> dict:
    """The settings a folder's shards were made with (a build that extends it must match them)."""
    extra = {"fused_layers": list(fused_layers(len(lm.hf.model.layers)))} if with_layers else {}
    return {
        **extra,
        "model": lm.name,
        "layout": f"sorted-blocks-{BLOCK}",
        "max_new_tokens": max_new_tokens,
        "batch_size": batch_size,
        "seed": seed,
        "heldout_every": HELDOUT_EVERY,
        "prompts": "training records",  # since 2026-12-04: no held-out record's opening (sharegpt.training_prompts)
        "hidden_dtype": str(HIDDEN_DTYPE).removeprefix("torch."),
        "hidden_size": int(lm.hf.config.hidden_size),
        "n_prompts": n_prompts,
    }


def check_manifest(out_dir: Path, block_batches: int, manifest: dict) -> None:
    """Refuse to mix shards built with different settings (n_prompts may grow by whole blocks); record them."""
    path = out_dir / "manifest.json"
    if path.is_file():
        old = json.loads(path.read_text())
        diff = [k for k in manifest if k != "n_prompts" and old.get(k) != manifest[k]]
        block = block_batches * manifest["batch_size"]
        if old.get("n_prompts", 0) % block and manifest["n_prompts"] > old.get("n_prompts", 0):
            diff.append(f"n_prompts (grow a build only from a multiple of {block})")
        if diff:
            raise DataError(
                f"{out_dir} was built with other settings ({', '.join(diff)}); use another --out or delete it."
            )
        # asking for fewer prompts reuses the first shards; the record keeps what the folder holds
        manifest = {**manifest, "n_prompts": max(manifest["n_prompts"], old.get("n_prompts", 0))}
    path.write_text(json.dumps(manifest, indent=1))


def build_dataset(
    lm: LoadedModel,
    n_prompts: int,
    max_new_tokens: int = 128,
    batch_size: int = 32,
    out_dir: Path | None = None,
    progress: Progress | None = None,
    seed: int = 0,
    with_layers: bool = False,
) -> Path:
    """Distil n_prompts ShareGPT prompts into safetensors shards under out_dir; resumable.

    with_layers also keeps the residual stream entering fused_layers (what an EAGLE-3 head reads).
    """
    out_dir = Path(out_dir or default_dir())
    out_dir.mkdir(parents=True, exist_ok=True)
    check_manifest(out_dir, BLOCK, _manifest(lm, n_prompts, max_new_tokens, batch_size, seed, with_layers))
    prompts = training_prompts(n_prompts, seed)
    if len(prompts) < n_prompts:
        raise DataError(f"Only {len(prompts)} usable ShareGPT prompts; ask for fewer.")
    batches = shard_prompts(prompts, batch_size)
    n_shards = len(batches)
    for i in range(n_shards):
        path = shard_file(out_dir, i)
        if not path.is_file():
            with lm.lock:
                write_shard(path, distill_batch(lm, batches[i], max_new_tokens, with_layers))
        if progress is not None:
            progress(i + 1, n_shards, path.name)
    return out_dir
