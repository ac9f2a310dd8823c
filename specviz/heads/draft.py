"""The speculative-sampling draft model: a few decoder layers at the target's width, its own KV cache, and a
frequency-ranked reduced LM head (the 8,192 ids EAGLE's head drafts over).

It shares the target's token embeddings (frozen, not stored) and its rotary embedding; its layers and final
norm start as copies of the target's own (`from_target`), its head as the target's LM-head rows of its draft
vocabulary. It is trained (training.draft_train) to match the target's full next-token distribution at T = 1
restricted to that vocabulary, so sampling at any temperature stays well matched. At decode time it runs as
a `core.drafting.LayerDraft` over its own parts (`parts`), exactly as the untrained layer-prefix draft does.
"""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from specviz.core.drafting import DraftParts
from specviz.core.model import LoadedModel
from specviz.core.paths import DRAFT_DIR
from specviz.core.schema import Between, SchemaError
from specviz.heads import store
from specviz.heads.files import MAX_VOCAB, Kind, ids_fit, read_weights

FORMAT = "specviz-draft/1"
WEIGHTS, CONFIG = "model.safetensors", "config.json"


class DraftError(RuntimeError):
    """A draft-model folder that is missing, corrupt, or made for another model; the message says what to do."""


KIND = Kind(FORMAT, "a draft model", DraftError, "retrain with: python -m specviz train draft")
SPECS = {
    "hidden_size": Between("int", 1, 16384),
    "vocab_size": Between("int", 1, MAX_VOCAB),
    "draft_vocab": Between("int", 1, MAX_VOCAB),
    "init_layers": [Between("int", 0, 1023), 16],
}


@dataclass(frozen=True)
class DraftConfig:
    """The draft's shape against its target, where its layers came from, and what training measured."""

    hidden_size: int
    vocab_size: int
    draft_vocab: int
    init_layers: list[int]  # the target layers its layers were initialised from (their count is its depth)
    target: str = ""
    train: dict = field(default_factory=dict)
    format: str = FORMAT


def _check(cfg: DraftConfig) -> None:
    if not cfg.init_layers or cfg.draft_vocab > cfg.vocab_size:
        raise SchemaError("a draft needs at least one layer and a draft vocabulary within the vocabulary.")


class DraftModel(nn.Module):
    """Decoder blocks, a final norm and an LM head over `draft_ids`; embeddings come from the target."""

    draft_ids: torch.Tensor  # a buffer, declared for the type checker

    def __init__(self, cfg: DraftConfig, hf_config: Any, draft_ids: torch.Tensor) -> None:
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRMSNorm

        self.config = cfg
        llama = copy.deepcopy(hf_config)
        llama.num_hidden_layers = len(cfg.init_layers)
        self.layers = nn.ModuleList(LlamaDecoderLayer(llama, layer_idx=i) for i in range(len(cfg.init_layers)))
        self.norm = LlamaRMSNorm(cfg.hidden_size, eps=llama.rms_norm_eps)
        self.head = nn.Linear(cfg.hidden_size, cfg.draft_vocab, bias=False)
        self.register_buffer("draft_ids", draft_ids.long(), persistent=False)  # [Vd] head row → token id

    def forward(self, embeds: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], mask: torch.Tensor | None = None):
        """Teacher-forced logits [B, T, Vd] from token embeddings [B, T, H] (causal unless `mask` is given)."""
        x = embeds
        for block in self.layers:
            x = block(x, attention_mask=mask, position_embeddings=rope, use_cache=False)
        return self.head(self.norm(x))


def from_target(lm: LoadedModel, init_layers: list[int], draft_ids: torch.Tensor) -> DraftModel:
    """A draft whose layers, norm and head rows are copies of the target's (fp32, trainable)."""
    cfg = DraftConfig(
        int(lm.hf.config.hidden_size), int(lm.hf.config.vocab_size), len(draft_ids), list(init_layers), lm.name
    )
    draft = DraftModel(cfg, lm.hf.config, draft_ids)
    for mine, i in zip(draft.layers, init_layers, strict=True):
        mine.load_state_dict(lm.hf.model.layers[i].state_dict())
    draft.norm.load_state_dict(lm.hf.model.norm.state_dict())
    with torch.no_grad():
        draft.head.weight.copy_(lm.lm_head.get_parameter("weight")[draft_ids.long()])
    return draft.float()


def parts(draft: DraftModel) -> DraftParts:
    """The draft's modules as a LayerDraft runs them."""
    return DraftParts(list(draft.layers), draft.norm, draft.head.get_parameter("weight"), draft.draft_ids)


def save_draft(
    draft: DraftModel,
    out_dir: Path,
    dtype: torch.dtype | None = None,
    manifest: dict | None = None,
    train: dict | None = None,
) -> Path:
    """Weights (with the draft ids; cast to dtype if given), config.json (with `train`, what training measured)
    and the manifest when given."""
    weights = store.tensors(draft.state_dict(), dtype, ids=("draft_ids", draft.draft_ids))
    cfg = asdict(draft.config) | ({"train": train} if train is not None else {})
    return store.save(out_dir, (WEIGHTS, weights), FORMAT, cfg, manifest)


def load_draft(lm: LoadedModel, folder: Path = DRAFT_DIR) -> DraftModel:
    """A saved draft for this target, in the target's dtype and device; DraftError with one sentence otherwise."""
    missing = f"No draft model in {folder}; train one with: python -m specviz train draft"
    cfg = store.config(folder, DraftConfig, SPECS, KIND, missing, _check)
    c = lm.hf.config
    if (cfg.hidden_size, cfg.vocab_size) != (c.hidden_size, c.vocab_size):
        raise DraftError(f"The draft model in {folder} was made for another model (hidden {cfg.hidden_size}).")
    state = read_weights(Path(folder) / WEIGHTS, KIND)
    ids = state.pop("draft_ids", None)
    if ids is None or not ids_fit(ids, cfg.draft_vocab, cfg.vocab_size):
        raise DraftError(f"{folder} has a draft vocabulary that does not match its config; retrain the draft.")
    draft = DraftModel(cfg, c, ids.long())
    store.load_state(draft, state, Path(folder) / WEIGHTS, KIND)
    draft.requires_grad_(False)
    return draft.to(device=lm.device, dtype=lm.dtype).eval()


def cached_draft(lm: LoadedModel, folder: Path = DRAFT_DIR) -> DraftModel:
    """The draft in `folder`, loaded once per model (held in its resources)."""
    from specviz.heads.files import stamp

    return lm.resources.get(("draft", str(folder), stamp(Path(folder) / WEIGHTS)), lambda: load_draft(lm, folder))
