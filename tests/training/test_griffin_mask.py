"""GRIFFIN's token-alignment mask, checked on hand-built batches against its definition.

A depth-d draft at row i descends from the depth-e draft at row i-(d-e) (each depth's input is the depth above's
output one row back: eagle_loss.unrolled), so it counts only while every ancestor's true next token was in the
head's top-k. The 2026-12-03 A/B found the mask costing ~4 points; this pins that the rows it keeps are the right
ones, so the measurement is of the idea, not of an off-by-one.
"""

from __future__ import annotations

import itertools

import torch

from specviz.training.eagle_loss import aligned


def _by_definition(hits: list[torch.Tensor], d: int) -> torch.Tensor:
    """Rows alive at depth d: every ancestor (depth e < d, row i-(d-e)) exists and hit."""
    B, T = hits[0].shape
    out = torch.zeros(B, T, dtype=torch.bool)
    for b, i in itertools.product(range(B), range(T)):
        out[b, i] = all(i - (d - e) >= 0 and bool(hits[e - 1][b, i - (d - e)]) for e in range(1, d))
    return out


def test_the_mask_follows_each_drafts_chain_of_ancestors() -> None:
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        hits = [torch.rand(3, 9, generator=g) < 0.6 for _ in range(4)]
        alive = torch.ones(3, 9, dtype=torch.bool)
        for d in range(2, 5):
            alive = aligned(alive, hits[d - 2])
            assert torch.equal(alive, _by_definition(hits, d)), d


def test_a_hand_built_miss_drops_exactly_its_descendants() -> None:
    hit1 = torch.ones(1, 6, dtype=torch.bool)
    hit1[0, 2] = False  # depth 1 missed the token after position 2
    alive2 = aligned(torch.ones(1, 6, dtype=torch.bool), hit1)
    assert alive2.tolist() == [[False, True, True, False, True, True]]  # row 0 has no parent; row 3's parent missed
    alive3 = aligned(alive2, torch.ones(1, 6, dtype=torch.bool))
    assert alive3.tolist() == [[False, False, True, True, False, True]]  # the miss moves one row down per depth
