"""Prompts: checking one from the user, reading prompt sets (plain or MT-bench / Spec-Bench JSONL), and the
prompt presets shipped with the app (by kind, each kind with a hint of which methods tend to win on it)."""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from specviz.core.model import LoadedModel
from specviz.core.paths import PROMPT_KINDS, PROMPT_PRESETS
from specviz.core.sampling import ConfigError
from specviz.core.trace import TraceError

MAX_PROMPT_TOKENS = 2048  # a CPU prefill of more takes seconds per run and says nothing new
MAX_PROMPT_CHARS = 16 * MAX_PROMPT_TOKENS  # checked before tokenising: no token of this vocabulary is longer
MAX_SET = 64  # prompts of a visitor's prompt set: one click benchmarks them all, holding the model's lock


class PromptError(ValueError):
    """A prompt or prompt file that cannot be used; the message says why."""


@dataclass(frozen=True)
class PromptItem:
    """One prompt of a set, with its Spec-Bench category when it has one."""

    text: str
    category: str = "prompt"
    id: str = ""
    title: str = ""


def prepare(lm: LoadedModel, text: str, chat: bool = True) -> list[int]:
    """Token ids of a user prompt, refusing empty and oversized prompts."""
    if not isinstance(text, str) or not text.strip():
        raise PromptError("The prompt is empty; type something for the model to answer.")
    if len(text) > MAX_PROMPT_CHARS:
        raise PromptError(f"The prompt is {len(text)} characters long; the limit is {MAX_PROMPT_CHARS}: shorten it.")
    ids = lm.encode_prompt(text, chat=chat)
    if len(ids) > MAX_PROMPT_TOKENS:
        raise PromptError(f"The prompt is {len(ids)} tokens long; the limit here is {MAX_PROMPT_TOKENS}. Shorten it.")
    return ids


def context_length(lm: LoadedModel) -> int | None:
    """The positions the model was trained for (None when its config does not say)."""
    n = getattr(lm.hf.config, "max_position_embeddings", None)
    return int(n) if isinstance(n, int) and n > 0 else None


def check_context(lm: LoadedModel, prompt_len: int, max_new_tokens: int) -> None:
    """ConfigError unless a prompt of prompt_len tokens and max_new_tokens more fit the model's context."""
    n = context_length(lm)
    if n is not None and prompt_len + max_new_tokens > n:
        raise ConfigError(
            f"max_new_tokens {max_new_tokens} after a prompt of {prompt_len} tokens exceeds the model's context "
            f"of {n} tokens; ask for at most {max(0, n - prompt_len)}."
        )


def check_ids(lm: LoadedModel, ids: list[int], room: int = 0) -> None:
    """TraceError unless ids (from a file) are token ids of this model that, with `room` more, fit its context:
    what must hold before the model runs on them (an id past the vocabulary is a device-side assert on CUDA)."""
    vocab = int(lm.lm_head.get_parameter("weight").shape[0])
    bad = next((i for i in ids if not (isinstance(i, int) and 0 <= i < vocab)), None)
    if bad is not None:
        raise TraceError(f"The trace holds the token id {bad!r}, which this model's vocabulary of {vocab} lacks.")
    n = context_length(lm)
    if n is not None and len(ids) + room > n:
        raise TraceError(f"The trace's {len(ids)} tokens do not fit this model's context of {n}.")


def _item(obj: object, line_no: int) -> PromptItem:
    def label(key: str, default: object) -> str:  # a name from the file: text, short, never str() of a deep value
        value = obj.get(key, default) if isinstance(obj, dict) else default
        return str(value)[:80] if isinstance(value, (str, int)) and not isinstance(value, bool) else str(default)

    if isinstance(obj, dict) and isinstance(obj.get("prompt"), str):
        return PromptItem(obj["prompt"], label("category", "prompt"), label("id", line_no), label("title", ""))
    turns = obj.get("turns") if isinstance(obj, dict) else None
    if isinstance(turns, list) and turns and isinstance(turns[0], str):
        return PromptItem(turns[0], label("category", "prompt"), label("question_id", line_no))
    raise PromptError(f"Line {line_no} has neither a 'prompt' string nor a 'turns' list starting with one.")


def parse_prompt_lines(text: str, most: int | None = None) -> list[PromptItem]:
    """Prompt items from JSONL text: {"prompt": …} or {"turns": [first, …], "category": …} per line; a set of more
    than `most` prompts (a visitor's: MAX_SET) is refused before its lines are parsed further."""
    items = []
    for no, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if most is not None and len(items) >= most:
            raise PromptError(f"The prompt set holds more than {most} prompts, the most one run may benchmark.")
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):  # JSONDecodeError, an integer of too many digits, deep nesting
            raise PromptError(f"Line {no} is not valid JSON.") from None
        items.append(_item(obj, no))
    if not items:
        raise PromptError("The prompt file has no prompts.")
    return items


def read_prompts(path: str | Path) -> list[PromptItem]:
    """Read a prompt file; PromptError with one sentence when it is missing or malformed."""
    p = Path(path)
    if not p.is_file():
        raise PromptError(f"Prompt file {p} does not exist.")
    try:
        return parse_prompt_lines(p.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise PromptError(f"Prompt file {p} is not UTF-8 text.") from None


def select(items: list[PromptItem], limit: int | None = None, per_category: int | None = None) -> list[PromptItem]:
    """The first `per_category` of each category (in file order), then the first `limit` of those."""
    if per_category:
        seen: dict[str, int] = defaultdict(int)
        kept = []
        for it in items:
            if seen[it.category] < per_category:
                seen[it.category] += 1
                kept.append(it)
        items = kept
    return items[:limit] if limit else items


@dataclass(frozen=True)
class Kind:
    """A kind of prompt shipped with the app, and which methods tend to win on it and why."""

    name: str
    label: str
    hint: str


def preset_prompts() -> list[PromptItem]:
    """The prompts shipped with the app (specviz/data/prompts.jsonl), in file order; never for training heads."""
    return read_prompts(PROMPT_PRESETS)


def prompt_kinds() -> dict[str, Kind]:
    """Each shipped kind of prompt by name, in display order, with its one-line hint."""
    try:
        raw = json.loads(PROMPT_KINDS.read_text(encoding="utf-8"))["kinds"]
        return {name: Kind(name, str(k["label"]), str(k["hint"])) for name, k in raw.items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise PromptError(f"The prompt kinds file {PROMPT_KINDS} could not be read ({exc}).") from None
