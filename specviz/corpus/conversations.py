"""Conversations as the corpus makes and reads them: one being answered by the target (corpus.answers), the chat
template turn by turn, and a templated conversation's mask of assistant-written tokens (corpus.features)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

from specviz.corpus.sharegpt import human_turns
from specviz.corpus.store import ROLE_CONTEXT, ROLE_GREEDY, ROLE_SAMPLED


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
