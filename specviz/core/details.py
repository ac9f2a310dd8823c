"""Each method's own step record: a frozen dataclass of plain JSON values, validated when a trace loads.

`StepTrace.detail` holds one of these (or None for a step that ran no forward pass, and for plain
decoding). Figures pick the type from `Trace.method` through `DETAILS`; nothing probes dict keys.
Nested records (decision rows, tree nodes) stay small dicts of JSON values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from specviz.core.schema import Nullable, SchemaError, build


class DetailError(ValueError):
    """A step detail whose fields are missing or of the wrong JSON type."""


@dataclass(frozen=True)
class Detail:
    """Base of every method's step detail."""

    METHOD: ClassVar[str] = ""
    # specs (specviz.core.schema) of the fields whose annotation does not say enough: the nested records
    NESTED: ClassVar[dict[str, Any]] = {}

    @classmethod
    def from_json(cls, data: Any) -> Detail:
        """Rebuild from JSON, checking every field (and the records nested in it) against its schema."""
        try:
            detail = build(cls, data, cls.NESTED, f"A {cls.__name__} step detail")
        except SchemaError as exc:
            raise DetailError(str(exc)) from None
        if why := detail.problem():
            raise DetailError(f"A {cls.__name__} step detail is inconsistent: {why}.")
        return detail

    def problem(self) -> str | None:
        """What makes this record inconsistent (an index out of range, lists of different lengths), or None."""
        return None


def tree_problem(parents: list[int], *indices: list[int]) -> str | None:
    """Why `parents` is not a rooted tree in topological order (each parent an earlier node), or why an index
    list names a node it does not have; None when all is well."""
    n = len(parents)
    if n and (parents[0] != -1 or any(not 0 <= p < i for i, p in enumerate(parents) if i)):
        return "its tree's parents are not earlier nodes"
    if any(not 0 <= i < n for idx in indices for i in idx):
        return f"it names a node outside its tree of {n}"
    return None


def lengths_problem(**lists: list) -> str | None:
    """Why lists that should run side by side do not (their lengths differ), or None."""
    if len({len(v) for v in lists.values()}) > 1:
        return f"{', '.join(lists)} differ in length"
    return None


DISTS = {"tokens": ["int"], "p": ["float"], "q": ["float"], "residual": ["float"], "texts?": ["str"]}
RECORD = {  # one judged token of a chain (specviz.core.acceptance)
    "pos": "int",
    "token": "int",
    "p": "float",
    "q": "float",
    "ratio": "float",
    "u": "float?",
    "accepted": "bool",
    "threshold?": "float",
    "dists?": DISTS,
    "text?": "str",
    "entropy?": "float",
}
NODE = {  # one node of a heads method's verified tree (specviz.trees.walk.node_records)
    "token": "int",
    "text": "str",
    "head": "int",
    "rank": "int?",
    "head_prob": "float?",
    "target_prob": "float?",
    "status": "str",
    "reason": "str",
    "reads?": ["str"],
}
TREE = {  # EAGLE's drafted tree (specviz.trees.draft_tree.tree_detail)
    "kind": "str",
    "tokens": ["int"],
    "texts": ["str"],
    "parents": ["int"],
    "depth": ["int"],
    "score": ["float"],
    "conf": ["float"],
    "expanded": ["int"],
    "kept": ["bool"],
}
VECTOR = ["float", 4096]
FEATURES = {  # empty when the head skipped the step
    "dims?": ["int"],
    "f_t?": VECTOR,
    "embed?": VECTOR,
    "f_pred?": VECTOR,
    "f_true?": VECTOR,
    "norm?": {"f_t?": "float", "embed?": "float", "f_pred?": "float", "f_true?": "float"},
    "cos_pred_true?": "float",
    "cos_prev_true?": "float",
    "layer_rms?": VECTOR,
    "layer_peak?": VECTOR,
}
DECISION = {"node": "int", "token": "int", "p": "float", "u": "float", "accepted": "bool"}
GRAM = {"tail": ["int"], "texts": ["str"], "hits": "int"}  # one n-gram of lookahead's pool
EAGLE_NESTED = {"tree": TREE, "features": FEATURES, "decisions": Nullable([DECISION])}


@dataclass(frozen=True)
class ChainStep(Detail):
    """A drafted chain judged token by token (speculative sampling, prompt lookup)."""

    NESTED: ClassVar[dict[str, Any]] = {"records": [RECORD]}
    rule: str  # greedy (T = 0), speculative, typical or flawed
    drafts: list[int]  # the proposed tokens after the root
    n_accepted: int  # how many of them were accepted
    records: list[dict]  # one decision per judged token: pos, token, text, p, q, ratio, u, accepted, entropy

    def problem(self) -> str | None:
        ok = 0 <= self.n_accepted <= len(self.drafts) and len(self.records) <= len(self.drafts) + 1
        return None if ok else "it accepts or judges more tokens than it drafted"


@dataclass(frozen=True)
class SpsStep(ChainStep):
    """Speculative sampling with a layer-prefix draft."""

    METHOD: ClassVar[str] = "sps"


@dataclass(frozen=True)
class PldStep(ChainStep):
    """Prompt lookup: how the copied draft was found."""

    METHOD: ClassVar[str] = "pld"
    ngram: int  # length of the matched suffix (0: no match, nothing drafted)
    match_at: int  # where its continuation starts in prompt + output (-1: no match)
    source: str  # "prompt", "output" or "" (no match)
    rate: float  # the acceptance estimate that chose the draft length


@dataclass(frozen=True)
class MedusaStep(Detail):
    """The candidate tree, every node's fate, and predicted against measured tokens."""

    METHOD: ClassVar[str] = "medusa"
    NESTED: ClassVar[dict[str, Any]] = {"nodes": [NODE]}
    parents: list[int]  # the verified tree (node 0 = root)
    nodes: list[dict]  # per node: token, text, head, rank, head_prob, target_prob, status, reason
    path: list[int]  # accepted node indices from the root
    predicted: float  # 1 + E[L] from the calibration
    measured: int  # len(path)
    acceptance: str  # greedy (T = 0), exact or typical

    def problem(self) -> str | None:
        return lengths_problem(parents=self.parents, nodes=self.nodes) or tree_problem(self.parents, self.path)


@dataclass(frozen=True)
class HydraStep(MedusaStep):
    """A Medusa-shaped step whose heads read their branch: each node also records `reads`, the tokens its head saw."""

    METHOD: ClassVar[str] = "hydra"


@dataclass(frozen=True)
class EagleStep(Detail):
    """The drafted tree (kept and pruned), what was verified, and what the head consumed."""

    METHOD: ClassVar[str] = "eagle"
    NESTED: ClassVar[dict[str, Any]] = EAGLE_NESTED
    tree: dict  # kind, tokens, texts, parents, depth, score, conf, expanded, kept (every drafted node)
    verify_nodes: list[int]  # drafted indices sent to verification, in order
    verify_parents: list[int]  # the tree they form
    path: list[int]  # drafted indices on the accepted path, root first
    features: dict  # a few feature dimensions the head consumed and produced
    decisions: list[dict] | None  # tree speculative sampling's decisions (None at T = 0)
    residual_token: int | None  # drawn from the residual where every child was rejected

    def problem(self) -> str | None:
        t = self.tree
        per_node = {k: t[k] for k in ("tokens", "texts", "parents", "depth", "score", "conf", "expanded", "kept")}
        return (
            lengths_problem(**per_node)
            or tree_problem(t["parents"], self.verify_nodes, self.path)
            or lengths_problem(verify_nodes=self.verify_nodes, verify_parents=self.verify_parents)
            or tree_problem(self.verify_parents)
        )


@dataclass(frozen=True)
class JacobiStep(Detail):
    """One Jacobi iteration's row of the convergence grid."""

    METHOD: ClassVar[str] = "jacobi"
    offset: int  # output index of the root
    row: list[int]  # root + the guesses fed
    texts: list[str]
    status: list[str]  # per cell: committed, init, fixed or changed
    prediction: list[int]  # the target's argmax at every cell
    n_accepted: int  # guesses accepted after the root

    def problem(self) -> str | None:
        return lengths_problem(row=self.row, texts=self.texts, status=self.status, prediction=self.prediction)


@dataclass(frozen=True)
class LookaheadStep(Detail):
    """The window, the harvested n-grams, the verified candidates and the mask layout."""

    METHOD: ClassVar[str] = "lookahead"
    NESTED: ClassVar[dict[str, Any]] = {
        "layout": {"levels": "int", "width": "int", "cands": "int", "depth": "int"},
        "pool_top": Nullable([{"key": "int", "text": "str", "grams": [GRAM]}]),
    }
    window: list[list[int]]  # levels fed this step, oldest first
    window_texts: list[list[str]]
    new_level: list[int]
    new_texts: list[str]
    harvested: list[list[int]]
    harvest_status: list[str]
    candidates: list[list[int]]
    candidate_texts: list[list[str]]
    matched: list[int]  # per candidate, tokens agreeing with what was committed
    best: int  # the accepted candidate, -1 when none
    accepted_tokens: list[int]  # tokens accepted after the root
    pool_size: int
    pool_keys: int
    layout: dict  # levels, width, cands, depth
    pool_top: list[dict] | None = None  # the pool's busiest keys (recorded on the last step)


@dataclass(frozen=True)
class HybridStep(EagleStep):
    """An EAGLE step whose tree also holds n-gram candidates: who proposed each drafted node."""

    METHOD: ClassVar[str] = "hybrid"
    sources: list[str]  # per drafted node (as tree["tokens"]): "head", "pool" or "both"
    candidates: list[list[int]]  # the n-gram candidates looked up for this root
    copy: bool = False  # a copy step: the pool's candidate verified alone, the head drafted nothing


@dataclass(frozen=True)
class Eagle3Step(EagleStep):
    """An EAGLE step drafted by an EAGLE-3 head. `features` shows the fused input g and the head's normed
    output against the target's final hidden state (the two vectors the same LM-head rows read; the head
    is trained on tokens only, so their cosine is a diagnostic, not its objective)."""

    METHOD: ClassVar[str] = "eagle3"
    layers: list[int]  # the target decoder layers whose inputs the head fuses, low to high


DETAILS: dict[str, type[Detail]] = {
    d.METHOD: d for d in (SpsStep, PldStep, MedusaStep, HydraStep, EagleStep, HybridStep, JacobiStep, LookaheadStep)
}
DETAILS[Eagle3Step.METHOD] = Eagle3Step
