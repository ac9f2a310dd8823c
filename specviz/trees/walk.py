"""The acceptance walk over a verified token tree, one for every tree method (Medusa, Hydra, EAGLE-2, EAGLE-3,
the hybrid, Medusa + Lookahead) and for guessed continuations (Jacobi's row, Lookahead's pooled n-grams: `judge`
lays them out as one tree under the root, a shared prefix one branch): which path is accepted, what the next root
is, and why every judged node off it was rejected.

At T = 0 the path is the longest one matching the target's argmax. At T > 0 the "exact" rule is tree
speculative sampling: tree nodes are deterministic top-k picks, so each sibling's proposal is a point mass
q = δ_x; then min(1, p(x)/q(x)) = p(x) and the residual norm(max(p − δ_x, 0)) is p with x removed,
renormalised. Trying siblings one after another with that update is sequential sampling from p, so the token
that leaves each node is distributed exactly as p — whatever the draft proposed. "typical" is Medusa's typical
acceptance (not lossless): the longest path whose every token beats min(eps, delta·exp(-H)) of its parent's p.
A chain drafted by sampling a draft model (speculative sampling's) hands its draft distributions q too: then each
token is kept with probability min(1, p(x)/q(x)) and a rejection draws from norm(max(p − q, 0)), the rule of
Leviathan et al., of which the point mass is the case q = δ_x. "flawed" is a rule copied in many tutorials (keep x
while u < p(x)/max p, then draw from p again), kept only so the app can show, measured, that it biases the output.
`node_records` then labels every node accepted, rejected, passed or unreached, with the reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from specviz.core.acceptance import (
    decision,
    draw,
    drop,
    flawed_accept,
    flawed_residual,
    keep_prob,
    point_mass_siblings,
    rejection_view,
    residual,
    typical_threshold,
    uniform,
)
from specviz.core.host import fetch
from specviz.core.sampling import Sampling, entropies, target_probs
from specviz.trees.tree import TreeSpec, hang, longest_path

RULES = ("exact", "typical")  # a tree's rules at T > 0; a drafted chain may also be judged "flawed" (to teach)


@dataclass(frozen=True)
class Rule:
    """How a drafted node is judged at T > 0: "exact" (lossless), "typical" with its eps and delta, or "flawed"."""

    name: str = "exact"
    eps: float = 0.09  # typical: p(x) > min(eps, delta·exp(-H(p)))
    delta: float = 0.3

    def __post_init__(self) -> None:
        if self.name not in (*RULES, "flawed"):
            raise ValueError(f"Unknown rule {self.name!r}; choose one of {', '.join((*RULES, 'flawed'))}.")


EXACT = Rule()


@dataclass(frozen=True)
class Walk:
    """One tree's acceptance: the accepted path, the next root when the rule drew it, and why nodes fell."""

    path: list[int]  # accepted node indices from the root (0)
    next_root: int | None  # drawn from the residual where every child was rejected (exact, T > 0), else None
    why: dict[int, str]  # node -> why it was rejected, for every judged node off the path
    decisions: list[dict[str, Any]] | None  # exact at T > 0: each child's draw {node, token, p, u, accepted}


def walk(  # noqa: PLR0913 (the verified tree's parts, as each verifier holds them)
    sampling: Sampling,
    gen: torch.Generator,
    tokens: list[int],
    spec: TreeSpec,
    logits: torch.Tensor,
    probs: torch.Tensor | None,
    text: Callable[[int], str],
    rule: Rule = EXACT,
    q: torch.Tensor | None = None,
) -> Walk:
    """Accept down the tree: argmax match at T = 0, else `rule`; logits [n, V], probs [n, V] the target's p.

    probs may be None (then they come from the logits); only the rows of nodes with children are read. q [n, V]:
    the draft distribution each node's child was sampled from, for a chain drafted by sampling (None: point masses).
    """
    if sampling.greedy:
        return _greedy(tokens, spec, logits, text)
    p = probs if probs is not None else target_probs(logits, sampling)
    if rule.name == "typical":
        return _typical(tokens, spec, p, rule.eps, rule.delta)
    path, nxt, records = sample_path(tokens, spec, p, gen, q, rule.name == "flawed")
    why = {r["node"]: f"rejected: u={r['u']:.3f} ≥ p={r['p']:.3f}" for r in records if not r["accepted"]}
    return Walk(path, nxt, why, records)


def _greedy(tokens: list[int], spec: TreeSpec, logits: torch.Tensor, text: Callable[[int], str]) -> Walk:
    """T = 0: the longest path matching the target's argmax; a child off it is not what was chosen.

    The argmax of a row is taken only where a child is judged against it (the path's nodes with children), not
    over every row of logits [n, V]: what greedy_accept_path finds over all of them, at a fraction of the cost.
    """
    inner = [j for j in range(len(spec)) if spec.children(j)]
    picks = fetch(logits[inner].argmax(-1)) if inner else [[]]  # the walk's one host read: the target's choices
    choice = dict(zip(inner, (int(t) for t in picks[0]), strict=True))

    def chose(j: int) -> int:
        return choice[j]

    path = longest_path(spec, lambda c: int(tokens[c]) == chose(spec.parents[c]))
    why = {c: f"target chose {text(chose(j))!r}" for j in path for c in spec.children(j) if c not in path}
    return Walk(path, None, why, None)


def _typical(tokens: list[int], spec: TreeSpec, probs: torch.Tensor, eps: float, delta: float) -> Walk:
    """Typical acceptance: the longest path whose every token beats min(eps, delta·exp(-H)) of its parent's p."""
    thresholds: dict[int, float] = {}
    why: dict[int, str] = {}

    def ok(c: int) -> bool:
        parent = spec.parents[c]
        if parent not in thresholds:
            thresholds[parent] = typical_threshold(probs[parent], eps, delta)
        p_x = float(probs[parent, tokens[c]])
        if p_x > thresholds[parent]:
            return True
        why[c] = f"p={p_x:.3f} ≤ threshold {thresholds[parent]:.3f}"
        return False

    return Walk(longest_path(spec, ok), None, why, None)


def sample_node(
    p: torch.Tensor, kids: list[int], tokens: list[int], gen: torch.Generator, records: list[dict[str, Any]]
) -> tuple[int | None, torch.Tensor]:
    """Recursive rejection over the children of one node (core.acceptance.point_mass_siblings); p [V] the
    target's distribution there. Returns (accepted child or None, the distribution left after the rejections).
    """
    won, left, tries = point_mass_siblings(p, [tokens[c] for c in kids], gen)
    for i, (p_x, u) in enumerate(tries):
        c = kids[i]
        records.append({"node": c, "token": tokens[c], "p": round(p_x, 6), "u": round(u, 6), "accepted": i == won})
    return (None if won is None else kids[won]), left


def sample_drafted(
    p: torch.Tensor, c: int, tokens: list[int], q: torch.Tensor | None, gen: torch.Generator, flawed: bool
) -> tuple[bool, torch.Tensor, dict[str, Any]]:
    """One node's only child c, drafted by sampling q [V] (None: a point mass), judged against p [V]: kept with
    probability min(1, p(x)/q(x)), else the residual norm(max(p − q, 0)) is what the next token comes from; with
    `flawed`, the tutorial's rule. Returns (kept, the distribution left, the decision's record)."""
    x = tokens[c]
    p_x, q_x, u = float(p[x]), 1.0 if q is None else float(q[x]), uniform(gen)
    if flawed:
        ok, left = flawed_accept(p_x, float(p.max()), u), flawed_residual(p, p_x)
    else:
        ok = u < keep_prob(p_x, q_x)
        left = drop(p.double(), x) if q is None else residual(p, q)
    return ok, left, {"node": c, "token": x, "p": round(p_x, 6), "q": round(q_x, 6), "u": round(u, 6), "accepted": ok}


def sample_path(
    tokens: list[int],
    spec: TreeSpec,
    probs: torch.Tensor,
    gen: torch.Generator,
    q: torch.Tensor | None = None,
    flawed: bool = False,
) -> tuple[list[int], int | None, list[dict[str, Any]]]:
    """T > 0, lossless: walk down the tree by tree speculative sampling; probs [n, V] target distributions (a chain
    drafted by sampling: its q [n, V], or the `flawed` rule, judged by sample_drafted).

    Returns (accepted node path from the root, the token drawn from the residual where every child was
    rejected — None when the walk ended at a leaf, so the bonus comes from that leaf's p —, decisions).
    """
    path: list[int] = [0]
    records: list[dict[str, Any]] = []
    while True:
        j = path[-1]
        kids = spec.children(j)
        if not kids:
            return path, None, records
        if q is not None or flawed:  # a chain: one child a node
            ok, left, record = sample_drafted(probs[j], kids[0], tokens, None if q is None else q[j], gen, flawed)
            records.append(record)
            child = kids[0] if ok else None
        else:
            child, left = sample_node(probs[j], kids, tokens, gen, records)
        if child is None:
            return path, draw(left, gen), records
        path.append(child)


def _fate(j: int, parent: int, on_path: set[int], why: dict[int, str]) -> tuple[str, str]:
    """(status, reason) of node j."""
    if j in on_path:
        return "accepted", "root: the target's own token" if j == 0 else "accepted"
    if j in why:
        return "rejected", why[j]
    if parent in on_path:
        return "passed", "passed, but a longer branch was committed"
    return "unreached", "its parent was not accepted"


def node_records(
    spec: TreeSpec,
    tokens: list[int],
    head_p: list[float] | list[float | None],
    probs: torch.Tensor,
    path: list[int],
    why: dict[int, str],
    text: Callable[[int], str],
) -> list[dict[str, Any]]:
    """Plain data per node: token, head, rank, probabilities, status and the reason for a rejection."""
    on_path = set(path)
    parents = torch.tensor([max(q, 0) for q in spec.parents], device=probs.device)
    target = fetch(probs[parents, torch.tensor(tokens, dtype=torch.long, device=probs.device)])[
        0
    ]  # one read for every node
    out = []
    for j, tok in enumerate(tokens):
        parent = spec.parents[j]
        status, reason = _fate(j, parent, on_path, why)
        out.append(
            {
                "token": tok,
                "text": text(tok),
                "head": spec.depths[j],
                "rank": spec.ranks[j][-1] if j < len(spec.ranks) and spec.ranks[j] else None,  # None: not a head's
                "head_prob": head_p[j - 1] if j else None,
                "target_prob": round(target[j], 6) if j else None,
                "status": status,
                "reason": reason,
            }
        )
    return out


def chain_records(
    w: Walk,
    drafts: list[int],
    probs: torch.Tensor,
    rule: str,
    text: Callable[[int], str],
    q: torch.Tensor | None = None,
    **typical: float,
) -> list[dict[str, Any]]:
    """A one-branch tree's walk (speculative sampling's chain, prompt lookup's copy) as the chain figures' decision
    records, under `rule` (greedy at T = 0, else speculative, typical with its eps and delta, or flawed): each judged
    draft's p(x) against q(x) (its draft distribution, or the point mass δ_x), the draw u where one decided (typical
    acceptance's threshold where it did), its text and the entropy of p there, and at the draft the target turned
    down what it faced: p, q and what the next token came from (the residual; p itself under typical acceptance and
    the flawed rule; the target's choice at T = 0). probs [n, V] the target's p; built after the step's clock
    stopped, its numbers in one read (one more for the rejection's distributions, and under typical acceptance one
    for each threshold, computed as the walk computed it)."""
    n = len(w.path) - 1
    judged = drafts[: n + 1]
    if not judged:
        return []
    rows = torch.arange(len(judged), device=probs.device)
    xs = torch.tensor(judged, dtype=torch.long, device=probs.device)
    qs = probs.new_ones(len(judged)) if q is None else q[rows, xs]
    p_x, q_x, picks, h = fetch(probs[rows, xs], qs, probs[: len(judged)].argmax(-1), entropies(probs[: len(judged)]))
    draws = {d["node"]: d["u"] for d in w.decisions or ()}
    records = [
        decision(i, x, p_x[i], q_x[i], draws.get(i + 1), i < n) | {"text": text(x), "entropy": round(h[i], 4)}
        for i, x in enumerate(judged)
    ]
    if rule == "typical":
        for i, rec in enumerate(records):
            rec["threshold"] = round(typical_threshold(probs[i], typical["eps"], typical["delta"]), 6)
    if n < len(drafts):
        x, p = drafts[n], probs[n]
        faced = one_hot(p, x) if q is None else q[n]
        if rule == "greedy":
            left = one_hot(p, int(picks[n]))
        elif rule == "typical":
            left = p
        else:
            left = flawed_residual(p, p_x[n]) if rule == "flawed" else residual(p, faced)
        dists = rejection_view(p, faced, left)
        records[-1]["dists"] = dists | {"texts": [text(t) for t in dists["tokens"]]}
    return records


def one_hot(like: torch.Tensor, x: int) -> torch.Tensor:
    """The point mass δ_x [V], on `like`'s device and dtype."""
    return torch.zeros_like(like).index_fill_(0, torch.tensor([x], device=like.device), 1.0)


@dataclass
class Verdict:
    """Guessed continuations of the root judged as one tree: which was accepted and how far."""

    best: int  # the first candidate through the accepted path's last node, -1 when none of its tokens was accepted
    matched: list[int]  # per candidate, how many of its tokens agree with what was accepted
    accepted: list[int]  # tokens accepted after the root
    forced: int | None  # at T > 0 after a rejection, the next token drawn from the residual


def candidate_tree(cands: list[list[int]]) -> tuple[list[int], TreeSpec, list[int], list[int]]:
    """The candidates as one tree under the root (a trie: a prefix two share is one branch, children in the order
    first guessed): its tokens (the root's a placeholder), its spec, each node's row among the candidates' rows laid
    end to end after the root's (the first candidate through it), and the first candidate through each node."""
    tokens, parents, row, first = [0], [-1], [0], [-1]
    child: dict[tuple[int, int], int] = {}
    offset = 1
    for c, cand in enumerate(cands):
        for j, node in enumerate(hang(tokens, parents, child, cand)):
            if node == len(row):  # a node this candidate added
                row.append(offset + j)
                first.append(c)
        offset += len(cand)
    return tokens, TreeSpec(parents), row, first


def judge(
    root_logits: torch.Tensor,
    cands: list[list[int]],
    rows: Sequence[torch.Tensor],
    sampling: Sampling,
    gen: torch.Generator,
    text: Callable[[int], str] = str,
) -> Verdict:
    """Guessed continuations of the root (Jacobi's row, Lookahead's n-grams) judged by the one walk, as a tree:
    root_logits [V] predicts each candidate's first token, rows[c] [len(cands[c]), V] the logits at candidate c's
    own tokens. Greedy: the longest prefix equal to the argmax chain; T > 0: tree speculative sampling, each
    distinct guess a point mass, so the tokens committed are distributed as the target's."""
    if not cands:  # nothing to judge: the run draws the next root from root_logits as after any step
        return Verdict(-1, [], [], None)
    tokens, spec, row, first = candidate_tree(cands)
    flat = torch.cat([root_logits[None], *(r[: len(c)] for r, c in zip(rows, cands, strict=True))])
    w = walk(sampling, gen, tokens, spec, flat[row], None, text)
    accepted = [tokens[n] for n in w.path[1:]]
    matched = [next((m for m in range(len(c)) if m >= len(accepted) or c[m] != accepted[m]), len(c)) for c in cands]
    return Verdict(first[w.path[-1]], matched, accepted, w.next_root)
