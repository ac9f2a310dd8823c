"""The EAGLE draft head: concat(embed(x_{t+1}), f_t) → Linear(2h→h) → one decoder layer → f_{t+1}.

f is the target's final (post-norm) hidden state, the vector its LM head consumes. The head reuses
the target's frozen token embedding and LM head; token logits come from a reduced draft vocabulary
(the most frequent continuation tokens, EAGLE-3's d2t idea) because a full fp32 LM-head product
costs as much as the whole draft on this CPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import torch
from torch import nn

from specviz.core.kernels import gqa_attention
from specviz.core.kv_cache import growing_cache
from specviz.core.model import LoadedModel
from specviz.core.paths import EAGLE_DIR
from specviz.core.schema import Between, SchemaError
from specviz.heads import store
from specviz.heads.files import MAX_VOCAB, Kind, ids_fit, read_weights

if TYPE_CHECKING:
    from transformers import Cache, DynamicCache, LlamaConfig

HEAD_FORMAT = "specviz-eagle/1"
DEFAULT_DIR = EAGLE_DIR
WEIGHTS, CONFIG = "model.safetensors", "config.json"


class HeadError(RuntimeError):
    """A head file that is missing, corrupt, or made for another model; the message says what to do."""


KIND = Kind(HEAD_FORMAT, "an EAGLE head", HeadError, "retrain with: python -m specviz train eagle")
SPECS = {  # the bounds of a head's config.json (then check_shape)
    "hidden_size": Between("int", 1, 16384),
    "intermediate_size": Between("int", 1, 1 << 18),
    "num_attention_heads": Between("int", 1, 256),
    "num_key_value_heads": Between("int", 1, 256),
    "head_dim": Between("int", 1, 1024),
    "rms_norm_eps": Between("float", 0, 1),
    "rope_theta": Between("float", 1, 1e9),
    "vocab_size": Between("int", 1, MAX_VOCAB),
    "draft_vocab": Between("int", 0, MAX_VOCAB),
    "calibration": [[Between("float", 0, 1), 256], 64],
    "confidence": [Between("float", 0, 1), 64],
}


@dataclass(frozen=True)
class HeadConfig:
    """Shape of the head (copied from the target) plus what training measured about it."""

    hidden_size: int
    intermediate_size: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    vocab_size: int
    target: str = ""  # model name the head was trained for
    draft_vocab: int = 0  # 0 = the full vocabulary
    # calibration[d][i]: P(the target's token is rank i of the draft at depth d+1), drafting from own features
    calibration: list[list[float]] = field(default_factory=list)
    # confidence[b]: P(a drafted node is the target's token | its parent was, its draft probability in tenth b),
    # measured live on unseen prompts (specviz.tuning.confidence); the confidence budget reads it
    confidence: list[float] = field(default_factory=list)
    train: dict = field(default_factory=dict)  # how it was trained and what it scored
    format: str = HEAD_FORMAT

    @classmethod
    def from_target(cls, hf_config: Any, target: str = "", draft_vocab: int = 0) -> HeadConfig:
        """The head's shape read off the target's transformers config."""
        c = hf_config
        rope = (getattr(c, "rope_parameters", None) or {}).get("rope_theta", getattr(c, "rope_theta", 1e4))
        head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
        return cls(
            c.hidden_size,
            c.intermediate_size,
            c.num_attention_heads,
            c.num_key_value_heads,
            head_dim,
            float(c.rms_norm_eps),
            float(rope),
            c.vocab_size,
            target,
            draft_vocab,
        )

    def llama_config(self) -> LlamaConfig:
        """A one-layer LlamaConfig with the target's attention and MLP shapes."""
        from transformers import LlamaConfig

        cfg = LlamaConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            intermediate_size=self.intermediate_size,
            num_hidden_layers=1,
            num_attention_heads=self.num_attention_heads,
            num_key_value_heads=self.num_key_value_heads,
            head_dim=self.head_dim,
            rms_norm_eps=self.rms_norm_eps,
            max_position_embeddings=8192,
            rope_parameters={"rope_type": "default", "rope_theta": self.rope_theta},
        )
        cfg._attn_implementation = gqa_attention()  # transformers' sdpa, with grouped KV heads on the CPU
        return cfg


class EagleHead(nn.Module):
    """Predicts the next feature from (feature, next token); shares embeddings and LM head with the target."""

    draft_ids: torch.Tensor  # a buffer, declared for the type checker

    def __init__(self, config: HeadConfig, draft_ids: torch.Tensor | None = None) -> None:
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaDecoderLayer, LlamaRotaryEmbedding

        self.config = config
        h = config.hidden_size
        llama = self.llama = config.llama_config()  # built once: a LlamaConfig costs ~1 ms to construct
        self.fc = nn.Linear(2 * h, h, bias=True)
        self.layer = LlamaDecoderLayer(llama, layer_idx=0)
        self.layer.register_module("input_layernorm", nn.Identity())  # EAGLE-1: the fused input is not re-normalised
        self.rotary = LlamaRotaryEmbedding(llama)
        ids = torch.arange(config.vocab_size) if draft_ids is None else draft_ids.long()
        self.register_buffer("draft_ids", ids, persistent=False)  # [Vd] draft index → token id

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> EagleHead:
        """Move and cast as any module does, except RoPE's frequencies, which stay in their own dtype (fp32): in
        bf16 they would be rounded, up to 2.8 rad of angle at a distance of 2048."""
        kept = dict(self.rotary.named_buffers(recurse=False))
        out = super()._apply(fn, recurse)
        for name, buf in kept.items():
            moved = self.rotary.get_buffer(name)
            setattr(self.rotary, name, buf.to(device=moved.device))
        return out

    @property
    def full_vocab(self) -> bool:
        """Whether the head drafts over the whole vocabulary (no reduced draft vocabulary)."""
        return self.draft_ids.numel() == self.config.vocab_size

    def forward(
        self,
        feats: torch.Tensor,
        embeds: torch.Tensor,
        positions: torch.Tensor,
        cache: Cache | None = None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """feats, embeds [B, T, h]; positions [B, T]; additive mask [B|1, 1, T, past+T] → [B, T, h]."""
        x = self.fc(torch.cat([embeds, feats], dim=-1))
        rope = self.rotary(x, positions)
        return self.layer(
            x,
            attention_mask=mask,
            position_ids=positions,
            cache=cache,
            use_cache=cache is not None,
            position_embeddings=rope,
        )

    def new_cache(self) -> DynamicCache:
        """An empty KV cache for the head's one layer."""
        return growing_cache(self.llama)


class DraftVocab(Protocol):
    """A draft over a reduced vocabulary (EAGLE's heads, DFlash's drafter): its rows' token ids, or all of them."""

    draft_ids: torch.Tensor

    @property
    def full_vocab(self) -> bool: ...


def draft_weight(head: DraftVocab, lm_head: nn.Module, dtype: torch.dtype) -> torch.Tensor:
    """The LM-head rows of the draft vocabulary, [Vd, h], in the draft's dtype."""
    w = lm_head.get_parameter("weight").detach()
    return w.to(dtype) if head.full_vocab else w.index_select(0, head.draft_ids.to(w.device)).to(dtype)


def new_head(hf_config: Any, target: str = "", draft_ids: torch.Tensor | None = None, seed: int = 0) -> EagleHead:
    """A freshly initialised head for a target model (the starting point of training)."""
    n = 0 if draft_ids is None else int(draft_ids.numel())
    head = EagleHead(HeadConfig.from_target(hf_config, target, n), draft_ids)
    init_linears(head, torch.Generator().manual_seed(seed))
    return head.float()


def pass_through(head: EagleHead) -> EagleHead:
    """Make the head hand on the next token's embedding as its predicted feature (fc reads the embedding half,
    the layer adds nothing), so it drafts what the target's LM head reads off an embedding: every draft is right
    on a model whose next token does not depend on its input (the contract test's acceptance check)."""
    h = head.fc.out_features
    with torch.no_grad():
        head.fc.weight.zero_()
        head.fc.weight[:, :h].diagonal().fill_(1.0)
        head.fc.bias.zero_()
        head.get_parameter("layer.self_attn.o_proj.weight").zero_()
        head.get_parameter("layer.mlp.down_proj.weight").zero_()
    return head


def init_linears(module: nn.Module, gen: torch.Generator) -> None:
    """nn.Linear's own default init (Kaiming-uniform, a = √5; bias ±1/√fan_in), drawn from `gen`."""
    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, nn.Linear):
                nn.init.kaiming_uniform_(m.weight, a=math.sqrt(5), generator=gen)
                if m.bias is not None:
                    bound = 1 / math.sqrt(m.in_features)
                    nn.init.uniform_(m.bias, -bound, bound, generator=gen)


save_head = store.save_drafter  # model.safetensors (WEIGHTS), config.json, the manifest


def read_config(folder: str | Path) -> HeadConfig:
    """Parse a head's config.json; raise HeadError on a missing, corrupt or foreign file."""
    missing = f"No EAGLE head in {Path(folder)}; train one with: python -m specviz train eagle"
    return store.config(folder, HeadConfig, SPECS, KIND, missing, check_shape)


def check_shape(cfg: HeadConfig) -> None:
    """SchemaError unless a decoder layer can be built with this shape, at a size bounded by the hidden width."""
    h = cfg.hidden_size
    if cfg.num_attention_heads % cfg.num_key_value_heads:
        raise SchemaError("num_attention_heads is not a multiple of num_key_value_heads.")
    if h % cfg.num_attention_heads:  # transformers' LlamaConfig refuses it, with a traceback of its own
        raise SchemaError(f"hidden_size {h} is not a multiple of num_attention_heads.")
    if cfg.intermediate_size > 16 * h or cfg.num_attention_heads * cfg.head_dim > 8 * h:
        raise SchemaError(f"intermediate_size or num_attention_heads x head_dim is too large for hidden_size {h}.")
    if cfg.draft_vocab > cfg.vocab_size:
        raise SchemaError(f"draft_vocab {cfg.draft_vocab} exceeds vocab_size {cfg.vocab_size}.")


def draft_ids_fit(draft_ids: torch.Tensor | None, cfg: HeadConfig) -> bool:
    """Whether the stored draft vocabulary has the config's size and only token ids of its vocabulary."""
    return cfg.draft_vocab == 0 if draft_ids is None else ids_fit(draft_ids, cfg.draft_vocab, cfg.vocab_size)


def load_head(folder: str | Path = DEFAULT_DIR, hf_config: Any = None, dtype: torch.dtype = torch.float32) -> EagleHead:
    """Load a saved head; check it fits `hf_config` when given; raise HeadError with one clear sentence."""
    cfg = read_config(folder)
    if hf_config is not None:
        want = HeadConfig.from_target(hf_config)
        if (want.hidden_size, want.vocab_size) != (cfg.hidden_size, cfg.vocab_size):
            raise HeadError(
                f"The EAGLE head in {folder} was trained for another model "
                f"(hidden {cfg.hidden_size}, vocab {cfg.vocab_size})."
            )
    return load_weights(folder, cfg, EagleHead, KIND, dtype)


def load_weights(folder: str | Path, cfg: Any, cls: Callable, kind: Kind, dtype: torch.dtype) -> Any:
    """A head of class `cls` (EAGLE's, EAGLE-3's, DFlash's drafter) over its stored draft vocabulary, every stored
    tensor loaded (RoPE's frequencies rebuilt from the config), frozen, in `dtype`; HeadError with one sentence when
    unusable."""
    weights = Path(folder) / WEIGHTS
    state = read_weights(weights, kind)
    draft_ids = state.pop("draft_ids", None)
    if not draft_ids_fit(draft_ids, cfg):
        raise HeadError(f"{weights} has a draft vocabulary that does not match its config; {kind.hint}.")
    head = cls(cfg, None if draft_ids is None else draft_ids.long())
    store.load_state(head, state, weights, kind, rebuilt="rotary.")
    head.requires_grad_(False)
    return head.to(dtype).eval()


def cached_head(lm: LoadedModel, folder: str | Path | None = None) -> EagleHead:
    """The trained head in `folder` for `lm`, loaded once per (folder, file time) and kept in `lm.resources`."""
    return store.cached(lm, "eagle.head", folder, DEFAULT_DIR, load_head)
