"""Batched chain methods: plain decoding (no drafts) and prompt lookup (each row copies its own n-gram match).

A step verifies, per row, the root followed by that row's drafts: one forward over a block as wide as the
longest chain, the shorter rows padded (masked). Greedy acceptance is the one-row rule, per row:
the drafts up to the first one the target disagrees with (acceptance.greedy_match), then the target's
own pick as the next root. Prompt lookup's match (find_match) and its running acceptance evidence are the
single-row method's own, one Evidence per request. Its length rule is a batch decision (core.draft_length's):
every row pays for the widest row's block, so one width is chosen for the batch from every row's evidence and
the measured cost of B·(w+1) new tokens; at B = 1 it is the one-row rule.
"""

from __future__ import annotations

import torch

from specviz.core.acceptance import greedy_match
from specviz.core.draft_length import best_width, forward_cost
from specviz.methods import pld
from specviz.methods.batched.loop import PAD, BatchRun, Row, RowOut
from specviz.methods.pld import Evidence, find_match


class Chain:
    """A batched chain step; the drafts come from `propose` (none: plain decoding)."""

    def __init__(self, cfg: object = None) -> None:
        self.pld = cfg if isinstance(cfg, pld.Config) else None  # None = plain decoding
        self.evidence: dict[int, Evidence] = {}  # per request index

    def start(self, run: BatchRun, ids: torch.Tensor, hidden: torch.Tensor, live: torch.Tensor) -> None:
        """A chain keeps no state beyond the target cache, except prompt lookup's per-request evidence."""
        if self.pld is not None:
            self.evidence = {r.index: Evidence(self.pld) for r in run.rows}

    def select(self, keep: list[int]) -> None:
        """Nothing per batch position to drop (the evidence is keyed by request)."""

    def match(self, row: Row) -> tuple[list[int], int]:
        """The row's copyable continuation after its root (at most its budget) and the n-gram length that found it."""
        cfg = self.pld
        if cfg is None:
            return [], 0
        seq = [*row.context, row.root]
        n, start = find_match(seq, cfg.max_ngram, cfg.min_ngram)
        if not n:
            return [], 0
        return seq[start : start + min(len(seq) - start, row.remaining - 1)], n

    def propose(self, run: BatchRun) -> tuple[list[list[int]], list[int]]:
        """Every row's copied draft and n-gram length; one draft width for the batch, from the measured costs."""
        found = [self.match(row) for row in run.active]
        cfg, ngrams = self.pld, [n for _, n in found]
        if cfg is None:
            return [[] for _ in found], ngrams
        curve = cfg.latency if cfg.adaptive else None
        if curve is None:
            return [c[: cfg.max_draft] for c, _ in found], ngrams
        rates = [self.evidence[r.index].rate(n) if n else 0.0 for r, n in zip(run.active, ngrams, strict=True)]
        w = best_width(rates, [len(c) for c, _ in found], cfg.max_draft, lambda m: forward_cost(curve, m))
        return [c[:w] for c, _ in found], ngrams

    def step(self, run: BatchRun) -> list[RowOut]:
        """propose (per row) → verify (one forward, the block as wide as the longest chain) → accept → commit."""
        rows = run.active
        drafts, ngrams = self.propose(run)
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
        for b, (row, d, ngram) in enumerate(zip(rows, drafts, ngrams, strict=True)):
            n = greedy_match(d, picked[b][: len(d)])
            if self.pld is not None:  # every step, as the one-row method: the evidence decays even without a match
                self.evidence[row.index].update(ngram, len(d), n)
            outs.append(RowOut(d[:n], picked[b][n], hidden[b, n], 1 + len(d)))
            paths.append(list(range(n + 1)))
        run.cache.keep(start, paths)
        return outs
