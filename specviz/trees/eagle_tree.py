"""One EAGLE tree step's shapes and types, shared by EAGLE-2 (specviz.methods.eagle), EAGLE-3 and the pool
hybrid (specviz.methods.hybrid): the Config's tree shape and its checks, what the stepper reads of a Run and
the verified result (accepted by specviz.trees.walk, as every tree method's tree is). The stepper itself
drives a head's drafter, so it lives beside the drafter (specviz.heads.eagle_drafter.TreeStepper).
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from specviz.core.model import LoadedModel
from specviz.core.paths import folder_problem
from specviz.core.sampling import ConfigError, Sampling, check_between
from specviz.trees.draft_tree import DraftTree
from specviz.trees.draft_tree import Shape as TreeShape
from specviz.trees.tree import TreeSpec
from specviz.trees.walk import Walk


class Shape(TreeShape, Protocol):
    """What a tree method's frozen Config says about the tree and the head (read-only)."""

    @property
    def tree(self) -> str: ...
    @property
    def head(self) -> str: ...
    @property
    def head_dtype(self) -> str: ...


class Step(Protocol):
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
