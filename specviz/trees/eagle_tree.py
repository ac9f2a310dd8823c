"""The pieces of an EAGLE tree step, shared by EAGLE-2 (specviz.methods.eagle), EAGLE-3 (its method file) and the
pool hybrid (specviz.methods.hybrid): the Config's tree shape and its checks, what the stepper reads of a
Run, the verified result, and the TreeStepper, which holds a head's drafter (given to it; specviz.heads.eagle_drafter
builds one) and offers the pieces each method's own step puts in order: draft, verify, commit, record.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from specviz.core.model import LoadedModel
from specviz.core.paths import folder_problem
from specviz.core.sampling import ConfigError, Sampling, check_between
from specviz.trees.draft_tree import Budget, DraftTree, TreeDrafter, feature_view, grow, static_paths, tree_detail
from specviz.trees.draft_tree import Shape as TreeShape
from specviz.trees.tree import TreeSpec, commit_path, verify_tree
from specviz.trees.walk import Walk


class Shape(TreeShape, Protocol):
    """What a tree method's frozen Config says about the tree and the head (read-only)."""

    @property
    def tree(self) -> str: ...
    @property
    def head(self) -> str: ...
    @property
    def head_dtype(self) -> str: ...
    @property
    def min_tokens(self) -> int: ...
    @property
    def node_floor(self) -> float: ...
    @property
    def depth_floor(self) -> float: ...


@dataclass(frozen=True)
class BudgetFields:
    """The confidence budget's settings, shared by every EAGLE-family Config (draft_tree.Budget says the rule):
    min_tokens 0 keeps the fixed budget (total_tokens nodes every step); above 0 the tree keeps at least that
    many nodes (root included) and at most total_tokens."""

    min_tokens: int = 0
    node_floor: float = 0.0  # a node beyond min_tokens joins while its calibrated path acceptance reaches this
    depth_floor: float = 0.0  # another draft round runs while the frontier's best path acceptance reaches this


class RunView(Protocol):
    """What the stepper reads from the method's Run (specviz.methods.base.Run satisfies it)."""

    lm: LoadedModel
    cache: Any
    sampling: Sampling
    gen: torch.Generator

    prompt_ids: list[int]
    prefill_s: float

    @property
    def pending_hidden(self) -> torch.Tensor: ...
    @property
    def seq_len(self) -> int: ...
    def phase(self, name: str) -> AbstractContextManager[None]: ...
    def prefill(self) -> tuple[torch.Tensor, torch.Tensor]: ...
    def now(self) -> float: ...


TREES = ("dynamic", "static")


def check_shape(cfg: Any) -> None:
    """ConfigError unless an EAGLE-family Config (EAGLE-2's, EAGLE-3's) has a usable tree shape and head dtype."""
    check_between("depth", cfg.depth, 1, 12)
    check_between("top_k", cfg.top_k, 1, 32)
    check_between("total_tokens", cfg.total_tokens, 2, 256)
    if cfg.tree not in TREES:
        raise ConfigError(f"tree must be 'dynamic' or 'static', got {str(cfg.tree)[:40]!r}.")
    if cfg.head_dtype not in ("bf16", "fp32", "model"):
        raise ConfigError(f"head_dtype must be bf16, fp32 or model, got {str(cfg.head_dtype)[:40]!r}.")
    if why := folder_problem(cfg.head):
        raise ConfigError(f"head {why}.")
    if cfg.min_tokens:
        check_between("min_tokens", cfg.min_tokens, 2, cfg.total_tokens)
        if cfg.tree != "dynamic":
            raise ConfigError("The confidence budget (min_tokens above 0) trims a dynamic tree; set tree='dynamic'.")
    check_between("node_floor", cfg.node_floor, 0.0, 1.0)
    check_between("depth_floor", cfg.depth_floor, 0.0, 1.0)


@dataclass
class TreeResult:
    """One verified tree: what was drafted and sent, what the target said, and what was accepted."""

    tree: DraftTree
    nodes: list[int]  # drafted indices sent to verification, in order
    spec: TreeSpec
    tokens: list[int]  # their tokens
    logits: torch.Tensor  # [n, V]
    hidden: torch.Tensor  # [n, H]
    walk: Walk  # the acceptance: path (verified indices, root first), next root, decisions
    f_t: torch.Tensor  # the feature the step drafted from

    @property
    def path(self) -> list[int]:
        return self.walk.path


def budget_of(cfg: Shape, confidence: Sequence[float] = ()) -> Budget | None:
    """The Config's confidence budget over a head's confidence table; None for the fixed budget."""
    if not cfg.min_tokens:
        return None
    return Budget(cfg.min_tokens, cfg.node_floor, cfg.depth_floor, tuple(confidence))


class StepDrafter(TreeDrafter, Protocol):
    """What the stepper asks of a head's drafter beyond growing a tree (specviz.heads.eagle_drafter.Drafter is one)."""

    embed: Any  # the target's input embeddings: token ids [n] -> [n, H]

    def reset(self, prompt_ids: list[int], prompt_hidden: torch.Tensor) -> None: ...
    def push(self, feats: torch.Tensor, tokens: list[int]) -> None: ...
    def catch_up(self, root_feat: torch.Tensor, root: int) -> tuple[torch.Tensor, torch.Tensor]: ...
    def rollback(self, length: int) -> None: ...


class TreeStepper:
    """Per-generation state of an EAGLE tree method: the head's drafter (with its own KV cache) and the tree shape.

    What the drafter reads of the target is EAGLE's final hidden state; a head that reads something else
    (EAGLE-3's fused layers, in its method file) overrides `root_feature`, `verify` and `commit`.
    """

    def __init__(
        self, drafter: StepDrafter, cfg: Shape, calibration: list[list[float]], confidence: Sequence[float] = ()
    ) -> None:
        """calibration: the head's rank accuracies (EAGLE-1's static tree); confidence: its confidence table
        (the budget's, when cfg.min_tokens is above 0)."""
        self.cfg, self.drafter = cfg, drafter
        self.paths = static_paths(calibration, cfg) if cfg.tree == "static" else []
        self.budget = budget_of(cfg, confidence)

    def begin(self, run: RunView, prompt_feats: torch.Tensor) -> None:
        """The head's own prefill over the prompt's pairs (prompt_feats [n, …]), timed as prefill."""
        t = run.now()
        self.drafter.reset(run.prompt_ids, prompt_feats)
        run.prefill_s += run.now() - t

    def draft(self, feature: torch.Tensor, root: int) -> DraftTree:
        """Catch the head up with the verified features, then grow this step's tree from the root."""
        tree = DraftTree(tokens=[root])
        tree.feats[0], tree.logps[0] = self.drafter.catch_up(feature, root)
        grow(self.drafter, tree, self.cfg, self.cfg.tree, self.paths, budget=self.budget)
        return tree

    def root_feature(self, run: RunView) -> torch.Tensor:
        """What the root's pair reads of the last committed token: its final hidden state."""
        return run.pending_hidden

    def verify(
        self, run: RunView, tokens: list[int], spec: TreeSpec
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One target forward over the tree: (logits [n, V], hidden [n, H], what the drafter reads per node)."""
        logits, hidden = verify_tree(run.lm, run.cache, tokens, spec)
        return logits, hidden, hidden

    def skip(self, feature: torch.Tensor, root: int) -> DraftTree:
        """A tree of the root alone: the head drafts nothing this step, and the root's pair, which drafting
        would have run, waits in its queue with the verified pairs until the next step that drafts."""
        self.drafter.push(feature[None], [root])
        return DraftTree(tokens=[root])

    def commit(self, run: RunView, prefix: int, tokens: list[int], feats: torch.Tensor, path: list[int]) -> None:
        """Keep the accepted path in the target's cache; the head keeps its pairs 0..prefix-1 (all built from
        true features; none were drafted past them on a skipped step) and queues the path's verified pairs."""
        commit_path(run.cache, prefix, path)
        self.drafter.rollback(prefix)
        self.drafter.push(feats[path], [tokens[i] for i in path[1:]])

    def record(self, res: TreeResult, text: Callable[[int], str]) -> dict[str, Any]:
        """The fields of an EagleDetail for this result (figure data, built after the step's clock stops)."""
        root = res.tokens[0]
        emb = self.drafter.embed(torch.tensor([root], device=self.drafter.device)).detach()[0]
        return {
            "tree": tree_detail(res.tree, text, self.cfg.tree),
            "verify_nodes": res.nodes,
            "verify_parents": res.spec.parents,
            "path": [res.nodes[i] for i in res.path],
            "features": self.feature_record(res, emb) if 0 in res.tree.feats else {},  # {}: the head skipped
            "decisions": res.walk.decisions,
            "residual_token": res.walk.next_root,
        }

    def feature_record(self, res: TreeResult, root_embed: torch.Tensor) -> dict:
        """What the head read and predicted at the root against the target's feature, a few dimensions of it."""
        return feature_view(res.f_t, root_embed, res.tree.feats[0], res.hidden[0])
