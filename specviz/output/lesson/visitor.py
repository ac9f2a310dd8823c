"""What a visitor types, shown back or used as a name: escaped for markdown, kept inside the shipped lessons, and
the Model box's model bounded by the server's free memory.

The app renders messages as markdown, so a file name, a `?lesson=` value or a trace's method name that holds
`**`, `[text](url)` or `<b>` must be escaped before it is shown inside the app's own boxes. A lesson path typed
on a shared server must never reach the filesystem outside the shipped lessons' folder: it is only ever looked up
among the names of the lesson files that folder holds.
"""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

from huggingface_hub.constants import HF_HUB_CACHE

from specviz.core.model import LoadedModel
from specviz.core.model_files import DEFAULT_MODEL, ModelError, check_config, hub_config
from specviz.core.paths import MODELS, inside
from specviz.core.schema import SchemaError, read_json
from specviz.output.lesson.model import LESSON_FILE

LESSONS = LESSON_FILE.parent  # the shipped lessons' folder: its *.toml files are the lessons a visitor may name
MAX_SHOWN = 80  # characters of a visitor's text shown back
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()<>#|~$:])|^([-+]|\d+\.)")  # inline marks; a list's at the start


def escaped(text: object, limit: int = MAX_SHOWN) -> str:
    """`text` cut to `limit` characters (control characters dropped) with every markdown character escaped."""
    shown = "".join(c for c in str(text) if c.isprintable())
    shown = shown if len(shown) <= limit else shown[: limit - 1] + "…"
    return _MARKDOWN.sub(lambda m: m.group(0)[:-1] + "\\" + m.group(0)[-1], shown)  # "12." -> "12\."


def shipped_lessons() -> dict[str, Path]:
    """The shipped lessons by file name (lesson.toml and any other *.toml beside it)."""
    return {p.name: p for p in sorted(LESSONS.glob("*.toml")) if p.is_file() and not p.is_symlink()}


def lesson_file(typed: str) -> Path:
    """The shipped lesson a visitor's text names (its file name, or that name under the folder's path); ValueError
    with one sentence for anything else. The text is only compared with the shipped names: it never opens a file."""
    name = str(typed).strip()
    for prefix in (f"{LESSONS.relative_to(LESSONS.parents[2]).as_posix()}/", "./"):  # specviz/output/lesson/lesson.toml
        name = name.removeprefix(prefix)
    lessons = shipped_lessons()
    if name in lessons:
        return lessons[name]
    names = ", ".join(lessons) or "none"
    raise ValueError(f"'{escaped(typed, 60)}' is not a lesson shipped with the app (there are: {names}).")


# The Model box: 'default', a folder under models/ or a hub id; one visitor's model loading at a time.
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")
NEUTRAL = "That model is neither a folder under models/ nor a hub id like 'org/name' (or 'default'): none else loads."
_LOADING = threading.Lock()  # two visitors' models loading at once were both held in memory


def model_source(spec: str) -> Path | str:
    """What a visitor's Model box names: 'default', a folder under models/ (its path) or a hub id; ModelError with one
    neutral sentence for anything else, the same whether or not such a path exists on the server."""
    spec = str(spec).strip()
    if spec in ("", "default", DEFAULT_MODEL):
        return "default"
    if spec.startswith(f"{MODELS.name}/") and ".." not in Path(spec).parts and inside(MODELS.parent / spec, MODELS):
        return MODELS.parent / spec
    if HUB_ID.fullmatch(spec) and not spec.startswith(f"{MODELS.name}/") and ".." not in spec:
        return spec
    raise ModelError(NEUTRAL)


def available_memory() -> int | None:
    """Bytes of memory the kernel says a new allocation can have now (MemAvailable), None where unknown."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def memory_problem(params: int, free: int | None, bytes_per: int = 4) -> str | None:
    """Why a model of `params` parameters (fp32: 4 bytes each, a quarter more while loading) does not fit `free`."""
    need = params * bytes_per * 5 // 4 + (1 << 29)
    if free is None or need <= free:
        return None
    return f"about {need / 2**30:.1f} GiB of memory to load, and this server has {free / 2**30:.1f} GiB free now"


def visitor_model(spec: str, load: Callable[[str], LoadedModel]) -> LoadedModel:
    """The Model box's model, loaded by `load`: checked by model_source, its size estimated from its config against
    the free memory before any weights are read, one at a time, and a hub download removed once it is in memory."""
    source = model_source(spec)
    if source == "default":
        return load("default")
    if not _LOADING.acquire(blocking=False):
        raise ModelError("Another visitor's model is loading on this server; try again in a minute.")
    download = Path(HF_HUB_CACHE) / f"models--{source.replace('/', '--')}" if isinstance(source, str) else None
    fresh = download is not None and not download.exists()
    try:
        if isinstance(source, str):
            cfg = hub_config(source)
        else:
            try:
                cfg = read_json(source / "config.json", 1 << 20, "a model config")
            except SchemaError as exc:
                raise ModelError(f"Could not read that model's config ({str(exc).rstrip('.')}).") from None
        if why := memory_problem(check_config(spec, cfg), available_memory()):
            raise ModelError(f"That model needs {why}.")
        return load(str(source))
    finally:
        _LOADING.release()
        if fresh and download is not None:  # the weights are in memory now: the server's disk keeps no visitor's model
            shutil.rmtree(download, ignore_errors=True)
