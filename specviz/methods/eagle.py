"""EAGLE-2: a one-layer head drafts at the level of features, and its draft tree grows where the head is confident.

1. Feature-level drafting (EAGLE). The head reads pairs (f_t, x_t+1): the target's last hidden state at one position
   and the token sampled after it, and predicts the next feature, which the target's own LM head turns into draft
   tokens. Its KV cache holds the verified pairs (heads.eagle_drafter.Drafter); drafting deeper, it reads its own
   predicted features.
2. The dynamic tree (EAGLE-2). A draft's probability tracks how likely the target is to accept it, so the tree grows
   by each node's cumulative log-probability (`grow`): each round expands the top_k newest nodes with the best path
   score, top_k children each; after `depth` rounds the whole tree is reranked and the total_tokens best nodes, root
   included, are verified. A child never outscores its parent, so what is kept is a tree.
3. One target forward verifies the tree (tree attention), the acceptance walk keeps the longest path the target
   agrees with (greedy at T = 0, tree speculative sampling at T > 0: lossless either way), and the head keeps the
   accepted path's true features for the next step (`EagleProposer.commit`). The step is the tree methods' one step
   (methods.speculator.TreeSpeculator.step), the verifier specviz.trees.verifier's.

Variants a setting selects: EAGLE-1's static tree (tree="static") and the confidence budget (min_tokens above 0),
whose rounds are decided on the host (specviz.trees.draft_tree: grow_static, grow_dynamic). EAGLE-3
(specviz.methods.eagle3) and the n-gram hybrid (specviz.methods.hybrid) extend this file's Config and proposer.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import torch

from specviz.core.details import Detail, EagleDetail
from specviz.core.drafting import fit_field
from specviz.core.host import fetch
from specviz.core.model import LoadedModel
from specviz.core.paths import folder_problem
from specviz.core.sampling import ConfigError, check_between
from specviz.heads.eagle import DEFAULT_DIR, EagleHead
from specviz.heads.eagle_drafter import drafter, head_for, load_head, tiny_head
from specviz.methods.base import Card, Outcome, Run, Step, generator
from specviz.methods.speculator import TreeSpeculator, path_outcome
from specviz.trees import draft_tree
from specviz.trees.draft_tree import (
    Budget,
    DraftTree,
    Shape,
    TreeDrafter,
    feature_view,
    static_paths,
    tree_detail,
)
from specviz.trees.tree import TreeSpec
from specviz.trees.verifier import RunView, TreeVerifier, Verified
from specviz.trees.walk import Walk

CARD = Card(
    name="eagle",
    label="EAGLE-2",
    summary="A one-layer head drafts features, not just tokens; a dynamic tree is verified in one pass.",
    colour="#009e73",
    order=5,
    head="eagle",
    head_label="EAGLE-2 head",
    models=DEFAULT_DIR,
    batched="eagle",
    confidence=True,
    preset_fields=("depth", "top_k", "total_tokens", "tree"),
)


@dataclass(frozen=True)
class Config:
    """EAGLE-2's tree, head and confidence budget; EAGLE-3's Config and the hybrid's extend it (the hybrid with its
    pool's settings).

    The shape (depth, top_k, total_tokens) is fitted to the device where a run starts (specviz.tuning.fit: the
    head's held-out acceptance against this device's measured step cost, up to the paper's 5 / 10 / 60); a field
    given a value keeps it. A run whose caller skips the fit takes the fallback 2 / 4 / 6.

    The confidence budget (draft_tree.Budget says the rule): min_tokens 0 keeps the fixed budget (total_tokens
    nodes every step); above 0 the tree keeps at least that many nodes (root included) and at most total_tokens.
    """

    # the shape: 0 = fitted to the device where the run starts (specviz.tuning.fit), else as given
    depth: int = field(default=0, metadata=fit_field(2))  # draft rounds = deepest drafted token
    # dynamic: nodes expanded per round and children per node; static: max rank
    top_k: int = field(default=0, metadata=fit_field(4))
    # nodes verified in one target forward, ROOT INCLUDED (total_tokens - 1 drafted; every tree method's Config
    # counts the same way, Medusa's and Hydra's too)
    total_tokens: int = field(default=0, metadata=fit_field(6))
    tree: str = "dynamic"  # "dynamic" = EAGLE-2 (expand by confidence, rerank); "static" = EAGLE-1
    head: str = ""  # folder of a trained head; "" = the method's models folder; "random" = untrained (tests)
    head_dtype: str = "auto"  # the draft's dtype: "auto" = bf16 where the device computes it natively, else fp32
    min_tokens: int = 0
    node_floor: float = 0.0  # a node beyond min_tokens joins while its calibrated path acceptance reaches this
    depth_floor: float = 0.0  # another draft round runs while the frontier's best path acceptance reaches this

    def __post_init__(self) -> None:
        check_shape(self)

    @classmethod
    def fitted(cls: type[C], **fields: Any) -> C:
        """The Config a page's sliders set, none of which sees another's value: the confidence budget's floor
        kept where check_shape accepts it (0, fixed, stays 0; else between 2 and total_tokens; none on a static
        tree); every other field as given, checked."""
        if least := int(fields.get("min_tokens", 0)):
            dynamic = fields.get("tree", "dynamic") == "dynamic"
            fields |= {"min_tokens": max(2, min(least, int(fields.get("total_tokens", least)))) if dynamic else 0}
        return cls(**fields)

    @property
    def forward_tokens(self) -> int:
        """Tokens one target forward verifies once the tree is full, the root included (the pool may add more)."""
        return self.total_tokens


TREES = ("dynamic", "static")
C = TypeVar("C", bound=Config)


def check_shape(cfg: Config) -> None:
    """ConfigError unless an EAGLE-family Config has a usable tree shape, head dtype and budget."""
    for name, low, high in (("depth", 1, 12), ("top_k", 1, 32), ("total_tokens", 2, 256)):
        if getattr(cfg, name) != 0:  # 0: fitted where the run starts
            check_between(name, getattr(cfg, name), low, high)
    if cfg.tree not in TREES:
        raise ConfigError(f"tree must be 'dynamic' or 'static', got {str(cfg.tree)[:40]!r}.")
    if cfg.head_dtype not in ("auto", "bf16", "fp32", "model"):
        raise ConfigError(f"head_dtype must be auto, bf16, fp32 or model, got {str(cfg.head_dtype)[:40]!r}.")
    if why := folder_problem(cfg.head):
        raise ConfigError(f"head {why}.")
    if cfg.min_tokens:
        check_between("min_tokens", cfg.min_tokens, 2, cfg.total_tokens or 256)
        if cfg.tree != "dynamic":
            raise ConfigError("The confidence budget (min_tokens above 0) trims a dynamic tree; set tree='dynamic'.")
    check_between("node_floor", cfg.node_floor, 0.0, 1.0)
    check_between("depth_floor", cfg.depth_floor, 0.0, 1.0)


@dataclass
class EagleDraft:
    """A drafted tree and the part of it sent to verification: its nodes in order, their tree and tokens."""

    tree: DraftTree
    nodes: list[int]  # drafted indices sent to verification, in order
    spec: TreeSpec
    tokens: list[int]  # their tokens
    f_t: torch.Tensor  # the feature the step drafted from

    @classmethod
    def of(cls, tree: DraftTree, f_t: torch.Tensor) -> EagleDraft:
        """The tree's verified part (DraftTree.verified: the kept nodes, in order)."""
        nodes, spec = tree.verified()
        return cls(tree, nodes, spec, [tree.tokens[n] for n in nodes], f_t)


@dataclass
class TreeResult:
    """One verified tree: what was drafted and sent, what the target said, and what was accepted."""

    draft: EagleDraft
    verified: Verified
    walk: Walk  # the acceptance: path (verified indices, root first), next root, decisions

    @property
    def path(self) -> list[int]:
        return self.walk.path


def budget_of(cfg: Config, confidence: Sequence[float] = ()) -> Budget | None:
    """The Config's confidence budget over a head's confidence table; None for the fixed budget."""
    if not cfg.min_tokens:
        return None
    return Budget(cfg.min_tokens, cfg.node_floor, cfg.depth_floor, tuple(confidence))


class HeadDrafter(TreeDrafter, Protocol):
    """What the proposer asks of a head's drafter beyond growing a tree (specviz.heads.eagle_drafter.Drafter is one)."""

    embed: Any  # the target's input embeddings: token ids [n] -> [n, H]

    def reset(self, prompt_ids: list[int], prompt_hidden: torch.Tensor) -> None: ...
    def push(self, feats: torch.Tensor, tokens: list[int]) -> None: ...
    def catch_up(self, root_feat: torch.Tensor, root: int) -> tuple[torch.Tensor, torch.Tensor]: ...
    def rollback(self, length: int) -> None: ...


def grow(dr: TreeDrafter, tree: DraftTree, cfg: Shape) -> None:
    """EAGLE-2's dynamic tree, every round on the device. Round 1: the root's top_k children. Each later round:
    the frontier is the top_k of the newest layer by cumulative log-prob (torch.topk), the head runs those nodes
    at once (each sees the prefix, its drafted ancestors and itself), and each gets its top_k children, their
    scores its score plus their log-probs. Nothing is read until the end: the whole tree comes back in one host
    read, is rebuilt as a DraftTree (numbered as trees.draft_tree.grow_dynamic numbers it: children in the order
    of their frontier node's index, then of rank) and reranked to the total_tokens best nodes."""
    k, dev, base = cfg.top_k, dr.device, dr.length
    vals, idx = tree.logps[0].float().topk(k)
    scores, tokens, parent_feats = vals, dr.token_ids(idx), tree.feats[0].expand(k, -1)
    anc = torch.zeros(k, 0, dtype=torch.bool, device=dev)  # each newest node's drafted ancestors among the fed ones
    kept: list[torch.Tensor] = [tokens, vals]  # what the read brings back: round 1, then (frontier, tokens, values)
    eye = torch.eye(k, dtype=torch.bool, device=dev)
    for rnd in range(2, cfg.depth + 1):
        top = scores.topk(min(k, scores.numel())).indices.sort().values  # the frontier, in index order
        m = top.numel()
        see = torch.cat([torch.ones(m, base, dtype=torch.bool, device=dev), anc[top], eye[:m, :m]], dim=1)
        pos = torch.full((m,), base + rnd - 2, dtype=torch.long, device=dev)  # base - 1 + the frontier's depth
        out, logp = dr.run(parent_feats[top], tokens[top], pos, see)
        vals, idx = logp.float().topk(k, dim=-1)  # [m, k]
        row = torch.arange(m, device=dev).repeat_interleave(k)
        scores = (scores[top][:, None] + vals).reshape(-1)
        tokens, parent_feats = dr.token_ids(idx).reshape(-1), out[row]
        anc = torch.cat([anc[top], eye[:m, :m]], dim=1)[row]
        kept += [top, tokens, vals.reshape(-1)]
    got = fetch(*kept)  # the tree's one host read
    layer = [tree.add(0, int(t), v) for t, v in zip(got[0], got[1], strict=True)]
    for r in range(cfg.depth - 1):
        front, toks, logps = got[2 + 3 * r], got[3 + 3 * r], got[4 + 3 * r]
        nodes = [layer[int(i)] for i in front]
        for n in nodes:
            tree.expanded[n] = r + 2
        layer = [tree.add(nodes[j // k], int(t), v) for j, (t, v) in enumerate(zip(toks, logps, strict=True))]
    tree.keep_best(cfg.total_tokens)


def grow_tree(
    dr: TreeDrafter, tree: DraftTree, cfg: Config, kind: str, paths: list[tuple[int, ...]], budget: Budget | None = None
) -> None:
    """The step's tree: EAGLE-2's (`grow`), or a variant a setting selects, grown round by round on the host
    (trees.draft_tree.grow): EAGLE-1's static tree along `paths` (kind "static"), the confidence budget's rounds
    (each decided on the last one's values)."""
    if kind == "dynamic" and budget is None:
        grow(dr, tree, cfg)
    else:
        draft_tree.grow(dr, tree, cfg, kind, paths, budget=budget)


class EagleProposer:
    """Per-generation state of an EAGLE tree method: the head's drafter (with its own KV cache) and the tree shape.

    What the drafter reads of the target is EAGLE's final hidden state; a head that reads something else
    (EAGLE-3's fused layers, specviz.methods.eagle3.Eagle3Proposer) names the layers and overrides `root_feature`,
    `commit` and the record.
    """

    layers: tuple[int, ...] = ()  # the target layers whose inputs the head reads: none, the final hidden state

    def __init__(
        self, drafter: HeadDrafter, cfg: Config, calibration: list[list[float]], confidence: Sequence[float] = ()
    ) -> None:
        """calibration: the head's rank accuracies (EAGLE-1's static tree); confidence: its confidence table
        (the budget's, when cfg.min_tokens is above 0)."""
        self.cfg, self.drafter = cfg, drafter
        self.paths = static_paths(calibration, cfg) if cfg.tree == "static" else []
        self.budget = budget_of(cfg, confidence)

    def start(self, run: RunView, prompt_feats: torch.Tensor) -> None:
        """The head's own prefill over the prompt's pairs (prompt_feats [n, …]), timed as prefill."""
        t = run.now()
        self.drafter.reset(run.prompt_ids, prompt_feats)
        run.prefill_s += run.now() - t

    def propose(self, run: RunView, root: int) -> EagleDraft:
        """This step's tree, drafted from the last committed token's feature and the root."""
        f_t = self.root_feature(run)
        return EagleDraft.of(self.draft(f_t, root), f_t)

    def draft(self, feature: torch.Tensor, root: int) -> DraftTree:
        """Catch the head up with the verified features, then grow this step's tree from the root."""
        tree = DraftTree(tokens=[root])
        tree.feats[0], tree.logps[0] = self.drafter.catch_up(feature, root)
        grow_tree(self.drafter, tree, self.cfg, self.cfg.tree, self.paths, self.budget)
        return tree

    def root_feature(self, run: RunView) -> torch.Tensor:
        """What the root's pair reads of the last committed token: its final hidden state."""
        return run.pending_hidden

    def skip(self, feature: torch.Tensor, root: int) -> DraftTree:
        """A tree of the root alone: the head drafts nothing this step, and the root's pair, which drafting
        would have run, waits in its queue with the verified pairs until the next step that drafts."""
        self.drafter.push(feature[None], [root])
        return DraftTree(tokens=[root])

    def commit(self, v: Verified, path: list[int]) -> None:
        """The head keeps its pairs before the tree (all built from true features; none were drafted past them on
        a skipped step) and queues the accepted path's verified pairs (what it reads of each node: v.feats)."""
        self.drafter.rollback(v.prefix)
        self.drafter.push(v.feats[path], [v.tokens[i] for i in path[1:]])

    def record(self, res: TreeResult, text: Callable[[int], str]) -> dict[str, Any]:
        """The fields of an EagleDetail for this result (figure data, built after the step's clock stops)."""
        d = res.draft
        emb = self.drafter.embed(torch.tensor([d.tokens[0]], device=self.drafter.device)).detach()[0]
        return {
            "tree": tree_detail(d.tree, text, self.cfg.tree),
            "verify_nodes": d.nodes,
            "verify_parents": d.spec.parents,
            "path": [d.nodes[i] for i in res.path],
            "features": self.feature_record(res, emb) if 0 in d.tree.feats else {},  # {}: the head skipped
            "decisions": res.walk.decisions,
            "residual_token": res.walk.next_root,
        }

    def feature_record(self, res: TreeResult, root_embed: torch.Tensor) -> dict:
        """What the head read and predicted at the root against the target's feature, a few dimensions of it."""
        d = res.draft
        return feature_view(d.f_t, root_embed, d.tree.feats[0], res.verified.hidden[0])


class Eagle(TreeSpeculator):
    """One EAGLE-2 generation: the head's proposer and the tree verifier in the tree methods' one step (propose →
    verify → accept → commit); every drafted node counts as proposed, sent to the target or not."""

    DETAIL: type[Detail] = EagleDetail
    proposer: EagleProposer

    def outcome(self, run: Run, draft: Any, v: Verified, w: Walk) -> Outcome:
        res = TreeResult(draft, v, w)
        return path_outcome(
            v, w, lambda: self.DETAIL(**self.proposer.record(res, run.lm.token_text)), len(draft.tree.tokens) - 1
        )


def proposer(lm: LoadedModel, cfg: Config, head: EagleHead | None = None) -> EagleProposer:
    """The EAGLE head's proposer for EAGLE-2 and the hybrid: the head given, else cfg.head's (ConfigError when none
    is); the proposer holds the Config (tree shape, budget), the head's module sees only its folder and dtype."""
    head = head_for(lm, cfg.head, head)
    return EagleProposer(drafter(lm, head, cfg.head_dtype), cfg, head.config.calibration, head.config.confidence)


def get_head(lm: LoadedModel, cfg: Config) -> EagleHead:
    """The head named by the config, loaded once per (model, folder, file time)."""
    return load_head(lm, cfg.head)


def begin(run: Run, cfg: Config, head: EagleHead | None = None) -> Step:
    """The head (given, else cfg.head's; ConfigError when none is) drafting from the run's state."""
    return Eagle(proposer(run.lm, cfg, head), TreeVerifier()).start(run)


generate = generator(CARD.name, Config, begin, "Decode with an EAGLE head until EOS or max_new_tokens.")


def tiny_resources(lm: LoadedModel, seed: int = 1, accepting: bool = False) -> dict:
    """An untrained head (heads.eagle_drafter.tiny_head) and a small tree, for any model."""
    return {
        "config": Config(depth=3, top_k=3, total_tokens=8, head_dtype="model"),
        "head": tiny_head(lm, seed, accepting),
    }


def accepting_resources(lm: LoadedModel) -> dict:
    """tiny_resources with a head whose every draft is right on a model whose next token ignores its input."""
    return tiny_resources(lm, accepting=True)
