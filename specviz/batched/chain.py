"""Batched chain methods: plain decoding (no drafts) and prompt lookup (each row copies its own n-gram match).

A step verifies, per row, the root followed by that row's drafts: one forward over a block as wide as the
longest chain, the shorter rows padded (masked). Greedy acceptance is the one-row rule, per row:
the drafts up to the first one the target disagrees with (acceptance.greedy_match), then the target's
own pick as the next root. Prompt lookup's match (find_match), its running acceptance evidence and its
length rule (best_length) are the single-row method's own functions, one Evidence per request.
"""

from __future__ import annotations

import torch

from specviz.acceptance import greedy_match
from specviz.batched.loop import PAD, BatchRun, Row, RowOut
from specviz.drafting import verify_latency
from specviz.methods import prompt_lookup
from specviz.methods.prompt_lookup import Evidence, best_length, find_match


class Chain:
    """A batched chain step; the drafts come from `propose` (none: plain decoding)."""

    def __init__(self, pld: prompt_lookup.Config | None = None) -> None:
        self.pld = pld  # None = plain decoding
        self.evidence: dict[int, Evidence] = {}  # per request index

    def start(self, run: BatchRun, ids: torch.Tensor, hidden: torch.Tensor, live: torch.Tensor) -> None:
        """A chain keeps no state beyond the target cache, except prompt lookup's per-request evidence."""
        if self.pld is not None:
            self.evidence = {r.index: Evidence(self.pld) for r in run.rows}

    def select(self, keep: list[int]) -> None:
        """Nothing per batch position to drop (the evidence is keyed by request)."""

    def propose(self, run: BatchRun, row: Row) -> tuple[list[int], int]:
        """The row's copied draft after its root and the n-gram length that found it (([], 0): no match)."""
        cfg = self.pld
        if cfg is None:
            return [], 0
        seq = [*row.context, row.root]
        n, start = find_match(seq, cfg.max_ngram, cfg.min_ngram)
        if not n:
            return [], 0
        available = min(len(seq) - start, row.remaining - 1)
        curve = verify_latency(run.lm) if cfg.adaptive else None
        if curve is None:
            k = min(available, cfg.max_draft)
        else:  # m tokens in each of B rows: the measured cost of B·m new tokens over B of them
            b = len(run.active)
            rate = self.evidence[row.index].rate(n)
            k = best_length(rate, available, cfg.max_draft, lambda m: curve.relative(b * m) / curve.relative(b))
        return seq[start : start + k], n

    def step(self, run: BatchRun) -> list[RowOut]:
        """propose (per row) → verify (one forward, the block as wide as the longest chain) → accept → commit."""
        rows = run.active
        found = [self.propose(run, row) for row in rows]
        drafts = [d for d, _ in found]
        width = 1 + max(len(d) for d in drafts)
        ids = [[row.root, *d] + [PAD] * (width - 1 - len(d)) for row, d in zip(rows, drafts, strict=True)]
        sizes = torch.tensor([1 + len(d) for d in drafts])
        live = torch.arange(width)[None, :] < sizes[:, None]
        see = torch.ones(width, width, dtype=torch.bool).tril().expand(len(rows), width, width)
        start = run.cache.slots
        positions = run.cache.lengths().cpu()[:, None] + torch.arange(width)[None, :]
        picks, hidden = run.verify(ids, positions, see, live)
        picked = picks.tolist()  # [B, width]
        outs, paths = [], []
        for b, (row, (d, ngram)) in enumerate(zip(rows, found, strict=True)):
            n = greedy_match(d, picked[b][: len(d)])
            if self.pld is not None:  # every step, as the one-row method: the evidence decays even without a match
                self.evidence[row.index].update(ngram, len(d), n)
            outs.append(RowOut(d[:n], picked[b][n], hidden[b, n], 1 + len(d)))
            paths.append(list(range(n + 1)))
        run.cache.keep(start, paths)
        return outs
