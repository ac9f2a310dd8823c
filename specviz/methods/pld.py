"""Prompt lookup decoding: draft the tokens that followed the last n-gram's earlier occurrence.

The draft costs nothing to make: the context's last n-gram (3, then 2, then 1 token) is looked up earlier in the
prompt and the output, and the tokens that followed it are copied (`propose`). How many is chosen each step from
the running acceptance rate of that n-gram length and the device's measured verify cost (`draft_length`). The copy
is a one-branch tree, verified in one target forward and walked by the tree methods' one acceptance walk.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from specviz.core.details import PldDetail
from specviz.core.draft_length import best_width
from specviz.core.drafting import MEASURED, VerifyLatency, suffix_matches
from specviz.core.sampling import ConfigError, target_probs
from specviz.methods.base import Card, Outcome, Run, Step, generator
from specviz.methods.speculator import TreeSpeculator, path_outcome
from specviz.trees.tree import TreeSpec
from specviz.trees.verifier import TreeVerifier, Verified
from specviz.trees.walk import Walk, chain_records

CARD = Card(
    name="pld",
    label="Prompt lookup",
    summary="Copies the continuation of a matching n-gram from the prompt or the output so far as the draft.",
    colour="#56b4e9",
    order=2,
    batched="chain",
    short="prompt lookup",
)

MAX_DRAFT = 16  # longest copied draft a step may verify


@dataclass(frozen=True)
class Config:
    """How n-grams are matched and how long the copied draft may be."""

    # defaults from an interleaved sweep against plain decoding on 12 unseen ShareGPT prompts x 96 tokens
    # (oneDNN fp32): min_ngram 1 ran 1.24x median (A 1.34) against 1.15x for min_ngram 2; with a verify
    # pass of a few tokens costing about one plain step, even a 1-gram match pays. Prior and max_ngram
    # hardly mattered (1.14-1.15x).
    max_ngram: int = 3  # try matching the last 3, then 2, then 1 token
    min_ngram: int = 1  # shortest suffix that may be looked up
    max_draft: int = 10  # longest copied draft
    # pick the draft length from the running acceptance rate and this device's measured verify cost (`latency`,
    # the latency probe's curve, filled in by the caller: app, CLI, bench); without a curve, or off: max_draft
    adaptive: bool = True
    prior: float = 0.7  # per-token acceptance assumed before any evidence
    memory: float = 0.8  # per-step decay of the acceptance evidence (forgets toward the prior)
    # ms per forward of k new tokens on this device (specviz.tuning.probe.verify_cost); None: the fixed max_draft
    latency: VerifyLatency | None = field(default=None, metadata=MEASURED)

    def __post_init__(self) -> None:
        object.__setattr__(self, "latency", VerifyLatency.of(self.latency))  # also from a trace's plain record
        if not 1 <= self.min_ngram <= self.max_ngram <= 8:
            raise ConfigError(f"need 1 ≤ min_ngram ≤ max_ngram ≤ 8, got {self.min_ngram}, {self.max_ngram}.")
        if not 1 <= self.max_draft <= MAX_DRAFT:
            raise ConfigError(f"max_draft must be between 1 and {MAX_DRAFT}, got {self.max_draft}.")
        if not (0 < self.prior < 1 and 0 <= self.memory < 1):
            raise ConfigError(f"prior must be in (0, 1) and memory in [0, 1), got {self.prior}, {self.memory}.")


def find_match(seq: list[int], max_ngram: int, min_ngram: int) -> tuple[int, int]:
    """(n, start of the continuation) for the longest suffix n-gram seen earlier, most recent first; (0, -1)."""
    return next(suffix_matches(seq, max_ngram, min_ngram), (0, -1))


def best_length(a: float, available: int, max_draft: int, cost: Callable[[int], float]) -> int:
    """Draft length k maximising (1 + a + … + a^k) / cost(k+1); 0 means a plain step pays best.

    cost(m) is a forward over m new tokens relative to m = 1, from this device's measured latency curve; the rule
    is core.draft_length.best_width's for one row, the batched twin's.
    """
    return best_width([a], [available], max_draft, cost)


def draft_length(rate: float, available: int, cfg: Config) -> int:
    """Adaptive length from the Config's measured curve; the fixed longest draft when off or it carries none."""
    curve = cfg.latency if cfg.adaptive else None
    if curve is None:
        return min(available, cfg.max_draft)
    return best_length(rate, available, cfg.max_draft, curve.relative)


class Evidence:
    """Running per-token acceptance, one estimate per matched n-gram length, decaying to the prior."""

    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.hits = [0.0] * (cfg.max_ngram + 1)
        self.tries = [0.0] * (cfg.max_ngram + 1)

    def rate(self, n: int) -> float:
        w = 2.0  # the prior counts as two observed tokens
        return (self.hits[n] + self.cfg.prior * w) / (self.tries[n] + w)

    def update(self, n: int, drafted: int, accepted: int) -> None:
        self.hits = [h * self.cfg.memory for h in self.hits]
        self.tries = [t * self.cfg.memory for t in self.tries]
        if drafted:  # accepted successes, then one failure unless all were taken
            self.hits[n] += accepted
            self.tries[n] += accepted + (accepted < drafted)


def propose(run: Run, ev: Evidence, cfg: Config, root: int, budget: int) -> tuple[list[int], dict[str, Any]]:
    """The copied draft after root and how it was found (ngram, match_at, source, rate)."""
    seq = [*run.context, root]
    n, start = find_match(seq, cfg.max_ngram, cfg.min_ngram)
    if not n:
        return [], {"ngram": 0, "match_at": -1, "source": "", "rate": 0.0}
    available = min(len(seq) - start, budget)
    rate = ev.rate(n)
    k = draft_length(rate, available, cfg)
    source = "prompt" if start < len(run.prompt_ids) else "output"
    return seq[start : start + k], {"ngram": n, "match_at": start, "source": source, "rate": round(rate, 4)}


@dataclass
class Copied:
    """A step's copied draft as a one-branch tree (root first), and how it was found."""

    tokens: list[int]
    spec: TreeSpec
    found: dict[str, Any]


class CopyProposer:
    """Prompt lookup's proposer: the continuation of the context's last n-gram, copied as a chain as long as the
    acceptance evidence and the device's verify cost say pays; the evidence learns from what the target keeps."""

    layers: tuple[int, ...] = ()  # it reads the text, not the target's features

    def __init__(self, cfg: Config) -> None:
        self.cfg, self.ev = cfg, Evidence(cfg)
        self.ngram = 0  # the matched n-gram length of the step in flight

    def start(self, run: Run, prompt_feats: torch.Tensor) -> None:
        """Nothing to read of the prompt's features: the lookup reads its tokens each step."""

    def propose(self, run: Run, root: int) -> Copied:
        drafts, found = propose(run, self.ev, self.cfg, root, run.remaining - 1)
        self.ngram = found["ngram"]
        return Copied([root, *drafts], TreeSpec.chain(1 + len(drafts)), found)

    def commit(self, v: Verified, path: list[int]) -> None:
        """The evidence for this n-gram length: the accepted copies, then one miss unless all were taken."""
        self.ev.update(self.ngram, len(v.tokens) - 1, len(path) - 1)


class Lookup(TreeSpeculator):
    """One pld generation: the copied chain verified as a one-branch tree in the tree methods' one step
    (methods.speculator.TreeSpeculator.step: propose → verify → accept → commit); at T > 0 each copied token is a
    point mass q = δ_x, kept with probability p(x) (tree speculative sampling on one branch), so it is lossless."""

    DETAIL = PldDetail
    proposer: CopyProposer

    def outcome(self, run: Run, draft: Any, v: Verified, w: Walk) -> Outcome:
        def detail() -> PldDetail:  # built after the step's clock stopped
            p, drafts = target_probs(v.logits, run.sampling), draft.tokens[1:]
            rule = "greedy" if run.sampling.greedy else "speculative"
            records = chain_records(w, drafts, p, rule, run.lm.token_text)
            return PldDetail(rule, drafts, len(w.path) - 1, records, **draft.found)

        return path_outcome(v, w, detail)


def begin(run: Run, cfg: Config) -> Step:
    """The copy proposer and the tree verifier (every row of the chain's LM head: each is a node's parent)."""
    return Lookup(CopyProposer(cfg), TreeVerifier()).start(run)


generate = generator(CARD.name, Config, begin, "Decode with copied drafts until EOS or max_new_tokens.")
