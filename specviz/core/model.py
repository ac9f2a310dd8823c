"""The target model for decoding: load it, and run one forward over a chain or a tree with a KV cache."""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from safetensors import SafetensorError
from torch import nn

from specviz.core.kernels import can_pack, gqa_attention, isa_note, pack_linears
from specviz.core.kv_cache import crop_to, growing_cache
from specviz.core.lean import KV, LeanLlama, supports
from specviz.core.model_files import DEFAULT_MODEL, ModelError, Progress, converted_dir, resolve

if TYPE_CHECKING:
    from transformers import Cache, DynamicCache

# what callers take from here: the loaded model and its forward API (the cache it runs on, cropping it)
__all__ = [
    "LoadedModel",
    "ModelError",
    "Resources",
    "crop_to",
    "growing_cache",
    "load_model",
    "pick_device",
    "pick_dtype",
    "quiet_transformers",
    "stock_attention",
]

T = TypeVar("T")


def pick_device(device: str = "auto") -> torch.device:
    """`cuda` when present, else the CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError("CUDA was asked for but no GPU is visible; use --device cpu.")
    return torch.device(device)


def pick_dtype(device: torch.device, dtype: str = "auto") -> torch.dtype:
    """fp32 on every device unless another dtype is asked for: the 135M model fits anywhere in fp32, and only
    there does a batched verify pass agree with one-token steps (in bf16, 5 of 13 greedy outputs diverged)."""
    names = {
        "float32": torch.float32,
        "fp32": torch.float32,
        "bfloat16": torch.bfloat16,
        "bf16": torch.bfloat16,
        "float16": torch.float16,
        "fp16": torch.float16,
    }
    if dtype != "auto":
        if dtype not in names:
            raise ModelError(f"Unknown dtype {dtype!r}; choose one of fp32, bf16, fp16.")
        return names[dtype]
    return torch.float32


def fused_layers(n_layers: int) -> tuple[int, ...]:
    """The layers whose inputs a fused-feature draft reads (forward_layers): low, middle, high = (2, n/2, n-3), as
    EAGLE-3's authors chose ((2, 15, 27) on SmolLM2's 30); a model under 6 layers: (0, n/2, n-1)."""
    if n_layers >= 6:
        return (2, n_layers // 2, n_layers - 3)
    return (0, n_layers // 2, max(0, n_layers - 1))


class Resources:
    """Objects derived from one loaded model (trained heads, packed copies), built once per key.

    Owned by its LoadedModel, so they live exactly as long as the model does: no module-level cache
    keyed by `id(model)` that could hand a new model an old model's heads. Keys are plain tuples.
    """

    def __init__(self) -> None:
        self._items: dict[tuple, object] = {}
        self._lock = threading.RLock()  # a build may itself ask for another resource

    def get(self, key: tuple, build: Callable[[], T]) -> T:
        """The object stored under `key`, built by `build()` on first use."""
        with self._lock:
            if key not in self._items:
                self._items[key] = build()
            return self._items[key]  # type: ignore[return-value]

    def clear(self) -> None:
        """Drop every stored object."""
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
        """How many objects are stored."""
        return len(self._items)


@dataclass
class LoadedModel:
    """The target model, its tokenizer and where it runs."""

    hf: Any  # a transformers causal LM (PreTrainedModel); its submodules (.model.layers) are only known at run time
    tokenizer: Any  # a transformers tokenizer (PreTrainedTokenizerBase)
    name: str
    device: torch.device
    dtype: torch.dtype
    kernels: str = "aten"  # "onednn" once pack_linears ran
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    resources: Resources = field(default_factory=Resources, repr=False)  # heads loaded for this model
    lean: LeanLlama | None = field(default=None, repr=False)  # the written-out forward (None: build it on first use)
    graphs: Any = field(default=None, repr=False)  # core.graphs.Graphs on a GPU once captured (None: eager)

    @property
    def eos_ids(self) -> set[int]:
        """Token ids that end a generation."""
        ids = set()
        for src in (self.hf.generation_config.eos_token_id, self.tokenizer.eos_token_id):
            if isinstance(src, int):
                ids.add(src)
            elif src:
                ids.update(src)
        return ids

    @property
    def lm_head(self) -> nn.Module:
        """The output projection; call it on hidden rows, or read `.weight` [V, H]."""
        return self.hf.get_output_embeddings()

    def describe(self) -> str:
        """Short label: name · device (the GPU's own name on CUDA) · dtype (· onednn when the CPU kernels are
        prepacked), e.g. 'SmolLM2 · cuda:0 · NVIDIA H200 · float32'."""
        where = self.device.type
        if where == "cuda":
            index = self.device.index or 0
            where = f"cuda:{index} · {torch.cuda.get_device_name(index)}"
        label = f"{self.name} · {where} · {str(self.dtype).removeprefix('torch.')}"
        label += " · onednn" if self.kernels == "onednn" else ""
        return label + (f" · {note}" if (note := isa_note(self.device)) else "")

    def precision_note(self) -> str:
        """'' in fp32 or fp64 (the default); otherwise one sentence that the reduced precision was asked for and
        that greedy output may then differ from plain decoding's."""
        if self.dtype in (torch.float32, torch.float64):
            return ""
        short = {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(self.dtype, str(self.dtype))
        return (
            f"{short}, as asked (the default is fp32): a batched verify pass may round differently from one-token "
            "steps, so greedy output is not guaranteed to equal plain decoding's."
        )

    def encode_prompt(self, prompt: str, chat: bool = True) -> list[int]:
        """Token ids of a user prompt, wrapped in the chat template when the tokenizer has one."""
        tok = self.tokenizer
        if chat and getattr(tok, "chat_template", None):
            ids = tok.apply_chat_template(
                [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True
            )
            if isinstance(ids, dict) or hasattr(ids, "input_ids"):
                ids = ids["input_ids"]
            return [int(i) for i in ids]
        return [int(i) for i in tok.encode(prompt)]

    def token_text(self, token_id: int) -> str:
        """The text of one token, as it would appear in the output."""
        return self.tokenizer.decode([token_id])

    def decode(self, ids: list[int]) -> str:
        """The text of generated ids, special tokens left out."""
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def uses_lean(self) -> bool:
        """Whether this model decodes through core.lean's forward (a Llama decoder it can run)."""
        return supports(self.hf)

    def lean_forward(self) -> LeanLlama:
        """The written-out forward, built on first use (load_model builds it before the CPU's prepacking)."""
        if self.lean is None or self.lean.source is not self.hf:  # a copy with other weights builds its own
            self.lean = LeanLlama(self.hf)
        return self.lean

    def new_cache(self) -> KV | DynamicCache:
        """An empty KV cache for this model: core.lean's KV when it decodes through that forward, else a transformers
        cache that appends in place (kv_cache.GrowingLayer)."""
        if self.uses_lean():
            return self.lean_forward().new_cache()
        return growing_cache(self.hf.config)

    def run_cache(self) -> KV | DynamicCache:
        """The cache a generation decodes on: on a GPU with captured forwards (core.graphs), the captured cache,
        taken over from whichever run held it (runs on one model take its lock, one at a time); else a new one."""
        if self.graphs is not None and self.graphs.lean is self.lean_forward():
            return self.graphs.claim()
        return self.new_cache()

    @torch.inference_mode()
    def forward(
        self,
        ids: list[int] | torch.Tensor,
        cache: Cache | KV,
        positions: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        logits_for: slice | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run new tokens through the model with a KV cache; return (logits [k, V], hidden [k, H]).

        `mask` is an additive float mask over the new tokens only, [k, k] (0 = may attend); the
        prefix in the cache is always visible. `positions` are absolute position ids [k].
        """
        logits, hidden, _ = self.forward_layers(ids, cache, (), positions, mask, logits_for)
        return logits, hidden

    def _model_inputs(
        self,
        ids: list[int] | torch.Tensor,
        cache: Cache | KV,
        positions: torch.Tensor | None,
        mask: torch.Tensor | None,
    ) -> dict[str, Any]:
        """The decoder's keyword arguments for new tokens on top of `cache` (see forward)."""
        x = torch.as_tensor(ids, dtype=torch.long, device=self.device).view(1, -1)
        k = x.shape[1]
        past = cache.get_seq_length()
        if positions is None:
            positions = torch.arange(past, past + k, device=self.device)
        full = None
        if mask is not None:
            full = torch.zeros(1, 1, k, past + k, dtype=self.dtype, device=self.device)
            full[0, 0, :, past:] = mask.to(device=self.device, dtype=self.dtype)
        return {
            "input_ids": x,
            "position_ids": positions.view(1, -1).to(self.device),
            "attention_mask": full,
            "cache": cache,
        }

    @torch.inference_mode()
    def forward_layers(
        self,
        ids: list[int] | torch.Tensor,
        cache: Cache | KV,
        layers: tuple[int, ...],
        positions: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        logits_for: slice | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """forward, plus the residual stream entering each decoder layer in `layers` (EAGLE-3's fused input).

        Returns (logits, hidden, fused [k, len(layers)·H]); fused holds transformers' hidden_states[i] for
        each i in `layers` (the input of decoder layer i, before its norm), side by side in that order. With no
        layers the decoder keeps no hidden states (as `forward`) and fused is [k, 0].
        """
        if isinstance(cache, KV):
            return self._lean(ids, cache, layers, positions, mask, logits_for)
        inputs = self._model_inputs(ids, cache, positions, mask)
        out = self.hf.model(**inputs, use_cache=True, output_hidden_states=bool(layers))
        hidden = out.last_hidden_state[0]  # [k, H], post final norm
        fused = torch.cat([out.hidden_states[i][0] for i in layers], dim=-1) if layers else hidden[:, :0]
        rows = hidden if logits_for is None else hidden[logits_for]
        return self.lm_head(rows).float(), hidden, fused

    def _lean(
        self,
        ids: list[int] | torch.Tensor,
        cache: KV,
        layers: tuple[int, ...],
        positions: torch.Tensor | None,
        mask: torch.Tensor | None,
        logits_for: slice | None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """forward_layers through core.lean on a KV cache: lengths are Python integers, nothing is read back."""
        if any(not 0 <= i < self.hf.config.num_hidden_layers for i in layers):
            raise ValueError(f"layers {layers} are not all decoder layers of this model.")
        past, q = cache.length, len(ids)
        if self.graphs is not None and self.graphs.fits(cache, q, layers):  # a captured forward on a GPU
            got = self.graphs.forward(ids, past, positions, mask, layers)
            if got is not None:
                logits, hidden, fused = got
                cache.length = past + q
                return (logits if logits_for is None else logits[logits_for]), hidden, fused
        cache.reserve(past + q)
        x = to_device(ids, self.device, torch.long)
        pos = (
            torch.arange(past, past + q, device=self.device)
            if positions is None
            else to_device(positions, self.device, torch.long)
        )
        full = None
        if mask is not None:  # over the new tokens only: the prefix is visible to every one
            full = torch.nn.functional.pad(to_device(mask, self.device, self.dtype), (past, 0))
        hidden, fused = self.lean_forward()(x, cache, past, pos, full, layers)
        cache.length = past + q
        rows = hidden if logits_for is None else hidden[logits_for]
        return self.lm_head(rows).float(), hidden, fused

    def neg_inf(self) -> float:
        """The most negative number of the model's dtype: an additive mask's 'may not attend'."""
        return torch.finfo(self.dtype).min


def to_device(x: list[int] | torch.Tensor, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """x as a tensor of `dtype` on `device` (a tensor already there as it is). The eager path's copies from the host
    are plain ones: a pinned buffer freed while its copy is still queued can be handed out again and overwritten
    (seen on an H200); the captured forward stages its inputs in buffers it keeps (core.graphs)."""
    if isinstance(x, torch.Tensor):
        return x.to(device=device, dtype=dtype)
    return torch.tensor(x, dtype=dtype, device=device)


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' warnings and progress bars off for one block, then restored as they were."""
    from transformers.utils import logging as hf_logging

    level, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def stock_attention(lm: LoadedModel) -> Iterator[None]:
    """For one block, the model runs transformers' own `sdpa` (a peer measured as it ships), then ours again."""
    before = lm.hf.config._attn_implementation
    lm.hf.set_attn_implementation("sdpa")
    try:
        yield
    finally:
        lm.hf.set_attn_implementation(before)


def load_model(
    spec: str = "default", device: str = "auto", dtype: str = "auto", progress: Progress = print, kernels: str = "auto"
) -> LoadedModel:
    """Load a model for decoding; raise ModelError with one actionable sentence on failure."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dev = pick_device(device)
    dt = pick_dtype(dev, dtype)
    where = resolve(spec, progress)
    try:
        with quiet_transformers():
            hf: Any = AutoModelForCausalLM.from_pretrained(where, dtype=dt, attn_implementation=gqa_attention())
            tok = AutoTokenizer.from_pretrained(where)
    except (OSError, ValueError, json.JSONDecodeError, SafetensorError) as exc:  # a file cut short: SafetensorError
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = f"delete {converted_dir()} and retry" if where == converted_dir() else "check the name"
        raise ModelError(f"Could not load model {spec!r} ({first[:160]}); {hint}.") from exc
    hf.to(dev).eval()
    hf.requires_grad_(False)
    # the written-out forward reads the dense weights, so it is built before the CPU's prepacking drops them
    lean = LeanLlama(hf, pack=kernels_wanted(kernels) != "aten" and dt == torch.float32) if supports(hf) else None
    name = DEFAULT_MODEL if where == converted_dir() else str(spec)
    kernels = kernels_wanted(kernels)
    used = "aten"
    # The target packs in fp32 only (the CPU default, for bit-stable greedy): a bf16 target ran no
    # faster packed on these 2 cores (40 ms per token against 39 ms for fp32 packed).
    if kernels != "aten" and dt == torch.float32 and can_pack(dev, dt):
        pack_linears(hf)
        used = "onednn"
    elif kernels == "onednn":
        raise ModelError("oneDNN kernels need fp32 on a CPU build of torch with mkldnn.")
    lm = LoadedModel(hf=hf, tokenizer=tok, name=name, device=dev, dtype=dt, kernels=used, lean=lean)
    # captured forwards are asked for (SPECVIZ_GRAPHS=1) until a GPU run has held them (docs/gpu/2026-12-04-h200.md)
    if dev.type == "cuda" and lean is not None and os.environ.get("SPECVIZ_GRAPHS", "0") == "1":
        from specviz.core.graphs import Graphs

        lm.graphs = Graphs(lm)
    return lm


def kernels_wanted(kernels: str) -> str:
    """auto, aten or onednn: an explicit argument (the CLI's --kernels) wins over SPECVIZ_KERNELS."""
    if kernels == "auto":
        kernels = os.environ.get("SPECVIZ_KERNELS", "auto")
    if kernels not in ("auto", "aten", "onednn"):
        raise ModelError(f"Unknown kernels {kernels!r}; choose auto, aten or onednn.")
    return kernels
