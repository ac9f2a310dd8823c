"""Lookahead's n-gram pool and its attention-mask layout (its candidates are judged as a tree: trees.walk.judge)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

Gram = tuple[int, ...]


class NgramPool:
    """N-grams keyed by their first token; at most `cap` (= G) per key, the least recently seen evicted.

    The update rule is the reference implementation's: an n-gram seen again moves to the back (most
    recent); a new one is appended; when a key already holds `cap` n-grams, its oldest is dropped.
    """

    def __init__(self, n: int, cap: int) -> None:
        if n < 2 or cap < 1:
            raise ValueError("An n-gram pool needs n >= 2 and a capacity of at least 1 per key.")
        self.n, self.cap = n, cap
        self.grams: dict[int, list[Gram]] = {}  # key -> tails (n - 1 tokens), oldest first
        self.hits: dict[Gram, int] = {}  # whole n-gram -> times it was accepted (>= 1 token matched)

    def __len__(self) -> int:
        return sum(len(v) for v in self.grams.values())

    def add(self, gram: Sequence[int]) -> str:
        """Insert one n-gram; return 'new', 'refreshed' (already there, moved to the back) or 'evicted'."""
        if len(gram) != self.n:
            raise ValueError(f"Expected a {self.n}-gram, got {len(gram)} tokens.")
        key, tail = int(gram[0]), tuple(int(t) for t in gram[1:])
        tails = self.grams.setdefault(key, [])
        if tail in tails:
            tails.remove(tail)
            tails.append(tail)
            return "refreshed"
        tails.append(tail)
        if len(tails) > self.cap:
            old = tails.pop(0)
            self.hits.pop((key, *old), None)
            return "evicted"
        return "new"

    def seed(self, ids: Sequence[int]) -> int:
        """Add every n-gram of a token sequence (the prompt); return how many were added."""
        for i in range(len(ids) - self.n + 1):
            self.add(ids[i : i + self.n])
        return max(0, len(ids) - self.n + 1)

    def candidates(self, key: int, g: int) -> list[list[int]]:
        """Up to g tails that follow `key`, most recent first."""
        return [list(t) for t in reversed(self.grams.get(int(key), []))][:g]

    def hit(self, key: int, tail: Sequence[int]) -> None:
        gram = (int(key), *(int(t) for t in tail))
        self.hits[gram] = self.hits.get(gram, 0) + 1

    def top(self, k: int, text) -> list[dict]:
        """The k keys holding most n-grams, as plain data: key, its text, and each tail with its hits."""
        keys = sorted(self.grams, key=lambda c: (-len(self.grams[c]), c))[:k]
        return [
            {
                "key": c,
                "text": text(c),
                "grams": [
                    {"tail": list(t), "texts": [text(x) for x in t], "hits": self.hits.get((c, *t), 0)}
                    for t in reversed(self.grams[c])
                ],
            }
            for c in keys
        ]


@dataclass(frozen=True)
class Layout:
    """Where each branch sits in one lookahead forward: [root][levels × W][candidates × (N - 1)]."""

    levels: int  # rows of the window fed this step (N - 1 once it is full)
    width: int  # W
    cands: int  # candidate n-grams verified this step
    depth: int  # N - 1 tokens per candidate

    @property
    def size(self) -> int:
        return 1 + self.levels * self.width + self.cands * self.depth

    def slot(self, level: int, col: int) -> int:
        return 1 + level * self.width + col

    def cand_slot(self, c: int, j: int) -> int:
        return 1 + self.levels * self.width + c * self.depth + j

    def sources(self) -> list[tuple[int, list[int]]]:
        """For each new token: (position offset from the root, slots it attends to, itself included)."""
        out: list[tuple[int, list[int]]] = [(0, [0])]
        for lv in range(self.levels):
            for i in range(self.width):
                # level 0 is a causal chain; a deeper token sees level 0 up to its column, then its column
                chain = [self.slot(0, c) for c in range(i + 1)]
                seen = [0, *chain, *(self.slot(u, i) for u in range(1, lv + 1))]
                out.append((1 + i + lv, seen))
        for c in range(self.cands):
            for j in range(self.depth):
                out.append((1 + j, [0] + [self.cand_slot(c, u) for u in range(j + 1)]))
        return out

    def allowed(self) -> list[list[int]]:
        """The mask over the new tokens as 0/1 rows (1 = may attend); the cached prefix is always visible."""
        grid = [[0] * self.size for _ in range(self.size)]
        for row, (_pos, seen) in enumerate(self.sources()):
            for col in seen:
                grid[row][col] = 1
        return grid

    def positions(self, root_pos: int) -> list[int]:
        """Position ids: root at root_pos, level l column i at root_pos+1+i+l, candidate token j at +1+j."""
        return [root_pos + off for off, _ in self.sources()]

    def segments(self) -> list[dict]:
        """Labelled spans of the input, for the mask heatmap."""
        segs = [{"label": "root", "start": 0, "length": 1}]
        segs += [{"label": f"level {lv}", "start": self.slot(lv, 0), "length": self.width} for lv in range(self.levels)]
        segs += [
            {"label": f"candidate {c + 1}", "start": self.cand_slot(c, 0), "length": self.depth}
            for c in range(self.cands)
        ]
        return segs


def additive_mask(layout: Layout, neg_inf: float) -> torch.Tensor:
    """The float mask the model takes: 0 where attention is allowed, neg_inf where blocked; [k, k]."""
    allowed = torch.tensor(layout.allowed(), dtype=torch.bool)
    return torch.full(allowed.shape, neg_inf, dtype=torch.float64).masked_fill(allowed, 0.0)
