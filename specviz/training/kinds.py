"""The head kinds `python -m specviz train KIND` knows, derived from the method cards: every card's `head` names a
kind, whose trainer is the Trainer in `specviz/training/<kind>_train.py` with that `kind`. Adding one is its head
module in specviz.heads, that trainer file (a frozen dataclass of its settings with its batches and its loss;
training.trainer says what else) and the card's `head`; no list here."""

from __future__ import annotations

import importlib

from specviz import methods
from specviz.training.trainer import Trainer


def _trainer(kind: str) -> type[Trainer]:
    module = importlib.import_module(f"specviz.training.{kind}_train")
    found = [  # Trainer is a protocol: a trainer is a class of this module that says its kind
        v
        for v in vars(module).values()
        if isinstance(v, type) and v.__module__ == module.__name__ and getattr(v, "kind", None) == kind
    ]
    if len(found) != 1:
        raise ImportError(f"specviz.training.{kind}_train defines {len(found)} trainers of kind {kind!r}, not one.")
    return found[0]


# in the cards' order, each kind once (the hybrid reads EAGLE-2's head)
TRAINERS: dict[str, type[Trainer]] = {k: _trainer(k) for k in dict.fromkeys(c.head for c in methods.cards() if c.head)}
