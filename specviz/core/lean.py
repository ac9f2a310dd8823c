"""The target's forward for Llama-family models, written out: a few torch calls a layer, no host read, a static cache.

transformers' decoder makes about 2,900 torch calls for one 30-layer forward (masks built per call, norms in six
ops, three projections where one would do, the cache's bookkeeping); on a GPU each call is a kernel launch or more,
so a 135M model's forward took 30 ms there, bound by launching, not by the GPU. This forward reads the same
weights (the attention's three projections and the MLP's two side by side, one matrix each), makes about 30 calls a
layer, and keeps the keys and values in one buffer per cache ([layers, 1, kv heads, capacity, head dim]) that a step
fills by position and rolls back by length. Masks, positions and lengths come from Python integers the step
already knows, never from tensors, so nothing inside it waits for the device. On a GPU the same calls are captured
once per verify width (specviz.core.graphs) and replayed.

Greedy identity holds by construction between methods (every one runs this forward), and the contract test holds
it against transformers' own `generate` on the tiny model and the real one.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from specviz.core.kernels import can_pack
from specviz.core.kv_cache import first_moved


class ContextFull(ValueError):
    """A captured cache cannot grow past the capacity its graphs were captured for."""


class KV:
    """A target's KV cache: keys and values of every layer in one buffer, `length` tokens of it held.

    It speaks the part of transformers' Cache that specviz uses (`get_seq_length`, `crop`), and keeps a path of
    a verified tree (`keep_path`) in one gather over every layer. An ordinary cache grows geometrically; a fixed
    one (a captured forward's, whose buffer address lives in its graphs) refuses to grow.
    """

    def __init__(
        self,
        layers: int,
        kv_heads: int,
        head_dim: int,
        device: torch.device,
        dtype: torch.dtype,
        capacity: int = 256,
        fixed: bool = False,
    ) -> None:
        shape = (layers, 1, kv_heads, capacity, head_dim)
        self.k = torch.zeros(shape, device=device, dtype=dtype)
        self.v = torch.zeros(shape, device=device, dtype=dtype)
        self.length = 0
        self.fixed = fixed

    @property
    def capacity(self) -> int:
        return self.k.shape[3]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Tokens held."""
        return self.length

    def crop(self, max_length: int) -> None:
        """transformers' crop: keep `max_length` tokens, or drop `-max_length` from the end when negative."""
        keep = self.length + max_length if max_length < 0 else max_length
        self.length = max(0, min(self.length, keep))

    def reserve(self, n: int) -> None:
        """Room for `n` tokens in all (a fixed cache raises ContextFull instead of growing)."""
        if n <= self.capacity:
            return
        if self.fixed:
            raise ContextFull(f"{n} tokens do not fit the captured cache of {self.capacity}.")
        cap = max(n + 64, self.capacity * 3 // 2)
        for name in ("k", "v"):
            old = getattr(self, name)
            new = old.new_zeros(*old.shape[:3], cap, old.shape[4])
            new[:, :, :, : self.length] = old[:, :, :, : self.length]
            setattr(self, name, new)

    def keep_path(self, prefix: int, path: list[int]) -> None:
        """Keep the first `prefix` tokens and then the slots `path` (after the prefix, 0 = the root) packed in order;
        the slots already in place are not moved."""
        first = first_moved(path)
        if first < len(path):
            src = torch.tensor([prefix + p for p in path[first:]], dtype=torch.long, device=self.k.device)
            lo, hi = prefix + first, prefix + len(path)
            self.k[:, :, :, lo:hi] = self.k.index_select(3, src)
            self.v[:, :, :, lo:hi] = self.v.index_select(3, src)
        self.length = prefix + len(path)


class LeanLlama:
    """The forward of a transformers Llama model (its weights, read once into fused matrices)."""

    def __init__(self, hf: Any, pack: bool = False) -> None:
        """pack: prepack the fused matrices for oneDNN (the CPU's fp32 kernels; load_model decides)."""
        cfg = hf.config
        self.source = hf  # the model whose weights these are
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        self.n_layers = cfg.num_hidden_layers
        self.scale = self.head_dim**-0.5
        self.embed = hf.model.embed_tokens
        self.rotary = hf.model.rotary_emb
        self.norm = Norm(hf.model.norm)
        dev, dtype = self.embed.weight.device, self.embed.weight.dtype
        pack = pack and can_pack(dev, dtype)
        self.layers = [DecoderLayer(layer, pack) for layer in hf.model.layers]
        self.device, self.dtype = dev, dtype

    def new_cache(self, capacity: int = 256, fixed: bool = False) -> KV:
        return KV(self.n_layers, self.kv_heads, self.head_dim, self.device, self.dtype, capacity, fixed)

    def rope(self, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """RoPE's angles for position ids [q] (see rope_angles)."""
        return rope_angles(self.rotary, self.embed.weight, positions, self.head_dim)

    def __call__(
        self,
        ids: torch.Tensor,
        kv: KV,
        past: int,
        positions: torch.Tensor,
        mask: torch.Tensor | None,
        layers: tuple[int, ...] = (),
        width: int | None = None,
        slots: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """New tokens ids [q] at positions [q] on top of `past` cached ones → (hidden [q, H] after the final norm,
        the inputs of decoder `layers` side by side [q, len·H]).

        mask: additive [q, width] over the first `width` cache columns (None: every cached token visible, causal
        among the new ones, width = past + q). The new keys and values go to columns past..past+q, or to `slots`
        [q] when given (a captured forward, where `past` is not a Python number).
        """
        q = len(ids)
        width = past + q if width is None else width
        cos, sin = self.rope(positions)
        if mask is None and q > 1:
            mask = torch.full((q, q), torch.finfo(self.dtype).min, device=ids.device, dtype=self.dtype).triu_(1)
            mask = F.pad(mask, (past, 0))
        step = Pass(kv, past, q, width, slots, cos, sin, mask)
        x = F.embedding(ids, self.embed.weight)  # [q, H]
        kept: dict[int, torch.Tensor] = {}
        for i, layer in enumerate(self.layers):
            if i in layers:
                kept[i] = x
            x = layer(x, i, step, self)
        hidden = self.norm(x)
        fused = torch.cat([kept[i] for i in layers], dim=-1) if layers else hidden[:, :0]
        return hidden, fused


def rope_angles(
    rotary: Any, like: torch.Tensor, positions: torch.Tensor, head_dim: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """cos and a signed sin [q, d] for position ids [q], from transformers' own rotary module (so the angles are its,
    in `like`'s dtype): x·cos + roll(x, d/2)·sin_signed is transformers' x·cos + rotate_half(x)·sin, the sign folded
    in once a forward instead of negating half of every query and key."""
    cos, sin = rotary(like, positions[None])
    half = head_dim // 2
    return cos[0], torch.cat((-sin[0, :, :half], sin[0, :, half:]), dim=-1)


class Pass:
    """What every layer of one forward shares: the cache, where the new tokens go, RoPE's angles, the mask."""

    __slots__ = ("cache", "cos", "mask", "past", "q", "sin", "slots", "width")

    def __init__(
        self,
        cache: KV,
        past: int,
        q: int,
        width: int,
        slots: torch.Tensor | None,
        cos: torch.Tensor,
        sin: torch.Tensor,
        mask: torch.Tensor | None,
    ) -> None:
        self.cache, self.past, self.q, self.width, self.slots = cache, past, q, width, slots
        self.cos, self.sin, self.mask = cos, sin, mask


class Norm:
    """RMSNorm in one call (torch's fused rms_norm over transformers' weight and epsilon)."""

    def __init__(self, norm: Any) -> None:
        self.weight, self.eps = norm.weight, norm.variance_epsilon
        self.shape = (norm.weight.shape[0],)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, self.shape, self.weight, self.eps)


class Linear:
    """x [q, in] → [q, out] in one call: oneDNN's prepacked kernel on the CPU, else F.linear."""

    def __init__(self, weight: torch.Tensor, pack: bool, bias: torch.Tensor | None = None) -> None:
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), None) if pack else None
        self.weight = None if pack else weight.detach()  # packed: the dense copy is not kept
        self.bias = None if bias is None else bias.detach()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if self.packed is not None:
            return torch.ops.mkldnn._linear_pointwise(x, self.packed, self.bias, "none", [], "")
        return F.linear(x, self.weight, self.bias)  # type: ignore[arg-type]


class DecoderLayer:
    """One decoder layer's weights: the norms as they are, q/k/v as one matrix, gate/up as one matrix.

    A layer whose input norm is an identity (EAGLE's head: its fused input is not normalised again) skips it."""

    def __init__(self, layer: Any, pack: bool) -> None:
        att, mlp = layer.self_attn, layer.mlp
        first = layer.input_layernorm
        self.norm1 = Norm(first) if hasattr(first, "weight") else (lambda x: x)
        self.norm2 = Norm(layer.post_attention_layernorm)
        self.qkv = fused_linear([att.q_proj, att.k_proj, att.v_proj], pack)
        self.o = fused_linear([att.o_proj], pack)
        self.gate_up = fused_linear([mlp.gate_proj, mlp.up_proj], pack)
        self.down = fused_linear([mlp.down_proj], pack)
        self.ffn = mlp.gate_proj.weight.shape[0]

    def __call__(self, x: torch.Tensor, i: int, s: Pass, m: Any) -> torch.Tensor:
        """x [q, H] through layer i (its cache slot i); m: the model's attention shape (heads, kv_heads, head_dim,
        scale), as LeanLlama and the EAGLE heads' forwards carry it."""
        heads, kvh = m.heads, m.kv_heads
        qkv = self.qkv(self.norm1(x)).view(s.q, heads + 2 * kvh, m.head_dim).transpose(0, 1)  # [heads, q, d]
        qk = qkv[: heads + kvh]
        qk = qk * s.cos + qk.roll(m.head_dim // 2, -1) * s.sin  # RoPE on queries and keys at once
        q, k = qk.split((heads, kvh))
        kv = s.cache
        if s.slots is None:
            kv.k[i, 0, :, s.past : s.past + s.q] = k
            kv.v[i, 0, :, s.past : s.past + s.q] = qkv[heads + kvh :]
        else:
            kv.k[i, 0].index_copy_(1, s.slots, k)
            kv.v[i, 0].index_copy_(1, s.slots, qkv[heads + kvh :])
        a = F.scaled_dot_product_attention(
            q, kv.k[i, 0, :, : s.width], kv.v[i, 0, :, : s.width], attn_mask=s.mask, scale=m.scale, enable_gqa=True
        )
        x = x + self.o(a.transpose(0, 1).reshape(s.q, heads * m.head_dim))
        gate, up = self.gate_up(self.norm2(x)).split(self.ffn, dim=-1)
        return x + self.down(F.silu(gate) * up)


def fused_linear(linears: list[nn.Module], pack: bool) -> Linear:
    """One linear layer computing `linears` side by side (their weights stacked; bias-free, as Llama's are)."""
    weights: list[torch.Tensor] = [lin.get_parameter("weight") for lin in linears]
    if any(w is None for w in weights):
        raise ValueError("The model's linear layers were prepacked before the forward read them.")
    w = torch.cat([wt.detach() for wt in weights], dim=0) if len(weights) > 1 else weights[0].detach()
    return Linear(w, pack)


def supports(hf: Any) -> bool:
    """Whether LeanLlama runs this model: a Llama decoder without biases, sliding windows or scaled RoPE."""
    cfg = hf.config
    rope = getattr(cfg, "rope_parameters", None) or getattr(cfg, "rope_scaling", None) or {}
    return (
        getattr(cfg, "model_type", "") == "llama"
        and not getattr(cfg, "attention_bias", False)
        and not getattr(cfg, "mlp_bias", False)
        and getattr(cfg, "hidden_act", "silu") == "silu"
        and rope.get("rope_type", "default") == "default"
    )
