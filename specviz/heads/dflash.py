"""The DFlash block drafter (Chen, Liang & Liu, 2026): one pass fills a whole block of masked positions.

The target's verify pass hands over the residual stream entering a low, a middle and a high layer at every
committed position (as EAGLE-3's head reads them). The drafter fuses them into a context feature c_j
(a norm per layer, one Linear(3h → h), a norm), and each of its layers projects c_j into keys and values
once, when position j is committed: the context is a KV cache that only grows.

A draft is one forward over a block of k positions: the last committed token's embedding (the root, whose
own features the target has not computed yet) followed by k - 1 copies of a learned mask embedding. Every
block position attends to the whole context and to every other block position (no causal mask inside the
block: the positions are denoised together, as in block diffusion), and position i reads out, through the
drafter's final norm and the target's frozen LM-head rows of the draft vocabulary, its guess for the token
i places after the root. One pass, whatever k is: EAGLE's head runs once per draft depth.

Each layer is a Llama decoder layer whose attention takes its keys and values from the context cache and
from the block, with a norm on each head's queries and keys (the context features and the block's
embeddings arrive on different scales). The block's keys are never kept: the next block is drafted after
the committed tokens' features have joined the context.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
from torch import nn
from torch.nn import functional as F

from specviz.core.model import LoadedModel, fused_layers
from specviz.core.paths import MODELS
from specviz.core.schema import Between
from specviz.heads import store
from specviz.heads.eagle import SPECS, HeadConfig, HeadError, check_shape, init_linears, load_weights
from specviz.heads.eagle3 import check_fits
from specviz.heads.files import Kind

DFLASH_FORMAT = "specviz-dflash/1"
DEFAULT_DIR = MODELS / "dflash"
WEIGHTS, CONFIG = "model.safetensors", "config.json"
TRAIN_HINT = "python -m specviz train dflash"
KIND = Kind(DFLASH_FORMAT, "a DFlash drafter", HeadError, f"retrain with: {TRAIN_HINT}")
MAX_BLOCK = 16  # block positions a drafter may be built or run with (the paper's largest block)


@dataclass(frozen=True)
class DFlashConfig(HeadConfig):
    """The drafter's shape (the target's layer shape), its block, its depth and the target layers it reads."""

    format: str = DFLASH_FORMAT
    layers: list[int] = field(default_factory=list)  # target decoder layers whose inputs are fused, low → high
    block: int = 8  # positions drafted in one pass: the root and block - 1 masked ones
    depth: int = 1  # the drafter's decoder layers
    root_feature: bool = False  # the root's input also reads the last committed position's fused feature
    kv_heads: int = 0  # the drafter's key/value heads (0: the target's; its heads for full-width values)
    root_everywhere: bool = False  # every block position's input adds the root's (a masked one: to its mask embedding)

    @classmethod
    def for_target(cls, hf_config: Any, target: str = "", draft_vocab: int = 0, **shape: Any) -> DFlashConfig:
        """The drafter's shape read off the target's transformers config (block, depth, root_feature as given); it
        reads fused_layers."""
        base = HeadConfig.from_target(hf_config, target, draft_vocab)
        layers = [int(i) for i in fused_layers(int(hf_config.num_hidden_layers))]
        return cls(**{**asdict(base), "format": DFLASH_FORMAT, "layers": layers, **shape})


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """RoPE on [B, heads, T, d] with cos/sin [B, T, d]."""
    half = x.shape[-1] // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos[:, None] + turned * sin[:, None]


class BlockLayer(nn.Module):
    """A decoder layer whose attention reads the context's keys and values beside the block's own."""

    def __init__(self, cfg: DFlashConfig) -> None:
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm

        h, d = cfg.hidden_size, cfg.head_dim
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.kv_heads or cfg.num_key_value_heads, d
        self.q_proj = nn.Linear(h, self.heads * d, bias=False)
        self.k_proj = nn.Linear(h, self.kv_heads * d, bias=False)
        self.v_proj = nn.Linear(h, self.kv_heads * d, bias=False)
        self.o_proj = nn.Linear(self.heads * d, h, bias=False)
        self.q_norm, self.k_norm = LlamaRMSNorm(d, cfg.rms_norm_eps), LlamaRMSNorm(d, cfg.rms_norm_eps)
        self.input_norm, self.post_norm = LlamaRMSNorm(h, cfg.rms_norm_eps), LlamaRMSNorm(h, cfg.rms_norm_eps)
        self.mlp = LlamaMLP(cfg.llama_config())

    def kv(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys (normed, rotated) and values [B, kv_heads, T, d] of states x [B, T, h]."""
        B, T = x.shape[:2]
        k = self.k_norm(self.k_proj(x).view(B, T, self.kv_heads, -1)).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.kv_heads, -1).transpose(1, 2)
        return rotate(k, cos, sin), v

    def forward(
        self, x: torch.Tensor, context: tuple[torch.Tensor, torch.Tensor], rope: tuple, mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Block states x [B, m, h] → [B, m, h], attending to context (k, v) [B, kv, n, d] and to the block."""
        B, m = x.shape[:2]
        y = self.input_norm(x)
        q = rotate(self.q_norm(self.q_proj(y).view(B, m, self.heads, -1)).transpose(1, 2), *rope)
        kb, vb = self.kv(y, *rope)
        k, v = torch.cat([context[0], kb], dim=2), torch.cat([context[1], vb], dim=2)
        att = F.scaled_dot_product_attention(q, k.to(q.dtype), v.to(q.dtype), attn_mask=mask, enable_gqa=True)
        x = x + self.o_proj(att.transpose(1, 2).reshape(B, m, -1))
        return x + self.mlp(self.post_norm(x))


class DFlashHead(nn.Module):
    """Fused context features in, one block of draft positions out (see the module's docstring)."""

    draft_ids: torch.Tensor  # a buffer, declared for the type checker
    root_fc: nn.Linear | None

    def __init__(self, config: DFlashConfig, draft_ids: torch.Tensor | None = None) -> None:
        super().__init__()
        from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding

        self.config = config
        h, eps = config.hidden_size, config.rms_norm_eps
        self.layer_norms = nn.ModuleList(LlamaRMSNorm(h, eps) for _ in config.layers)  # massive activations
        self.fuse = nn.Linear(len(config.layers) * h, h, bias=False)
        self.context_norm = LlamaRMSNorm(h, eps)
        self.mask_embed = nn.Parameter(torch.zeros(config.block if config.root_everywhere else 1, h))
        self.root_fc = nn.Linear(2 * h, h, bias=False) if config.root_feature else None
        self.blocks = nn.ModuleList(BlockLayer(config) for _ in range(config.depth))
        self.norm = LlamaRMSNorm(h, eps)  # before the frozen LM-head rows
        self.rotary = LlamaRotaryEmbedding(config.llama_config())
        ids = torch.arange(config.vocab_size) if draft_ids is None else draft_ids.long()
        self.register_buffer("draft_ids", ids, persistent=False)  # [Vd] draft index → token id

    def _apply(self, fn: Any, recurse: bool = True) -> DFlashHead:
        """Move and cast as any module does, except RoPE's frequencies, which stay fp32 (as EagleHead's)."""
        kept = dict(self.rotary.named_buffers(recurse=False))
        out = super()._apply(fn, recurse)
        for name, buf in kept.items():
            setattr(self.rotary, name, buf.to(device=self.rotary.get_buffer(name).device))
        return out

    @property
    def full_vocab(self) -> bool:
        """Whether the drafter reads out over the whole vocabulary."""
        return self.draft_ids.numel() == self.config.vocab_size

    def rope(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos, sin [B, T, d] at positions [B, T], in x's dtype."""
        return self.rotary(x, positions)

    def fused(self, layers: torch.Tensor) -> torch.Tensor:
        """The target's layer inputs [B, n, 3h] → the context features c [B, n, h]."""
        parts = layers.chunk(len(self.layer_norms), dim=-1)
        return self.context_norm(self.fuse(torch.cat([n(p) for n, p in zip(self.layer_norms, parts, strict=True)], -1)))

    def context(self, c: torch.Tensor, positions: torch.Tensor) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Context features c [B, n, h] at positions [B, n] → each drafter layer's keys and values."""
        rope = self.rope(c, positions)
        return [layer.kv(c, *rope) for layer in cast(list[BlockLayer], list(self.blocks))]

    def block_inputs(self, root_embeds: torch.Tensor, block: int, last: torch.Tensor | None = None) -> torch.Tensor:
        """[B, r, h] embeddings of r roots → [B, r·block, h]: each root followed by block - 1 mask embeddings; with
        root_feature, a root's input also reads `last` [B, r, h], the context feature just before it."""
        B, r, h = root_embeds.shape
        root = root_embeds if self.root_fc is None or last is None else self.root_fc(torch.cat([root_embeds, last], -1))
        x = self.mask_embed.to(root.dtype).expand(B, r, block, h)
        if self.config.root_everywhere:  # each masked position starts from the root, told apart by its own embedding
            return torch.cat([root[:, :, None], x[:, :, 1:] + root[:, :, None]], dim=2).view(B, r * block, h)
        return torch.cat([root[:, :, None], x[:, :, 1:]], dim=2).view(B, r * block, h)

    def forward(
        self,
        x: torch.Tensor,
        positions: torch.Tensor,
        context: list[tuple[torch.Tensor, torch.Tensor]],
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Block inputs x [B, m, h] at positions [B, m] over each layer's context → normed outputs [B, m, h] (what
        the LM-head rows read; position i of a block scores the token i places after its root)."""
        rope = self.rope(x, positions)
        for layer, kv in zip(self.blocks, context, strict=True):
            x = layer(x, kv, rope, mask)
        return self.norm(x)


def new_head(
    hf_config: Any, target: str = "", draft_ids: torch.Tensor | None = None, seed: int = 0, **shape: Any
) -> DFlashHead:
    """A freshly initialised drafter of `shape` (block, depth, root_feature; linears drawn from `seed`, the mask
    embedding small and random)."""
    n = 0 if draft_ids is None else int(draft_ids.numel())
    head = DFlashHead(DFlashConfig.for_target(hf_config, target, n, **shape), draft_ids)
    gen = torch.Generator().manual_seed(seed)
    init_linears(head, gen)
    with torch.no_grad():
        head.mask_embed.copy_(torch.randn(head.mask_embed.shape, generator=gen) * 0.02)
    return head.float()


def pass_root(head: DFlashHead) -> DFlashHead:
    """Make the drafter guess "the root again" at every masked position: no context (the fusion zeroed), a zero mask
    embedding, queries of zero (so attention averages the block, where only the root's value is not zero), values
    and output projection that carry the root's embedding as far as the value width allows, and no MLP. On the
    tests' sticky model, which tends to repeat the token it read, these drafts are often right (the contract's
    acceptance check)."""
    with torch.no_grad():
        head.fuse.weight.zero_()
        head.mask_embed.zero_()
        for layer in cast(list[BlockLayer], list(head.blocks)):
            d, per_kv = layer.head_dim, layer.heads // layer.kv_heads
            for w in (layer.q_proj.weight, layer.o_proj.weight, layer.v_proj.weight, layer.mlp.down_proj.weight):
                w.zero_()
            width = min(layer.v_proj.weight.shape)
            layer.v_proj.weight[:width, :width] = torch.eye(width)
            for g in range(layer.kv_heads):  # the first query head of each group hands its value on
                layer.o_proj.weight[g * d : (g + 1) * d, g * per_kv * d : (g * per_kv + 1) * d] = torch.eye(d)
    return head


def warm_start(head: DFlashHead, folder: str | Path) -> list[str]:
    """Copy an EAGLE-3 head's layer norms, fusing Linear, attention and MLP into a fresh drafter where the shapes
    match (its first layer reads [emb; feature] of width 2h, so its q, k and v do not): a start for little data.
    Returns the copied names; HeadError when the folder holds no readable head."""
    from safetensors.torch import load_file

    path = Path(folder) / WEIGHTS
    try:
        state = load_file(str(path))
    except Exception as exc:  # missing or corrupt: one clear sentence
        raise HeadError(f"Cannot read the EAGLE-3 head {path} to start from ({exc}).") from exc
    names = {"fuse.weight": "fuse.weight", "norm.weight": "norm.weight"}
    names |= {f"layer_norms.{i}.weight": f"layer_norms.{i}.weight" for i in range(len(head.layer_norms))}
    for i in range(len(head.blocks)):
        for part in ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj"):
            names[f"blocks.{i}.{part.split('.')[1]}.weight"] = f"layer.{part}.weight"
        for part in ("gate_proj", "up_proj", "down_proj"):
            names[f"blocks.{i}.mlp.{part}.weight"] = f"layer.mlp.{part}.weight"
    own = head.state_dict()
    picked = {k: state[s] for k, s in names.items() if s in state and k in own and own[k].shape == state[s].shape}
    head.load_state_dict({**own, **{k: v.to(own[k].dtype) for k, v in picked.items()}})
    return sorted(picked)


save_head = store.save_drafter  # model.safetensors (WEIGHTS), config.json, the manifest


def read_config(folder: str | Path) -> DFlashConfig:
    """Parse a drafter's config.json; HeadError on a missing, corrupt or foreign file."""
    specs = {**SPECS, "layers": [Between("int", 0, 1023), 16], "block": Between("int", 2, MAX_BLOCK)}
    specs["depth"] = Between("int", 1, 8)
    missing = f"No DFlash drafter in {Path(folder)}; train one with: {TRAIN_HINT}"
    cfg = store.config(folder, DFlashConfig, specs, KIND, missing, check_shape)
    if len(cfg.layers) != 3:
        raise HeadError(f"{Path(folder) / CONFIG} names {len(cfg.layers)} fused layers, not 3; {KIND.hint}")
    return cfg


def load_head(
    folder: str | Path = DEFAULT_DIR, hf_config: Any = None, dtype: torch.dtype = torch.float32
) -> DFlashHead:
    """A saved drafter, frozen, in `dtype` (checked against `hf_config` when given); HeadError in one sentence."""
    cfg = read_config(folder)
    if hf_config is not None:
        check_fits(cfg, hf_config, folder, KIND)
    return load_weights(folder, cfg, DFlashHead, KIND, dtype)


def cached_head(lm: LoadedModel, folder: str | Path | None = None) -> DFlashHead:
    """The trained drafter in `folder` for `lm`, loaded once per (folder, file time) and kept in `lm.resources`."""
    return store.cached(lm, "dflash.head", folder, DEFAULT_DIR, load_head)
