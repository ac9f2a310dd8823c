"""The CPU kernels behind the model: SDPA with grouped KV heads under a mask, and oneDNN-prepacked linears."""

from __future__ import annotations

import functools
from typing import Any

import torch
from torch import nn

from specviz.core.measure import cpu_flags

GQA_ATTENTION = "specviz_sdpa_gqa"


def sdpa_gqa_attention(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention, but on the CPU with SDPA's own grouped-query support (and, given
    `grouped_decode=True`, a decoding step's one token per row by `_grouped_decode`).

    With a 4D mask, the stock path copies the 3 KV heads out to all 9 query heads (repeat_kv, an
    O(context) copy per layer); the CPU kernel takes grouped heads with a mask directly. At 900 tokens
    of context a 6-token tree forward dropped from 1.13 to 1.05 times a 1-token step. On CUDA a mask
    plus GQA would fall back to the math kernel, so there (and for a model without grouped heads)
    this is transformers' own `sdpa`. query [B, Hq, q, d]; key, value [B, Hkv, kv, d] → [B, q, Hq, d].
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups, grouped_decode = getattr(module, "num_key_value_groups", 1), kwargs.pop("grouped_decode", False)
    if query.device.type != "cpu" or groups == 1 or kwargs.get("position_bias") is not None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    q_len = query.shape[2]
    if grouped_decode and q_len == 1:
        return _grouped_decode(query, key, value, attention_mask, scaling, groups)
    causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    causal = bool(q_len > 1 and attention_mask is None and causal)
    if causal and key.shape[2] > q_len:  # as transformers: the prefill of an empty static cache
        key, value = key[:, :, :q_len], value[:, :, :q_len]
    out = nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling, is_causal=causal, enable_gqa=True
    )
    return out.transpose(1, 2).contiguous(), None


@functools.cache
def gqa_attention() -> str:
    """The name to pass as `attn_implementation` for `sdpa_gqa_attention` (registered once, by name)."""
    return _registered(GQA_ATTENTION, sdpa_gqa_attention)


def _registered(name: str, fn: Any) -> str:
    """`fn` under `name` in transformers' public AttentionInterface, with SDPA's masks; a new name, so models that
    ask for `sdpa` are untouched."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(name, fn)
    AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    return name


GROUPED_DECODE = "specviz_grouped_decode"


def _grouped_decode(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor | None,
    scaling: float | None,
    groups: int,
) -> tuple[torch.Tensor, None]:
    """One new token per row over a long, padded cache (the corpus's batched decoding): two grouped matmuls.

    Each KV head's query group is one [groups, d] block, so the keys and values are read once, not copied out per
    query head (transformers' SDPA path); on a 2-core EPYC in bf16 at batch 64 and 778 cached columns, under load,
    a step's attention took 505 ms against 1,157 for SDPA with grouped heads and 2,826 for the stock path. And
    when the keys and values are the first columns of a dense buffer with spare room (core.kv_cache's growing
    layers, training.stream's cache), the matmuls read the whole buffer and mask the spare columns: oneDNN
    copies a strided view to a dense one first, which cost more than the attention itself (the same 64 prompts,
    159 steps: 177-187 against 247-253 ms a step). Spare columns hold zeros or stale keys and values, finite
    either way, and their weight is exactly 0. Scores and softmax are fp32; a query of a narrower dtype than the
    cache (fp32 keys under a bf16 model) is cast up and the output back. Anything else (prefills, a GPU,
    ungrouped heads) is `sdpa_gqa_attention`'s own.
    """
    b, hq, _q, d = query.shape
    hk, n = key.shape[1], key.shape[2]
    key, value = _dense_buffer(key), _dense_buffer(value)
    q = query.view(b, hk, groups, d).to(key.dtype)
    scores = torch.matmul(q, key.transpose(-1, -2)).float()  # [B, Hkv, g, columns]
    scores *= scaling if scaling is not None else d**-0.5
    scores[..., n:] = float("-inf")  # the buffer's spare columns, if it was widened
    if mask is not None:
        m = mask[:, :, -1:, :]  # [B or 1, 1, 1, n]: this token's row
        seen = scores[..., :n]
        if m.dtype == torch.bool:
            seen.masked_fill_(~m, float("-inf"))
        else:
            seen += m.float()
    out = torch.matmul(torch.softmax(scores, -1).to(value.dtype), value)  # [B, Hkv, g, d]
    return out.view(b, 1, hq, d).to(query.dtype), None


def _dense_buffer(x: torch.Tensor) -> torch.Tensor:
    """x [B, H, n, d] itself, or, when it is the first n columns of a dense [B, H, cap, d] buffer, the whole buffer."""
    b, h, n, d = x.shape
    cap = x.stride(1) // d if d else 0
    dense = (h * cap * d, cap * d, d, 1)
    if cap <= n or x.stride() != dense:
        return x
    if x.untyped_storage().nbytes() < (x.storage_offset() + b * h * cap * d) * x.element_size():
        return x
    return x.as_strided((b, h, cap, d), dense)


# the corpus's kernel: sdpa_gqa_attention with a decoding step's one token per row grouped (_grouped_decode)
grouped_decode_attention = functools.partial(sdpa_gqa_attention, grouped_decode=True)


@functools.cache
def grouped_decode() -> str:
    """The name to pass as `attn_implementation` for `grouped_decode_attention` (registered once, by name)."""
    return _registered(GROUPED_DECODE, grouped_decode_attention)


class PackedLinear(nn.Module):
    """A bias-free or biased fp32 linear layer whose weight is prepacked once for oneDNN.

    On these CPUs the stock fp32 GEMM is slow for 1–16 rows, which is exactly the shape of
    decoding and verification. Packing the weight into oneDNN's blocked layout made a whole
    forward about 1.4× faster for one token and flattened the cost of verifying 4–8 tokens
    (see `python -m specviz probe --kernels aten` against the default). `weight` stays
    readable for code that needs the matrix itself (a tied LM head keeps sharing storage).
    """

    def __init__(self, linear: nn.Linear, keep_weight: bool) -> None:
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        w = linear.weight.detach()
        self.register_buffer("packed", torch.ops.mkldnn._reorder_linear_weight(w, None), persistent=False)
        self.bias = linear.bias
        self.weight = linear.weight if keep_weight else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., in] → [..., out] through the packed weight."""
        shape = x.shape
        y = torch.ops.mkldnn._linear_pointwise(x.reshape(-1, shape[-1]), self.packed, self.bias, "none", [], "")
        return y.view(*shape[:-1], self.out_features)


def can_pack(device: torch.device, dtype: torch.dtype) -> bool:
    """oneDNN prepacking applies on a CPU build with mkldnn, to fp32, and to bf16 where the CPU has bf16 units."""
    if device.type != "cpu" or not torch.backends.mkldnn.is_available():
        return False
    if not hasattr(torch.ops.mkldnn, "_linear_pointwise"):
        return False
    if dtype == torch.bfloat16:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return dtype == torch.float32


def pack_module(module: nn.Module) -> int:
    """Swap every nn.Linear inside `module` for a PackedLinear (dense weights dropped); return how many."""
    n = 0
    for parent in list(module.modules()):
        for name, child in list(parent.named_children()):
            if type(child) is nn.Linear:
                setattr(parent, name, PackedLinear(child, keep_weight=False))
                n += 1
    return n


def pack_linears(hf: Any) -> int:
    """Swap every decoder-layer linear and the LM head for a PackedLinear; return how many.

    The module tree, the config and the forward code stay transformers' own; only the kernel
    behind each projection changes, for plain decoding and every method alike.
    """
    n = sum(pack_module(layer) for layer in hf.model.layers)
    head = hf.get_output_embeddings()
    if type(head) is nn.Linear:
        hf.set_output_embeddings(PackedLinear(head, keep_weight=True))
        n += 1
    return n


def cpu_isa() -> str:
    """The vector ISA torch's own kernels run here ('AVX512', 'AVX2', 'DEFAULT', …): what the CPU has, lowered by
    ATEN_CPU_CAPABILITY where it is set (with ONEDNN_MAX_CPU_ISA=AVX2 it makes an avx512 machine run as an AVX2 one)."""
    return str(torch.backends.cpu.get_cpu_capability())


def bf16_native(device: torch.device) -> bool:
    """Whether `device` computes bf16 in hardware: a GPU that supports it, or a CPU whose kernels run avx512 with
    avx512_bf16 or AMX units that oneDNN will use. Read from the device, never guessed from its name; where bf16
    is emulated (an AVX2 CPU, or avx512 without bf16 units) a bf16 matmul is slower than an fp32 one."""
    if device.type == "cuda":
        return bool(torch.cuda.is_bf16_supported())
    if device.type != "cpu" or not cpu_isa().startswith("AVX512") or not can_pack(device, torch.bfloat16):
        return False
    return bool({"avx512_bf16", "amx_bf16"} & set(cpu_flags().split()))


def isa_note(device: torch.device) -> str:
    """'' where torch runs the CPU's own best kernels; 'avx2 kernels' where an avx512 CPU was told to run AVX2 ones
    (ATEN_CPU_CAPABILITY / ONEDNN_MAX_CPU_ISA): a measurement then belongs to the AVX2 kind, and says so."""
    if device.type != "cpu":
        return ""
    lowered = "avx512f" in cpu_flags().split() and not cpu_isa().startswith("AVX512")
    return f"{cpu_isa().lower()} kernels" if lowered else ""
