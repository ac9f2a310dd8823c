"""One EAGLE tree step, shared by EAGLE-2 (specviz.methods.eagle) and the pool hybrid (specviz.methods.hybrid):
the head drafts a tree from the root, an optional `extend` adds nodes to it, one target forward verifies it,
the accepted path is committed to the target's cache and the head catches up on the verified features.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from specviz.draft_tree import DraftTree, feature_view, grow, static_paths, tree_detail
from specviz.draft_tree import Shape as TreeShape
from specviz.heads.eagle import DEFAULT_DIR, EagleHead, HeadError, cached_head, new_head
from specviz.heads.eagle_drafter import Drafter
from specviz.model import LoadedModel
from specviz.sampling import ConfigError, Sampling, target_probs
from specviz.tree import TreeSpec, commit_path, verify_tree
from specviz.tree_sampling import greedy_path, sample_path


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
    if not 1 <= cfg.depth <= 12:
        raise ConfigError(f"depth must be between 1 and 12, got {cfg.depth}.")
    if not 1 <= cfg.top_k <= 32:
        raise ConfigError(f"top_k must be between 1 and 32, got {cfg.top_k}.")
    if not 2 <= cfg.total_tokens <= 256:
        raise ConfigError(f"total_tokens must be between 2 and 256, got {cfg.total_tokens}.")
    if cfg.tree not in TREES:
        raise ConfigError(f"tree must be 'dynamic' or 'static', got {cfg.tree!r}.")
    if cfg.head_dtype not in ("bf16", "fp32", "model"):
        raise ConfigError(f"head_dtype must be bf16, fp32 or model, got {cfg.head_dtype!r}.")


def head_for(lm: LoadedModel, cfg: Shape, head: EagleHead | None) -> EagleHead:
    """The head given, else the config's (ConfigError, with the reason, when none can be loaded)."""
    try:
        return head or load_head(lm, cfg)
    except HeadError as exc:
        raise ConfigError(str(exc)) from None


def load_head(lm: LoadedModel, cfg: Shape) -> EagleHead:
    """The head named by the config, loaded once per (model, folder, file time); "random": untrained."""
    if cfg.head == "random":
        return new_head(lm.hf.config, lm.name, seed=0).to(lm.device).eval()
    return cached_head(lm, Path(cfg.head) if cfg.head else DEFAULT_DIR)  # on lm.device


def head_dtype(lm: LoadedModel, cfg: Shape) -> torch.dtype:
    """bf16 only where the target runs fp32 or bf16 (the float64 test model keeps its own dtype)."""
    if cfg.head_dtype == "model" or lm.dtype == torch.float64:
        return lm.dtype
    return torch.bfloat16 if cfg.head_dtype == "bf16" else torch.float32


def tree_accept(
    sampling: Sampling, gen: torch.Generator, tokens: list[int], spec: TreeSpec, logits: torch.Tensor
) -> tuple[list[int], int | None, list[dict] | None]:
    """Greedy matching at T = 0, tree speculative sampling at T > 0: (path, residual token, decisions)."""
    if sampling.greedy:
        return greedy_path(tokens, spec, logits), None, None
    return sample_path(tokens, spec, target_probs(logits, sampling), gen)


@dataclass
class TreeResult:
    """One verified tree: what was drafted and sent, what the target said, and what was accepted."""

    tree: DraftTree
    nodes: list[int]  # drafted indices sent to verification, in order
    spec: TreeSpec
    tokens: list[int]  # their tokens
    logits: torch.Tensor  # [n, V]
    hidden: torch.Tensor  # [n, H]
    path: list[int]  # verified indices on the accepted path, root first
    next_root: int | None
    decisions: list[dict] | None
    f_t: torch.Tensor  # the feature the step drafted from

    @property
    def accepted(self) -> list[int]:
        return [self.tokens[i] for i in self.path[1:]]


class TreeStepper:
    """Per-generation state of a tree method: the head's drafter (with its own KV cache) and the tree shape.

    What the drafter reads of the target is EAGLE's final hidden state; a head that reads something else
    (EAGLE-3's fused layers, specviz.heads.eagle3_drafter) brings its own drafter and overrides
    `root_feature` and `verify`.
    """

    def __init__(self, lm: LoadedModel, head: EagleHead, cfg: Shape, drafter: Drafter | None = None) -> None:
        self.cfg = cfg
        self.drafter = drafter if drafter is not None else Drafter(head, lm, head_dtype(lm, cfg))
        self.paths = static_paths(head, cfg) if cfg.tree == "static" else []

    @classmethod
    def start(cls, run: Step, head: EagleHead, cfg: Shape) -> TreeStepper:
        """Prefill the target, then the head's own prefill over the prompt's pairs (timed as prefill)."""
        _, hidden = run.prefill()
        stepper = cls(run.lm, head, cfg)
        t = run.now()
        stepper.drafter.reset(run.prompt_ids, hidden)
        run.prefill_s += run.now() - t
        return stepper

    def draft(self, feature: torch.Tensor, root: int) -> DraftTree:
        """Catch the head up with the verified features, then grow this step's tree from the root."""
        tree = DraftTree(tokens=[root])
        tree.feats[0], tree.logps[0] = self.drafter.catch_up(feature, root)
        grow(self.drafter, tree, self.cfg, self.cfg.tree, self.paths)
        return tree

    def root_feature(self, run: Step) -> torch.Tensor:
        """What the root's pair reads of the last committed token: its final hidden state."""
        return run.pending_hidden

    def verify(self, run: Step, tokens: list[int], spec: TreeSpec) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One target forward over the tree: (logits [n, V], hidden [n, H], what the drafter reads per node)."""
        logits, hidden = verify_tree(run.lm, run.cache, tokens, spec)
        return logits, hidden, hidden

    def step(
        self, run: Step, root: int, extend: Callable[[DraftTree], None] | None = None, head: bool = True
    ) -> TreeResult:
        """propose (draft tree, then `extend`) → verify (one target forward) → accept → commit.

        With head=False the head drafts nothing this step (the tree is what `extend` adds to the root) and
        its verified pairs wait in its queue until the next step that drafts.
        """
        f_t, prefix = self.root_feature(run), run.seq_len
        with run.phase("draft"):
            tree = self.draft(f_t, root) if head else DraftTree(tokens=[root])
            if extend is not None:
                extend(tree)
            nodes, spec = tree.verified()
            tokens = [tree.tokens[n] for n in nodes]
        with run.phase("verify"):
            logits, hidden, feats = self.verify(run, tokens, spec)
        path, nxt, decisions = tree_accept(run.sampling, run.gen, tokens, spec, logits)
        with run.phase("commit"):
            commit_path(run.cache, prefix, path)
            if head:
                self.drafter.rollback(prefix)  # the head keeps pairs 0..N-1, all built from true features
            else:
                self.drafter.push(f_t[None], [root])  # the root's pair, which drafting would have run
            self.drafter.push(feats[path], [tokens[i] for i in path[1:]])
        return TreeResult(tree, nodes, spec, tokens, logits, hidden, path, nxt, decisions, f_t)

    def record(self, res: TreeResult, text: Callable[[int], str]) -> dict[str, Any]:
        """The fields of an EagleStep for this result (figure data, built after the step's clock stops)."""
        root = res.tokens[0]
        emb = self.drafter.embed(torch.tensor([root], device=self.drafter.device)).detach()[0]
        return {
            "tree": tree_detail(res.tree, text, self.cfg.tree),
            "verify_nodes": res.nodes,
            "verify_parents": res.spec.parents,
            "path": [res.nodes[i] for i in res.path],
            "features": self.feature_record(res, emb) if 0 in res.tree.feats else {},  # {}: the head skipped
            "decisions": res.decisions,
            "residual_token": res.next_root,
        }

    def feature_record(self, res: TreeResult, root_embed: torch.Tensor) -> dict:
        """What the head read and predicted at the root against the target's feature, a few dimensions of it."""
        return feature_view(res.f_t, root_embed, res.tree.feats[0], res.hidden[0])
