"""Batched EAGLE-2: every row grows its own dynamic tree, the draft head runs all rows at once, one verify.

The draft head keeps one SlotCache for the batch, as the target does. A step: (1) catch-up, one head
forward over each row's queued verified pairs plus (f, root); (2) depth - 1 expansion rounds, each one
head forward over every row's frontier, where a node sees its row's committed pairs, its expanded
ancestors and itself (what draft_tree.expand lets it see in a one-row cache, addressed here by slot);
(3) each row's rerank to a fixed total_tokens, so every row verifies the same number of nodes; (4) one
target forward over all trees (tree masks per row), greedy acceptance per row, commit per row, and the
head forgets the tree slots. The trees themselves are draft_tree's: DraftTree, add_children, the
frontier rule (trees.frontier, grow_dynamic's), keep_best and verified; acceptance is tree.greedy_accept_path.
"""

from __future__ import annotations

import torch

from specviz.core.model import LoadedModel
from specviz.core.sampling import ConfigError
from specviz.core.slot_cache import SlotCache
from specviz.heads.eagle import EagleHead
from specviz.heads.eagle_drafter import Drafter, head_dtype
from specviz.methods.batched.loop import PAD, BatchRun, Row, RowOut
from specviz.methods.eagle import Config
from specviz.trees.draft_tree import DraftTree, add_children
from specviz.trees.frontier import ancestors, frontier
from specviz.trees.tree import TreeSpec, greedy_accept_path


def tree_block(specs: list[TreeSpec], lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per row, a tree padded to the widest: (see [B, n, n] ancestry, live [B, n], positions [B, n])."""
    width = max(len(s) for s in specs)
    see = torch.zeros(len(specs), width, width, dtype=torch.bool)
    live = torch.zeros(len(specs), width, dtype=torch.bool)
    pos = torch.zeros(len(specs), width, dtype=torch.long)
    for b, (spec, n) in enumerate(zip(specs, lengths, strict=True)):
        m = len(spec)
        see[b, :m, :m], live[b, :m] = spec.ancestry(), True
        pos[b, :m] = spec.positions(n)
    return see, live, pos


class BatchEagle:
    """The batched EAGLE-2 step, with the head's shared cache and each row's queue of verified pairs."""

    def __init__(self, lm: LoadedModel, head: EagleHead, cfg: Config) -> None:
        if cfg.tree != "dynamic":
            raise ConfigError("Batched EAGLE grows the dynamic (EAGLE-2) tree only.")
        if cfg.min_tokens:
            raise ConfigError("Batched EAGLE keeps the fixed node budget; set min_tokens=0.")
        self.cfg = cfg
        self.dr = Drafter(head, lm, head_dtype(lm, cfg.head_dtype))  # the head in its draft dtype, projection, embed
        self.slots = SlotCache(head.new_cache(), 0, lm.device)
        self.queue: list[tuple[torch.Tensor, list[int]]] = []  # per batch position: true features [m, h], tokens

    def start(self, run: BatchRun, ids: torch.Tensor, hidden: torch.Tensor, live: torch.Tensor) -> None:
        """The head's own prefill over every prompt's pairs (f_j, x_{j+1}), left-padded as the target's."""
        b, width = ids.shape
        self.slots = SlotCache(self.dr.head.new_cache(), b, run.lm.device)
        self.queue = [(hidden.new_zeros(0, hidden.shape[-1]), []) for _ in range(b)]
        if width > 1:
            pad = width - live.sum(dim=1)
            pos = (torch.arange(width - 1)[None, :] - pad[:, None].cpu()).clamp_min(0)
            causal = torch.ones(width - 1, width - 1, dtype=torch.bool).tril().expand(b, width - 1, width - 1)
            self.run_head(hidden[:, :-1], ids[:, 1:], pos, causal, live[:, :-1])

    def select(self, keep: list[int]) -> None:
        self.slots.select(keep)
        self.queue = [self.queue[b] for b in keep]

    def run_head(
        self,
        feats: torch.Tensor,
        tokens: torch.Tensor,
        positions: torch.Tensor,
        see: torch.Tensor,
        live: torch.Tensor,
        prefix: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """One head forward over a block of pairs per row (see SlotCache.open) → predicted features [B, q, h]."""
        dr, dev = self.dr, self.dr.device
        mask = self.slots.open(see.to(dev), live.to(dev), dr.dtype, prefix)
        emb = dr.embed(tokens.to(dev)).to(dr.dtype)
        return dr.head(feats.to(dev, dr.dtype), emb, positions.to(dev), self.slots.cache, mask)

    def logp(self, out: torch.Tensor) -> torch.Tensor:
        """Draft log-probs [..., Vd] of predicted features [..., h]."""
        return torch.log_softmax(self.dr.project(out).float(), dim=-1)

    def catch_up(self, rows: list[Row]) -> tuple[torch.Tensor, torch.Tensor]:
        """Run each row's queued pairs plus (f, root) → its predicted next feature [B, h] and log-probs [B, Vd]."""
        feats = [torch.cat([f, row.feature[None].to(f.dtype)]) for (f, _), row in zip(self.queue, rows, strict=True)]
        toks = [[*t, row.root] for (_, t), row in zip(self.queue, rows, strict=True)]
        sizes = torch.tensor([len(t) for t in toks])
        m = int(sizes.max())
        block = torch.zeros(len(rows), m, feats[0].shape[-1], dtype=feats[0].dtype, device=feats[0].device)
        for b, f in enumerate(feats):
            block[b, : f.shape[0]] = f
        ids = torch.tensor([t + [PAD] * (m - len(t)) for t in toks])
        live = torch.arange(m)[None, :] < sizes[:, None]
        pos = self.slots.lengths().cpu()[:, None] + torch.arange(m)[None, :]
        causal = torch.ones(m, m, dtype=torch.bool).tril().expand(len(rows), m, m)
        out = self.run_head(block, ids, pos, causal, live)
        last = out[torch.arange(len(rows), device=out.device), (sizes - 1).to(out.device)]  # [B, h]
        self.queue = [(f[:0], []) for f, _ in self.queue]
        return last, self.logp(last)

    def expand(
        self,
        trees: list[DraftTree],
        fronts: list[list[int]],
        base: list[int],
        start: int,
        slot: list[dict[int, int]],
        rnd: int,
    ) -> None:
        """Every row's frontier through the head in one forward (round `rnd`); head slots before `start` hold the
        committed pairs, and `slot` maps each node fed so far to its head slot (extended with this round's)."""
        b, q, h = len(trees), max(len(f) for f in fronts), self.dr.head.config.hidden_size
        dev = self.dr.device
        prefix = torch.zeros(b, q, self.slots.slots, dtype=torch.bool, device=dev)
        prefix[:, :, :start] = self.slots.held[:, None, :start]
        feats = torch.zeros(b, q, h, dtype=self.dr.dtype, device=dev)
        ids, pos = torch.zeros(b, q, dtype=torch.long), torch.zeros(b, q, dtype=torch.long)
        for r, (tree, nodes) in enumerate(zip(trees, fronts, strict=True)):
            for j, n in enumerate(nodes):
                prefix[r, j, [slot[r][a] for a in ancestors(tree, n)]] = True
                feats[r, j] = tree.feats[tree.parents[n]]
                ids[r, j], pos[r, j] = tree.tokens[n], base[r] - 1 + tree.depth[n]
                slot[r][n] = self.slots.slots + j
        live = torch.arange(q)[None, :] < torch.tensor([len(f) for f in fronts])[:, None]
        alone = torch.eye(q, dtype=torch.bool).expand(b, q, q)  # a node sees no other node of its own round
        out = self.run_head(feats, ids, pos, alone, live, prefix)
        logp = self.logp(out)  # [B, q, Vd]
        for r, (tree, nodes) in enumerate(zip(trees, fronts, strict=True)):
            for j, n in enumerate(nodes):
                tree.feats[n], tree.logps[n], tree.expanded[n] = out[r, j], logp[r, j], rnd

    def grow(self, trees: list[DraftTree]) -> None:
        """grow_dynamic for every row at once: top_k children per frontier node, depth rounds, then the rerank."""
        cfg, start = self.cfg, self.slots.slots
        base = self.slots.lengths().tolist()  # pairs each row's head holds, the root's included
        slot: list[dict[int, int]] = [{} for _ in trees]
        layers = [add_children(self.dr, t, [0], cfg.top_k) for t in trees]
        for rnd in range(2, cfg.depth + 1):
            fronts = [frontier(t, layer, cfg.top_k) for t, layer in zip(trees, layers, strict=True)]
            self.expand(trees, fronts, base, start, slot, rnd)
            layers = [add_children(self.dr, t, list(f), cfg.top_k) for t, f in zip(trees, fronts)]
        for t in trees:
            t.keep_best(cfg.total_tokens)

    def draft(self, rows: list[Row]) -> list[DraftTree]:
        """Catch the head up with each row's verified pairs, then grow every row's tree from its root."""
        trees = [DraftTree(tokens=[r.root]) for r in rows]
        feats, logp = self.catch_up(rows)
        for b, t in enumerate(trees):
            t.feats[0], t.logps[0] = feats[b], logp[b]
        committed = self.slots.slots
        self.grow(trees)
        self.slots.crop(committed)  # the tree nodes' pairs are drafts: the head forgets them
        self.slots.compact_if_wasteful()  # the catch-up's pads, once they add up
        return trees

    def step(self, run: BatchRun) -> list[RowOut]:
        """propose (every row's tree) → verify (one target forward) → accept (per row) → commit (per row)."""
        rows = run.active
        trees = self.draft(rows)
        kept = [t.verified() for t in trees]
        tokens = [[t.tokens[n] for n in nodes] for t, (nodes, _) in zip(trees, kept, strict=True)]
        specs = [spec for _, spec in kept]
        see, live, pos = tree_block(specs, run.cache.lengths().tolist())
        ids = [tok + [PAD] * (see.shape[1] - len(tok)) for tok in tokens]
        start = run.cache.slots
        picks, hidden = run.verify(ids, pos, see, live)
        picked = picks.tolist()
        outs, paths = [], []
        for b, (tok, spec) in enumerate(zip(tokens, specs, strict=True)):
            path = greedy_accept_path(tok, spec, picked[b][: len(spec)])
            self.queue[b] = (hidden[b, path[:-1]], [tok[i] for i in path[1:]])
            outs.append(RowOut([tok[i] for i in path[1:]], picked[b][path[-1]], hidden[b, path[-1]], len(spec)))
            paths.append(path)
        run.cache.keep(start, paths)
        return outs
