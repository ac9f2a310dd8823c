"""Medusa + Lookahead: the heads' sparse tree and the Jacobi window's n-grams, verified in one tree-attention pass.

The pairing the Medusa and Lookahead write-ups suggest together. Each step, two proposers fill one tree:
- Medusa's heads, all on the last hidden state, fill their sparse tree (specviz.methods.medusa's proposer);
- Lookahead's pool offers the n-grams it holds for the root (harvested from its Jacobi window, seeded from the
  prompt); each is grafted onto the same tree as a branch, walking the heads' nodes where it agrees with them.
One target forward then carries the tree and, beside it, the window's levels (each level's token sees the root
and its own column, never a tree node; no tree node sees the window). The tree is judged as every tree is
(specviz.trees.walk: argmax match at T = 0, tree speculative sampling at T > 0, so the output is the target's), the
accepted path is kept in the cache and the window's slots dropped; the window's new level (the argmax of its last
level's rows) moves the Jacobi iteration on and harvests one n-gram per column into the pool.

A node remembers who proposed it: the heads, the pool or both. Where the text repeats itself the pool's branches
run deeper than the heads can see; on fresh text the heads' tree carries the step.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from specviz.core.details import MedusaLookaheadDetail
from specviz.core.drafting import INIT_SOURCES, initial_guesses, pad_id
from specviz.core.model import LoadedModel
from specviz.core.sampling import ConfigError, check_between
from specviz.heads.medusa import MedusaHeads
from specviz.methods import medusa
from specviz.methods.base import Card, Outcome, Run, Step, generator
from specviz.methods.lookahead import advance_window
from specviz.methods.speculator import TreeSpeculator, path_outcome
from specviz.trees.head_tree import HeadsDraft, HeadTreeConfig
from specviz.trees.ngram_pool import Layout, NgramPool
from specviz.trees.tree import TreeSpec, hang
from specviz.trees.verifier import HeadsVerifier, RunView, Verified, project
from specviz.trees.walk import Rule, Walk, node_records

CARD = Card(
    name="medusa_lookahead",
    label="Medusa + Lookahead",
    summary="Medusa's heads and Lookahead's n-gram pool fill one tree; its Jacobi window rides in the same pass.",
    colour="#44aa99",
    order=11,
    composes=("medusa", "lookahead"),  # its tree takes Medusa's shape fitted to the device
)
HEAD, POOL, BOTH = "head", "pool", "both"


@dataclass(frozen=True)
class Config(HeadTreeConfig):
    """Medusa's tree (heads, total_tokens: fitted to the device as Medusa's are) and Lookahead's window."""

    # W / N / G: chosen on the doctor's six prompts x 64 tokens, one run each beside Medusa and Lookahead (2-core
    # AMD EPYC with avx512_bf16, fp32, 2026-12-07; docs/experiments/2026-12-07-medusa-lookahead.md): 2 / 3 / 1 ran
    # 1.33x median (A 1.73, r 1.24), 3 / 3 / 2 1.25x (A 1.77, r 1.33), 3 / 2 / 2 1.28x, 4 / 4 / 2 1.12x (A 1.94,
    # r 1.57): every token the window adds widens the forward, and on a CPU the forward's width is the cost
    window: int = 2  # W: columns of the Jacobi window, in the same forward as the tree
    ngram: int = 3  # N: the pool's n-grams; the window keeps N - 1 levels, a grafted branch is N - 1 tokens
    guesses: int = 1  # G: the pool's n-grams for the root grafted onto the tree each step
    init: str = "prompt"  # the window's first level: "pad", "random" ids, or tokens drawn from the prompt
    seed_prompt: bool = True  # every n-gram of the prompt in the pool before decoding

    def __post_init__(self) -> None:
        super().__post_init__()
        check_between("window", self.window, 1, 16)
        check_between("ngram", self.ngram, 2, 8)
        check_between("guesses", self.guesses, 0, 16)
        if self.init not in INIT_SOURCES:
            raise ConfigError(f"init must be one of {', '.join(INIT_SOURCES)}, got {str(self.init)[:40]!r}.")

    @property
    def forward_tokens(self) -> int:
        """Tokens in one forward at most: the heads' tree, the grafted branches and the full window."""
        return self.total_tokens + self.guesses * (self.ngram - 1) + (self.ngram - 1) * self.window


def graft(draft: HeadsDraft, cands: list[list[int]]) -> tuple[list[int], TreeSpec, list[float | None], list[str]]:
    """The heads' tree with each pool n-gram hung from the root: where it agrees with a node it walks that node (now
    proposed by both), the rest become new nodes. Returns tokens, the tree, each drafted node's head probability
    (None for the pool's) and who proposed each node (the root: the target)."""
    tokens, parents = list(draft.tokens), list(draft.spec.parents)
    head_p: list[float | None] = list(draft.head_p)
    sources = ["root"] + [HEAD] * (len(tokens) - 1)
    child = {(parents[i], tokens[i]): i for i in range(1, len(tokens))}
    for cand in cands:
        for node in hang(tokens, parents, child, cand):
            if node == len(sources):  # a node the pool added
                head_p.append(None)
                sources.append(POOL)
            sources[node] = BOTH if sources[node] == HEAD else sources[node]
    ranks = [*draft.spec.ranks, *[()] * (len(tokens) - len(draft.tokens))]
    return tokens, TreeSpec(parents, ranks), head_p, sources


def layout(spec: TreeSpec, lay: Layout, prefix: int) -> tuple[list[int], torch.Tensor]:
    """Positions and the may-attend grid of the tree followed by the window: tree nodes see their ancestors; a
    window token sees the root and what it sees in Lookahead's own layout (its slots moved past the tree)."""
    n, size = len(spec), len(spec) + lay.size - 1
    seen = torch.zeros(size, size, dtype=torch.bool)
    seen[:n, :n] = spec.ancestry()
    positions = [prefix + d for d in spec.depths]
    for row, (offset, sees) in enumerate(lay.sources()[1:], start=n):
        seen[row, [0 if s == 0 else n - 1 + s for s in sees]] = True
        positions.append(prefix + offset)
    return positions, seen


@dataclass
class PooledDraft:
    """One step's tree: the heads' nodes and the pool's branches, each node's head probability and proposer."""

    tokens: list[int]
    spec: TreeSpec
    head_p: list[float | None]
    sources: list[str]
    candidates: list[list[int]]


class PoolHeadsProposer:
    """Medusa's heads fill their planned tree; the pool's n-grams for the root are grafted onto it."""

    layers: tuple[int, ...] = ()  # the heads read the final hidden state

    def __init__(self, heads: medusa.MedusaProposer, pool: NgramPool, guesses: int) -> None:
        self.heads, self.pool, self.guesses = heads, pool, guesses

    def start(self, run: Run, prompt_feats: torch.Tensor) -> None:
        """Nothing of the prompt to read (the pool was seeded with its n-grams when it was made)."""

    def propose(self, run: Run, root: int) -> PooledDraft:
        cands = self.pool.candidates(root, self.guesses)
        return PooledDraft(*graft(self.heads.propose(run, root), cands), cands)

    def commit(self, v: Verified, path: list[int]) -> None:
        """Nothing to keep of the path: the heads read the next root's hidden state, the window fills the pool."""


class WindowVerifier(HeadsVerifier):
    """Medusa's verifier with Lookahead's window beside the tree in the same forward: after the walk, the window
    moves on (its new level: the argmax of its last level's rows) and harvests one n-gram per column into the pool."""

    def __init__(self, rule: Rule, cfg: Config, first: list[int], pool: NgramPool) -> None:
        super().__init__(rule=rule)
        self.cfg, self.levels, self.pool = cfg, [first], pool
        self.new_level: list[int] = []
        self.fed: list[list[int]] = []  # the levels the last forward carried
        self.harvested = 0  # n-grams the last step put in the pool

    def verify(self, run: RunView, tokens: list[int], spec: TreeSpec) -> Verified:
        """One target forward over the tree and the window; LM-head rows for the tree's inner nodes (every node of a
        small tree, as Medusa's verifier projects them) and the window's last level, in one product."""
        lm, prefix = run.lm, run.seq_len
        lay = Layout(len(self.levels), self.cfg.window, 0, self.cfg.ngram - 1)
        positions, seen = layout(spec, lay, prefix)
        mask = torch.full(seen.shape, lm.neg_inf(), dtype=lm.dtype).masked_fill_(seen, 0.0)
        ids = [*tokens, *(t for level in self.levels for t in level)]
        _, hidden = lm.forward(ids, run.cache, torch.tensor(positions, device=lm.device), mask, slice(0, 0))
        n = len(spec)
        last = [n - 1 + lay.slot(lay.levels - 1, i) for i in range(lay.width)]
        logits, probs, window_rows = project(lm, hidden, spec, run.sampling, last)
        self.new_level = window_rows.argmax(-1).tolist() if window_rows is not None else []  # the Jacobi update
        return Verified(tokens, spec, prefix, logits, hidden[:n], hidden[:n], probs)

    def commit(self, run: RunView, v: Verified, w: Walk) -> None:
        """The accepted path's keys and values (the window's slots dropped with the rest); then the window moves."""
        super().commit(run, v, w)
        self.fed = [list(level) for level in self.levels]
        self.harvested = len(advance_window(self, self.new_level, self.cfg.ngram - 1)[0])


class MedusaLookahead(TreeSpeculator):
    """The pooled heads' proposer and the window's verifier, in the tree methods' one step
    (methods.speculator.TreeSpeculator: propose → verify → accept → commit)."""

    DETAIL: ClassVar[type[MedusaLookaheadDetail]] = MedusaLookaheadDetail
    proposer: PoolHeadsProposer
    verifier: WindowVerifier

    def outcome(self, run: Run, draft: PooledDraft, v: Verified, w: Walk) -> Outcome:
        """The accepted path's outcome; its record: Medusa's, with who proposed each node and the window it fed."""
        heads, rule = self.proposer.heads, self.verifier.rule
        window, harvested = self.verifier.fed, self.verifier.harvested

        def record() -> MedusaLookaheadDetail:
            nodes = node_records(v.spec, v.tokens, draft.head_p, v.probs, w.path, w.why, run.lm.token_text)  # type: ignore[arg-type]
            said = "greedy" if run.sampling.greedy else rule.name
            base = (v.spec.parents, nodes, w.path, round(1 + heads.expected, 4), len(w.path), said)
            extra = {"sources": draft.sources, "candidates": draft.candidates, "window": window}
            return self.DETAIL(*base, **extra, harvested=harvested)

        return path_outcome(v, w, record)


def begin(
    run: Run, cfg: Config, heads: MedusaHeads | None = None, calibration: list[list[float]] | None = None
) -> Step:
    """Medusa's heads (given, else loaded once per folder) and their planned tree; the window's first level and the
    pool (seeded with the prompt's n-grams)."""
    drafting = medusa.MedusaProposer(cfg, heads if heads is not None else medusa.get_heads(run.lm, cfg), calibration)
    pool = NgramPool(cfg.ngram, max(1, cfg.guesses))
    if cfg.seed_prompt:
        pool.seed(run.prompt_ids)
    lm = run.lm
    first = initial_guesses(cfg.init, cfg.window, run.prompt_ids, pad_id(lm), lm.hf.config.vocab_size, run.gen)
    verifier = WindowVerifier(Rule(cfg.rule, cfg.eps, cfg.delta), cfg, first, pool)
    return MedusaLookahead(PoolHeadsProposer(drafting, pool, cfg.guesses), verifier).start(run)


generate = generator(
    CARD.name, Config, begin, "Decode with Medusa's heads and Lookahead's window until EOS or max_new_tokens."
)


def tiny_resources(lm: LoadedModel) -> dict[str, Any]:
    """Medusa's untrained heads (its tiny_resources) under this method's Config, for any model."""
    kw = medusa.tiny_resources(lm)
    return {**kw, "config": Config(heads=kw["config"].heads, total_tokens=5)}


def accepting_resources(lm: LoadedModel) -> dict[str, Any]:
    """Medusa's heads that hand on the target's own prediction (its accepting_resources), under this Config."""
    kw = medusa.accepting_resources(lm)
    return {**kw, "config": Config(heads=kw["config"].heads, total_tokens=5)}
