"""Each method's own step record: a frozen dataclass of plain JSON values, validated when a trace loads.

`StepTrace.detail` holds one of these (or None for a step without a forward pass, and for plain decoding).
Every method's record lives here, in one place, so a trace loads without importing a method (the loader and the
figures sit beside or above this module, never above the methods): every record type with a METHOD registers
itself in `DETAILS` as it is defined, and a trace finds its type by the method it names (`detail_for`). A method
defined outside specviz (a test's fixture) registers its record by defining it. Nested records stay small dicts of
JSON values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from specviz.core.schema import Between, Nullable, OneOf, SchemaError, bad_depths, bad_lengths, bad_tree, build

# What a real run can produce (each Config's maxima), checked at load: a figure's sizes (n² mask, depth slider) follow
MAX_DRAFTED = 12 * 32 * 32  # EAGLE-2 drafts 1 + top_k + (depth - 1)·top_k² ≤ 11,297 (depth ≤ 12, top_k ≤ 32) + grafts
MAX_VERIFIED = 256 + 32  # one verified tree: EAGLE's total_tokens ≤ 256 + hybrid's pool_extra ≤ 32 (Medusa's ≤ 129)
MAX_TREE_DEPTH = 16  # EAGLE's depth ≤ 12; hybrid's grafts and copies, from the root, ≤ 16 tokens
MAX_CHAIN = 16  # drafts of one chain step: SpS's gamma ≤ 16, prompt lookup's max_draft ≤ 16
MAX_ROW = 33  # a Jacobi row: the root + guesses ≤ 32
LAYOUT = {"levels": (0, 7), "width": (1, 32), "cands": (0, 32), "depth": (1, 7)}  # lookahead: N ≤ 8, W, G ≤ 32
PROB, NATS, SCORE = Between("float", 0, 1), Between("float", 0, 64), Between("float", -1e6, 0)  # p, entropy, log p
STATUS = OneOf(("accepted", "rejected", "passed", "unreached"))  # a verified node's fate (viz.tree's colours)


class DetailError(ValueError):
    """A step detail whose fields are missing or of the wrong JSON type."""


DETAILS: dict[str, type[Detail]] = {}  # method name -> its step record type, filled as each type is defined


def detail_for(method: str) -> type[Detail] | None:
    """The step record type of `method` (None for a method that records none, or an unknown one)."""
    return DETAILS.get(method)


@dataclass(frozen=True)
class Detail:
    """Base of every method's step detail."""

    METHOD: ClassVar[str] = ""
    # specs (specviz.core.schema) of the fields whose annotation does not say enough: the nested records
    NESTED: ClassVar[dict[str, Any]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.METHOD:  # a method's record (not a shared base such as ChainDetail): the trace finds it by name
            DETAILS[cls.METHOD] = cls

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

    def placed(self, before: int) -> str | None:
        """Why this record does not fit a step that follows `before` output tokens, or None."""
        return None


DISTS = {"tokens": ["int"], "p": [PROB], "q": [PROB], "residual": [PROB], "texts?": ["str"]}
RECORD = {  # one judged token of a chain (specviz.core.acceptance)
    "pos": "int",
    "token": "int",
    "p": PROB,
    "q": PROB,
    "ratio": "float",
    "u": Nullable(PROB),
    "accepted": "bool",
    "threshold?": "float",
    "dists?": DISTS,
    "text?": "str",
    "entropy?": NATS,
}
NODE = {  # one node of a heads method's verified tree (specviz.trees.walk.node_records)
    "token": "int",
    "text": "str",
    "head": Between("int", 0, 64),
    "rank": "int?",
    "head_prob": Nullable(PROB),
    "target_prob": Nullable(PROB),
    "status": STATUS,
    "reason": "str",
    "reads?": ["str", MAX_TREE_DEPTH],
}
PER_NODE = {  # EAGLE's drafted tree (specviz.trees.draft_tree.tree_detail): one item per drafted node
    "tokens": "int",
    "texts": "str",
    "parents": Between("int", -1, MAX_DRAFTED),
    "depth": Between("int", 0, MAX_TREE_DEPTH),
    "score": SCORE,
    "conf": PROB,
    "expanded": Between("int", -1, MAX_TREE_DEPTH),
    "kept": "bool",
}
TREE = {"kind": "str", **{k: [v, MAX_DRAFTED] for k, v in PER_NODE.items()}}
VECTOR = ["float", 4096]
VECTORS = ("f_t", "embed", "f_pred", "f_true", "layer_rms", "layer_peak")
FEATURES = {  # empty when the head skipped the step
    **{f"{k}?": VECTOR for k in VECTORS},
    "dims?": ["int", 4096],
    "norm?": {f"{k}?": "float" for k in VECTORS[:4]},
    "cos_pred_true?": "float",
    "cos_prev_true?": "float",
}
DECISION = {"node": "int", "token": "int", "p": PROB, "u": PROB, "accepted": "bool"}
GRAM = {"tail": ["int", 7], "texts": ["str", 7], "hits": Between("int", 0, 1 << 30)}  # one n-gram of the pool
VERIFIED = [Between("int", -1, MAX_DRAFTED), MAX_VERIFIED]  # a verified tree's parents, node indices, a path
EAGLE_NESTED = {
    "tree": TREE,
    "features": FEATURES,
    "decisions": Nullable([DECISION, MAX_VERIFIED]),
    "verify_nodes": VERIFIED,
    "verify_parents": VERIFIED,
    "path": [Between("int", 0, MAX_DRAFTED), MAX_TREE_DEPTH + 1],
}


@dataclass(frozen=True)
class ChainDetail(Detail):
    """A drafted chain judged token by token (speculative sampling, prompt lookup)."""

    NESTED: ClassVar[dict[str, Any]] = {"records": [RECORD, MAX_CHAIN + 1], "drafts": ["int", MAX_CHAIN]}
    rule: str  # greedy (T = 0), speculative, typical or flawed
    drafts: list[int]  # the proposed tokens after the root
    n_accepted: int  # how many of them were accepted
    records: list[dict]  # one decision per judged token: pos, token, text, p, q, ratio, u, accepted, entropy

    def problem(self) -> str | None:
        ok = 0 <= self.n_accepted <= len(self.drafts) and len(self.records) <= len(self.drafts) + 1
        return None if ok else "it accepts or judges more tokens than it drafted"


@dataclass(frozen=True)
class SpsDetail(ChainDetail):
    """Speculative sampling with a layer-prefix draft."""

    METHOD: ClassVar[str] = "sps"


@dataclass(frozen=True)
class PldDetail(ChainDetail):
    """Prompt lookup: how the copied draft was found."""

    METHOD: ClassVar[str] = "pld"
    ngram: int  # length of the matched suffix (0: no match, nothing drafted)
    match_at: int  # where its continuation starts in prompt + output (-1: no match)
    source: str  # "prompt", "output" or "" (no match)
    rate: float  # the acceptance estimate that chose the draft length


@dataclass(frozen=True)
class MedusaDetail(Detail):
    """The candidate tree, every node's fate, and predicted against measured tokens."""

    METHOD: ClassVar[str] = "medusa"
    NESTED: ClassVar[dict[str, Any]] = {"nodes": [NODE, MAX_VERIFIED], "parents": VERIFIED, "path": VERIFIED}
    parents: list[int]  # the verified tree (node 0 = root)
    nodes: list[dict]  # per node: token, text, head, rank, head_prob, target_prob, status, reason
    path: list[int]  # accepted node indices from the root
    predicted: float  # 1 + E[L] from the calibration
    measured: int  # len(path)
    acceptance: str  # greedy (T = 0), exact or typical

    def problem(self) -> str | None:
        unranked = any(n[k] is None for n in self.nodes[1:] for k in ("rank", "head_prob", "target_prob"))
        why = bad_lengths(parents=self.parents, nodes=self.nodes) or bad_tree(self.parents, self.path)
        return why or ("a drafted node lacks its rank or probabilities" if unranked else None)


@dataclass(frozen=True)
class HydraDetail(MedusaDetail):
    """A Medusa-shaped step whose heads read their branch: each node also records `reads`, the tokens its head saw."""

    METHOD: ClassVar[str] = "hydra"

    def problem(self) -> str | None:
        unread = any("reads" not in n for n in self.nodes[1:])
        return super().problem() or ("a drafted node lacks the branch its head read" if unread else None)


@dataclass(frozen=True)
class MedusaLookaheadDetail(MedusaDetail):
    """A Medusa step whose tree also holds Lookahead's pooled n-grams, and the window that rode beside it: who
    proposed each node (the pool's nodes have no head rank), the n-grams grafted, the window's levels."""

    METHOD: ClassVar[str] = "medusa_lookahead"
    NESTED: ClassVar[dict[str, Any]] = {
        **MedusaDetail.NESTED,
        "sources": [OneOf(("root", "head", "pool", "both")), MAX_VERIFIED],
        "candidates": [["int", 7], 16],
        "window": [["int", 16], 7],
    }
    sources: list[str]  # per node, root first: "root", "head", "pool" or "both"
    candidates: list[list[int]]  # the pool's n-grams grafted onto the tree
    window: list[list[int]]  # the Jacobi window's levels fed beside the tree
    harvested: int  # n-grams the window put in the pool after this step

    def problem(self) -> str | None:
        if len(self.sources) != len(self.nodes):
            return "its sources should name one proposer per node"
        pooled = [i for i, s in enumerate(self.sources) if s == "pool"]
        unranked = [i for i, n in enumerate(self.nodes) if i and n["rank"] is None]
        if pooled != unranked:
            return "exactly the pool's nodes should lack a head rank"
        unjudged = any(n["target_prob"] is None for n in self.nodes[1:])
        why = bad_lengths(parents=self.parents, nodes=self.nodes) or bad_tree(self.parents, self.path)
        return why or ("a node lacks its target probability" if unjudged else None)


@dataclass(frozen=True)
class EagleDetail(Detail):
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
        per_node = {k: t[k] for k in PER_NODE}
        return (
            bad_lengths(**per_node)
            or bad_tree(t["parents"], self.verify_nodes, self.path)
            or bad_depths(t["parents"], t["depth"])
            or bad_lengths(verify_nodes=self.verify_nodes, verify_parents=self.verify_parents)
            or bad_tree(self.verify_parents)
            or (None if set(self.path) <= set(self.verify_nodes) else "its accepted path leaves the verified tree")
        )


@dataclass(frozen=True)
class Eagle3Detail(EagleDetail):
    """An EAGLE step drafted by an EAGLE-3 head. `features` shows the fused input g and the head's normed
    output against the target's final hidden state (the two vectors the same LM-head rows read; the head
    is trained on tokens only, so their cosine is a diagnostic, not its objective)."""

    METHOD: ClassVar[str] = "eagle3"
    layers: list[int]  # the target decoder layers whose inputs the head fuses, low to high


@dataclass(frozen=True)
class DFlashDetail(Detail):
    """One DFlash step: the block drafted in one pass after the root, the drafter's confidence at each position,
    and how many positions the target kept (a chain: the first miss ends it)."""

    METHOD: ClassVar[str] = "dflash"
    NESTED: ClassVar[dict[str, Any]] = {
        "drafts": ["int", MAX_CHAIN],
        "texts": ["str", MAX_CHAIN],
        "conf": [PROB, MAX_CHAIN],
        "target": ["int", MAX_CHAIN],
    }
    block: int  # the drafter's block: the root and block - 1 masked positions, filled in one forward
    drafts: list[int]  # the drafted tokens after the root (cut at an EOS or at the answer's end)
    texts: list[str]
    conf: list[float]  # the drafter's probability of each draft, by block position
    target: list[int]  # the target's own token after each kept prefix: the draft kept where they agree (T = 0)
    n_accepted: int  # how many drafts the target kept

    def problem(self) -> str | None:
        n = len(self.drafts)
        if not (len(self.texts) == len(self.conf) == n and len(self.target) <= n + 1):
            return "its drafts, texts, confidences and target tokens differ in length"
        return None if 0 <= self.n_accepted <= n < self.block else "it keeps more drafts than it drafted"


@dataclass(frozen=True)
class HybridDetail(EagleDetail):
    """An EAGLE step whose tree also holds n-gram candidates: who proposed each drafted node."""

    METHOD: ClassVar[str] = "hybrid"
    NESTED: ClassVar[dict[str, Any]] = {
        **EAGLE_NESTED,
        "sources": [OneOf(("head", "pool", "both")), MAX_DRAFTED],
        "candidates": [["int", 16], 8],
    }
    sources: list[str]  # per drafted node (as tree["tokens"]): "head", "pool" or "both"
    candidates: list[list[int]]  # the n-gram candidates looked up for this root
    copy: bool = False  # a copy step: the pool's candidate verified alone, the head drafted nothing

    def problem(self) -> str | None:
        return super().problem() or bad_lengths(sources=self.sources, tokens=self.tree["tokens"])


@dataclass(frozen=True)
class JacobiDetail(Detail):
    """One Jacobi iteration's row of the convergence grid."""

    METHOD: ClassVar[str] = "jacobi"
    NESTED: ClassVar[dict[str, Any]] = {
        "row": ["int", MAX_ROW],
        "status": [OneOf(("committed", "init", "fixed", "changed")), MAX_ROW],
        "n_accepted": Between("int", 0, MAX_ROW),
    }
    offset: int  # output index of the root
    row: list[int]  # root + the guesses fed
    texts: list[str]
    status: list[str]  # per cell: committed, init, fixed or changed
    prediction: list[int]  # the target's argmax at every cell
    n_accepted: int  # guesses accepted after the root

    def problem(self) -> str | None:
        return bad_lengths(row=self.row, texts=self.texts, status=self.status, prediction=self.prediction)

    def placed(self, before: int) -> str | None:
        return None if self.offset == before else f"its offset {self.offset} is not its root's position {before}"


@dataclass(frozen=True)
class LookaheadDetail(Detail):
    """The window, the harvested n-grams, the verified candidates and the mask layout."""

    METHOD: ClassVar[str] = "lookahead"
    NESTED: ClassVar[dict[str, Any]] = {
        "layout": {k: Between("int", lo, hi) for k, (lo, hi) in LAYOUT.items()},
        "pool_top": Nullable([{"key": "int", "text": "str", "grams": [GRAM, 32]}, 8]),
        "window": [["int", 32], 7],
        "window_texts": [["str", 32], 7],
        "new_level": ["int", 32],
        "harvested": [["int", 8], 32],
        "harvest_status": [OneOf(("new", "refreshed", "evicted")), 32],
        "candidates": [["int", 7], 32],
        "candidate_texts": [["str", 7], 32],
        "matched": [Between("int", 0, 7), 32],
        "best": Between("int", -1, 31),
        "accepted_tokens": ["int", 7],
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

    def problem(self) -> str | None:
        if set(self.layout) != set(LAYOUT):
            return f"its layout should hold exactly {', '.join(LAYOUT)}"
        pairs = [(self.window, self.window_texts), (self.new_level, self.new_texts), (self.candidates, self.matched)]
        pairs += [(self.harvested, self.harvest_status), (self.candidates, self.candidate_texts)]
        pairs += [*zip(self.window, self.window_texts), *zip(self.candidates, self.candidate_texts)]
        if any(len(a) != len(b) for a, b in pairs):
            return "lists that run side by side differ in length"
        return None if self.best < len(self.candidates) else "its best candidate is not one of them"
