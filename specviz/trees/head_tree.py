"""A tree filled by heads on one hidden state (Medusa, Hydra): its Config's checks, its tree, its verify pass and
its rule, and the calibration a tiny test model drafts with.

Both methods draft a fixed sparse tree (build_tree: specviz.trees.tree.sparse_tree over the heads' calibration, of
total_tokens nodes, the root included) with point-mass proposals, so they share how the tree is verified (LM-head
rows only for nodes with children) and which rule walks it (specviz.trees.walk: argmax match at T = 0, "exact" or
"typical" at T > 0). Each method keeps its own propose (how its heads fill the tree) and its step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from specviz.core.model import LoadedModel
from specviz.core.paths import folder_problem
from specviz.core.sampling import ConfigError, Sampling, check_between, target_probs
from specviz.trees.tree import TreeSpec, sparse_tree, verify_tree
from specviz.trees.walk import RULES, Rule

ALL_ROWS = 8  # trees of at most this many nodes project every node's LM-head row in one call (see verify)


def verify(
    lm: LoadedModel, cache: Any, tokens: list[int], spec: TreeSpec, sampling: Sampling
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One tree forward; LM-head rows of every node in a small tree, else only of nodes with children (leaf rows
    stay 0 until needed, ensure_last_logits).

    Returns logits [n, V], target probabilities [n, V] (rows of inner nodes at least) and hidden [n, H].
    The LM head is 49,152 × 576 and its cost is the weight's read: on 2 cores (oneDNN fp32, under load) 1 row took
    24.6 ms, 4 rows 27.6, 8 rows 34.2. So up to ALL_ROWS nodes every row is projected in the one call, and a walk
    that ends on a leaf never pays a second call for the next root's logits; a bigger tree projects its inner
    nodes only.
    """
    _, hidden = verify_tree(lm, cache, tokens, spec, logits_for=slice(0, 0))
    inner = projected_rows(spec)
    rows = lm.lm_head(hidden[inner]).float()  # [len(inner), V]
    logits = rows.new_zeros(len(spec), rows.shape[-1])
    probs = rows.new_zeros(len(spec), rows.shape[-1])  # the distribution each node's children face
    logits[inner] = rows
    probs[inner] = target_probs(rows, sampling)
    return logits, probs, hidden


def projected_rows(spec: TreeSpec) -> list[int]:
    """The nodes whose LM-head rows `verify` projects: every node of a small tree, else those with children (and a
    few leaves, so that at least 4 rows go through the LM head)."""
    inner = [j for j in range(len(spec)) if spec.children(j)]
    if len(spec) <= ALL_ROWS:
        return list(range(len(spec)))
    if 1 < len(inner) < 4:  # fp32 products of 2-3 rows are slower here than of 4: add leaves
        return sorted(inner + spec.leaves()[: 4 - len(inner)])
    return inner


def check_config(cfg: Any) -> None:
    """ConfigError unless a heads method's Config (Medusa's, Hydra's) has usable heads, total_tokens and rule.
    Called from a frozen Config's __post_init__."""
    check_between("heads", cfg.heads, 1, 8)
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

    heads: int = 4  # how many trained heads to use (head k guesses the token k+1 places ahead)
    # tokens verified in one target forward, ROOT INCLUDED (total_tokens - 1 drafted), as in every tree method's Config
    total_tokens: int = 5  # fastest in models/medusa/sweep.json (oneDNN fp32)
    # the acceptance rule at T > 0 (`rule`, as in every Config): "exact" is
    # lossless (argmax match at T=0, tree rejection sampling at T>0), "typical" Medusa's typical acceptance
    rule: str = "exact"
    eps: float = 0.09  # typical acceptance: p(x) > min(eps, delta·exp(-H(p)))
    delta: float = 0.3
    heads_dir: str = ""  # folder with heads.safetensors + calibration.json; "" = the method's models folder

    def __post_init__(self) -> None:
        check_config(self)


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


def rule_of(cfg: Any) -> Rule:
    """The acceptance rule a heads method's Config names (its rule, eps and delta)."""
    return Rule(cfg.rule, cfg.eps, cfg.delta)


def ensure_last_logits(lm: LoadedModel, logits: torch.Tensor, hidden: torch.Tensor, last: int, spec: TreeSpec) -> None:
    """A walk that ended on a leaf whose row `verify` skipped (projected_rows says which, without reading the
    logits back): project that row now, for the next root."""
    if last not in projected_rows(spec):
        logits[last] = lm.lm_head(hidden[last : last + 1]).float()[0]


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
