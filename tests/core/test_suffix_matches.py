"""core.drafting.suffix_matches finds exactly the matches the old slice-by-slice scan found, in the same order."""

from __future__ import annotations

import random

from specviz.core.drafting import suffix_matches
from specviz.methods.pld import find_match
from specviz.trees.tree_graft import lookup_tails


def scan(seq: list[int], max_ngram: int, min_ngram: int) -> list[tuple[int, int]]:
    """The reference: every suffix n-gram's earlier occurrence, longest n first, most recent first."""
    out = []
    for n in range(min(max_ngram, len(seq) - 1), min_ngram - 1, -1):
        for i in range(len(seq) - n - 1, -1, -1):
            if seq[i : i + n] == seq[-n:]:
                out.append((n, i + n))
    return out


def test_same_matches_as_the_scan_on_random_sequences():
    rng = random.Random(0)
    for _ in range(400):
        seq = [rng.randrange(rng.choice((2, 4, 30))) for _ in range(rng.randrange(0, 60))]
        hi = rng.randrange(1, 5)
        lo = rng.randrange(1, hi + 1)
        assert list(suffix_matches(seq, hi, lo)) == scan(seq, hi, lo)
        assert find_match(seq, hi, lo) == (scan(seq, hi, lo) or [(0, -1)])[0]


def test_lookup_tails_keeps_distinct_recent_continuations():
    seq = [1, 2, 3, 9, 1, 2, 3, 8, 7, 5, 1, 2, 3]
    assert lookup_tails(seq, 3, 2, 2, 2) == [[8, 7], [9, 1]]
    assert lookup_tails([4], 3, 1, 4, 1) == []
