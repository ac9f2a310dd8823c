"""A tree filled by heads on one hidden state (Medusa, Hydra): its Config and its checks, the proposer's planned
tree, its step record, and the calibration a tiny test model drafts with.

Both methods draft a fixed sparse tree (build_tree: specviz.trees.tree.sparse_tree over the heads' calibration, of
total_tokens nodes, the root included) with point-mass proposals, so they share a proposer's start (HeadsProposer:
the heads and the tree they fill), the verifier (specviz.trees.verifier.HeadsVerifier: LM-head rows only for nodes
with children, and the rule a Config names) and the record. Each method writes how its heads fill the tree.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch

from specviz.core.details import MedusaDetail
from specviz.core.drafting import fit_field
from specviz.core.paths import folder_problem
from specviz.core.sampling import ConfigError, check_between
from specviz.trees.tree import TreeSpec, sparse_tree
from specviz.trees.verifier import HeadsVerifier, RunView, Verified
from specviz.trees.walk import RULES, Rule, Walk, node_records

D = TypeVar("D", bound=MedusaDetail)


def check_config(cfg: Any) -> None:
    """ConfigError unless a heads method's Config (Medusa's, Hydra's) has usable heads, total_tokens and rule.
    Called from a frozen Config's __post_init__."""
    if cfg.heads:  # 0: fitted where the run starts
        check_between("heads", cfg.heads, 1, 8)
    if cfg.total_tokens:
        check_between("total_tokens", cfg.total_tokens, 1, 129, " tokens verified, root included")
    if cfg.rule not in RULES:
        raise ConfigError(f"rule must be one of {', '.join(RULES)}, got {str(cfg.rule)[:40]!r}.")
    if not (0 < cfg.eps <= 1 and 0 < cfg.delta <= 1):
        raise ConfigError(f"eps and delta must be in (0, 1], got eps={cfg.eps}, delta={cfg.delta}.")
    if why := folder_problem(cfg.heads_dir):
        raise ConfigError(f"heads_dir {why}.")
    if cfg.heads_dir.strip() == "random":  # EAGLE's head="random" is an untrained head; here it would read ./random
        raise ConfigError("heads_dir 'random' names no folder: Medusa and Hydra have no untrained heads to draw.")


@dataclass(frozen=True)
class HeadTreeConfig:
    """The settings a heads method (Medusa, Hydra) shares, so the two compare at the same tree size; each method's
    Config subclasses it with its own docstring."""

    # the shape: 0 = fitted to the device where the run starts (specviz.tuning.fit, up to the paper's 4 heads and
    # 64 tokens), else as given; a run whose caller skips the fit takes the fallback 4 heads, 5 tokens
    heads: int = field(default=0, metadata=fit_field(4))  # trained heads used (head k guesses k+1 places ahead)
    # tokens verified in one target forward, ROOT INCLUDED (total_tokens - 1 drafted), as in every tree method's Config
    total_tokens: int = field(default=0, metadata=fit_field(5))
    # the acceptance rule at T > 0 (`rule`, as in every Config): "exact" is
    # lossless (argmax match at T=0, tree rejection sampling at T>0), "typical" Medusa's typical acceptance
    rule: str = "exact"
    eps: float = 0.09  # typical acceptance: p(x) > min(eps, delta·exp(-H(p)))
    delta: float = 0.3
    heads_dir: str = ""  # folder with heads.safetensors + calibration.json; "" = the method's models folder

    def __post_init__(self) -> None:
        check_config(self)

    @property
    def forward_tokens(self) -> int:
        """Tokens one target forward verifies, the root included."""
        return self.total_tokens


def plan(
    cfg: HeadTreeConfig,
    n_heads: int,
    calibration: list[list[float]] | None,
    load_calibration: Callable[[Path | None], list[list[float]]],
) -> tuple[TreeSpec, float]:
    """A generation's tree and its E[L]: the given calibration, else the one in cfg.heads_dir (or the method's
    default folder, as its head module's load_calibration reads it)."""
    folder = Path(cfg.heads_dir).expanduser() if cfg.heads_dir else None
    acc = calibration if calibration is not None else load_calibration(folder)
    return tree_for(cfg, n_heads, acc)


def build_tree(acc: list[list[float]], heads: int, total_tokens: int) -> tuple[TreeSpec, float]:
    """The sparse tree of `total_tokens` nodes (root included) for the first `heads` heads, and its E[L] (no root).

    With Hydra's calibration (head k's accuracy given the true branch), a path's weight Π a_k is exactly the
    probability that all of its nodes are right; for Medusa's independent heads it is an approximation.
    """
    paths, expected = sparse_tree(acc[:heads], total_tokens)
    return TreeSpec.from_paths(paths), expected


def tree_for(cfg: Any, n_heads: int, acc: list[list[float]]) -> tuple[TreeSpec, float]:
    """The Config's tree over these heads (n_heads of them) and calibration rows; ConfigError when it asks for more
    heads than either holds."""
    if cfg.heads > min(n_heads, len(acc)):
        raise ConfigError(f"heads must be at most {min(n_heads, len(acc))} for these heads.")
    return build_tree(acc, cfg.heads, cfg.total_tokens)


def tiny_calibration(num_heads: int) -> list[list[float]]:
    """A decaying calibration for untrained heads (the contract test's tiny model): each head 0.7× the last."""
    return [[0.6 * 0.7**k, 0.2 * 0.7**k, 0.1 * 0.7**k] for k in range(num_heads)]


@dataclass
class HeadsDraft:
    """A heads tree filled for one step: its tokens (root first), each drafted node's head probability, and for
    heads that read their branch (Hydra's) the tokens each drafted node's head saw."""

    tokens: list[int]
    head_p: list[float]
    spec: TreeSpec  # the planned tree it fills
    reads: list[list[int]] | None = None


class HeadsProposer:
    """A heads method's proposer: its heads and the fixed sparse tree their calibration plans (given, else the one
    in cfg.heads_dir or the method's folder); the method's `propose` fills the tree from the run's last hidden state
    each step, so there is nothing to read of the prompt."""

    layers: tuple[int, ...] = ()  # the target layers whose inputs it reads: none, only the final hidden state

    def __init__(
        self,
        cfg: HeadTreeConfig,
        n_heads: int,
        calibration: list[list[float]] | None,
        load_calibration: Callable[[Path | None], list[list[float]]],
    ) -> None:
        self.cfg = cfg
        self.spec, self.expected = plan(cfg, n_heads, calibration, load_calibration)

    def start(self, run: RunView, prompt_feats: torch.Tensor) -> None:
        """Nothing of the prompt to read: the heads read the run's last hidden state each step."""

    def propose(self, run: RunView, root: int) -> HeadsDraft:
        """The tree filled from the run's last hidden state: each heads method's own (Medusa's, Hydra's)."""
        raise NotImplementedError

    def commit(self, v: Verified, path: list[int]) -> None:
        """Nothing to keep of the accepted path: the heads read the next root's hidden state afresh."""

    def verifier(self) -> HeadsVerifier:
        """The verifier a heads tree takes: its inner rows and the Config's rule (rule, eps and delta)."""
        return HeadsVerifier(rule=Rule(self.cfg.rule, self.cfg.eps, self.cfg.delta))

    def record(self, detail: type[D], run: RunView, draft: HeadsDraft, v: Verified, w: Walk) -> D:
        """The step's record (a MedusaDetail, or a subclass): the verified tree, every node's fate and head, and
        predicted against measured tokens; each node also lists what its head read when the heads read branches."""
        text = run.lm.token_text
        if v.probs is None:
            raise TypeError("A heads tree's record reads the probabilities its verifier computed (HeadsVerifier).")
        nodes = node_records(v.spec, v.tokens, draft.head_p, v.probs, w.path, w.why, text)
        for node, seen in zip(nodes[1:], draft.reads or []):
            node["reads"] = [text(t) for t in seen]
        rule = "greedy" if run.sampling.greedy else self.cfg.rule
        return detail(v.spec.parents, nodes, w.path, round(1 + self.expected, 4), len(w.path), rule)
