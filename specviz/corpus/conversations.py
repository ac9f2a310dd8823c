"""ShareGPT's conversations as training reads them: chat messages with ShareGPT's own answers (training.features),
or the human turns that a corpus shard has the target answer (training.corpus), with the template turn by turn."""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

from specviz.core.paths import PROMPT_PRESETS
from specviz.training.corpus_files import ROLE_CONTEXT, ROLE_GREEDY, ROLE_SAMPLED
from specviz.training.distill import spec_bench_turns

ROLES = {"human": "user", "gpt": "assistant", "chatgpt": "assistant", "bard": "assistant", "user": "user"}


@dataclass
class Conversation:
    """One conversation being answered: its ids so far, who wrote each, and the human turns left."""

    source: int
    human: list[str]
    greedy: bool
    ids: list[int] = field(default_factory=list)
    role: list[int] = field(default_factory=list)
    answered: int = 0
    open: bool = True

    def add_answer(self, new: list[int], answer: list[int], ended: bool) -> None:
        """Append a turn's new ids (template and user text) and the target's answer; an answer that did not
        end (cut at the length limit) closes the conversation, which cannot go on from half an answer."""
        self.ids += new + answer
        self.role += [ROLE_CONTEXT] * len(new) + [ROLE_GREEDY if self.greedy else ROLE_SAMPLED] * len(answer)
        self.answered += 1
        self.open = self.open and ended


def _mostly_ascii(text: str) -> bool:
    return sum(c.isascii() for c in text) >= 0.95 * len(text)


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


def shard_records(n_records: int, k: int, seed: int = 0, shard: int = 256) -> list[int]:
    """The ShareGPT record indices of shard k (a seeded permutation of all records cut into SHARD slices)."""
    order = list(range(n_records))
    random.Random(seed).shuffle(order)
    return sorted(order[k * shard : (k + 1) * shard])


class Turns:
    """The chat template, turn by turn: the ids that open a conversation and the ids of each next user turn."""

    HISTORY = ({"role": "user", "content": "x"}, {"role": "assistant", "content": "y"})  # a stand-in first exchange

    def __init__(self, tokenizer: Any) -> None:
        self.tok = tokenizer
        # a templated [x, y, next] is first(x) + y + <end of turn> + the next turn's ids: skip that prefix (an
        # answer carries its own end token)
        y = tokenizer.encode("y", add_special_tokens=False)
        self.skip = len(self.first("x")) + len(y) + 1

    def first(self, text: str) -> list[int]:
        """The opening ids (system prompt, the user's turn, the assistant's header)."""
        return _templated(self.tok, [{"role": "user", "content": text}], add_generation_prompt=True)

    def next(self, text: str) -> list[int]:
        """What follows an answer that ended with its end-of-turn token: the next user turn and the header."""
        msgs = [*self.HISTORY, {"role": "user", "content": text}]
        return _templated(self.tok, msgs, add_generation_prompt=True)[self.skip :]


def conversations_of(
    records: dict[int, dict], banned: set[str], k: int, seed: int, greedy_share: float, heldout_every: int
) -> list[Conversation]:
    """The usable conversations of shard k, each marked greedy or sampled by a seeded draw."""
    rng = random.Random(f"{seed}:{k}")
    out = []
    for idx in sorted(records):
        greedy = rng.random() < greedy_share
        if idx % heldout_every == heldout_every - 1:
            continue
        human = human_turns(records[idx], banned)
        if human:
            out.append(Conversation(source=idx, human=human, greedy=greedy))
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
    if sum(c.isascii() for m in msgs for c in m["content"]) < 0.95 * sum(len(m["content"]) for m in msgs):
        return None
    return msgs


def _templated(tokenizer: Any, msgs: list[dict], add_generation_prompt: bool = False) -> list[int]:
    """Token ids of the chat-templated messages."""
    out = tokenizer.apply_chat_template(msgs, add_generation_prompt=add_generation_prompt, tokenize=True)
    if isinstance(out, dict) or hasattr(out, "input_ids"):
        out = out["input_ids"]
    return [int(t) for t in out]


def template_ids(tokenizer: Any, msgs: list[dict], max_tokens: int) -> tuple[list[int], list[bool]]:
    """Token ids of the templated conversation and a mask that is True on assistant-written tokens."""
    ids: list[int] = []
    mask: list[bool] = []
    for n in range(1, len(msgs) + 1):
        full = _templated(tokenizer, msgs[:n])
        if full[: len(ids)] != ids:  # the template is not prefix-stable here: stop at what we have
            break
        new = full[len(ids) :]
        if msgs[n - 1]["role"] == "assistant":
            # the turn's header ("<|im_start|>assistant\n") is template, not the assistant's writing
            head = len(_templated(tokenizer, msgs[: n - 1], add_generation_prompt=True)) - len(ids)
            mask.extend([False] * head + [True] * (len(new) - head))
        else:
            mask.extend([False] * len(new))
        ids = full
        if len(ids) >= max_tokens:
            break
    return ids[:max_tokens], mask[:max_tokens]
