"""The acceptance math, once: greedy match, typical acceptance, min(1, p/q) and its residual, the point-mass
(top-k tree) variant, and a flawed rule. The one acceptance walk (specviz.trees.walk), which judges every method's
draft as a tree (a chain is a one-branch tree), and the losslessness lab call these; randomness is one float64
uniform draw per decision.

The flawed rule (threshold p(x)/max p, residual p - p(x)·p) is a rule copied in many tutorials. It is a
COMMON MISTAKE kept here only so the app can show, measured, that it biases the output.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from specviz.core.host import fetch

RULES = ("speculative", "typical", "flawed")  # the sampling-time rules a chain can be judged with
RULE_LABELS = {
    "speculative": "Speculative sampling (lossless)",
    "typical": "Typical acceptance (lossy by design)",
    "flawed": "Flawed tutorial rule (a common mistake)",
}
MASS_EPS = 1e-12  # below this the residual has no mass left; fall back to p


def greedy_match(draft: list[int], target: list[int]) -> int:
    """Length of the longest prefix where draft[i] == target[i]."""
    n = 0
    for d, t in zip(draft, target, strict=False):
        if d != t:
            break
        n += 1
    return n


def typical_threshold(probs: torch.Tensor, eps: float, delta: float) -> float:
    """min(eps, delta * exp(-H(probs))) for probs [V]; H in nats."""
    p = probs.double().clamp_min(1e-300)
    h = float(-(probs.double() * p.log()).sum())
    return min(eps, delta * math.exp(-h))


def keep_prob(p_x: float, q_x: float) -> float:
    """min(1, p(x)/q(x)): the chance a token x ~ q is kept; 1 where q(x) = 0 but p(x) > 0."""
    if q_x <= 0:  # the draft never proposes such a token; accept only if the target allows it
        return 1.0 if p_x > 0 else 0.0
    return min(1.0, p_x / q_x)


def keep_probs(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """keep_prob for every token at once: [V] -> [V] (0 where q has no mass)."""
    return torch.where(q > 0, (p / q.clamp_min(1e-300)).clamp(max=1), torch.zeros_like(p))


def speculative_accept(p_x: float, q_x: float, u: float) -> bool:
    """Accept a draft token x ~ q with probability min(1, p(x)/q(x)), given a uniform draw u."""
    return u < keep_prob(p_x, q_x)


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(p - q, 0)) over [V]; falls back to p when the positive mass is ~0 (then p == q)."""
    r = (p.double() - q.double()).clamp_min(0)
    mass = float(r.sum())
    return (p.double() / p.double().sum() if mass < MASS_EPS else r / mass).to(p.dtype)


def drop(p: torch.Tensor, x: int) -> torch.Tensor:
    """residual(p, δ_x) = norm(max(p − δ_x, 0)): p with x removed, renormalised (no [V] one-hot built)."""
    p = p.clone()
    p[x] = 0.0
    return p / p.sum()


def point_mass_accept(p: torch.Tensor, x: int, gen: torch.Generator) -> tuple[bool, float, float]:
    """Speculative sampling against q = δ_x (a deterministic draft pick): (accepted, p(x), u).

    With a point mass min(1, p(x)/q(x)) = p(x); on a rejection the caller continues from drop(p, x).
    """
    p_x, u = float(p[x]), uniform(gen)
    return speculative_accept(p_x, 1.0, u), p_x, u


def point_mass_siblings(
    p: torch.Tensor, xs: list[int], gen: torch.Generator
) -> tuple[int | None, torch.Tensor, list[tuple[float, float]]]:
    """Recursive rejection over sibling point masses δ_x tried in order (a tree node's children, distinct
    guesses); p [V] the target's distribution there.

    Returns (index in xs of the accepted one or None, the distribution left after the rejections [V],
    (p(x), u) of every try). Tried this way the token that leaves the node is distributed exactly as p.
    """
    p, tries = p.double(), []
    for i, x in enumerate(xs):
        ok, p_x, u = point_mass_accept(p, x, gen)
        tries.append((p_x, u))
        if ok:
            return i, p, tries
        p = drop(p, x)
    return None, p, tries


def flawed_accept(p_x: float, p_max: float, u: float) -> bool:
    """WRONG (the tutorial rule): accept when u < p(x)/max p, ignoring the draft's own q(x)."""
    return u < p_x / p_max


def flawed_residual(p: torch.Tensor, p_x: float) -> torch.Tensor:
    """WRONG (the tutorial rule): resample from norm(p - p(x)·p), which is just p again."""
    r = (p.double() - p_x * p.double()).clamp_min(0)
    mass = float(r.sum())
    return (p.double() / p.double().sum() if mass < MASS_EPS else r / mass).to(p.dtype)


def uniform(gen: torch.Generator) -> float:
    """The one uniform draw in [0, 1) behind every acceptance decision, in float64."""
    return float(torch.rand(1, generator=gen, dtype=torch.float64))


def draw(probs: torch.Tensor, gen: torch.Generator) -> int:
    """One token from probs [V]."""
    return int(torch.multinomial(probs.double().cpu(), 1, generator=gen))


def top_union(dists: list[torch.Tensor], k: int = 8) -> list[int]:
    """Token ids in the top-k of any of the given [V] distributions, most likely (in the first) first."""
    ids: list[int] = []
    for d in dists:
        for i in d.topk(min(k, d.numel())).indices.tolist():
            if i not in ids:
                ids.append(int(i))
    return sorted(ids, key=lambda i: -float(dists[0][i]))


def rejection_view(p: torch.Tensor, q: torch.Tensor, res: torch.Tensor, k: int = 8) -> dict[str, Any]:
    """p, q and the resampling distribution over the union of their top-k tokens (most likely under p first), as
    plain data, in one host read."""
    dists = torch.stack([p.to(res.dtype), q.to(res.dtype), res])  # [3, V]
    top = dists.topk(min(k, p.numel()), dim=-1).indices.reshape(-1)  # [3k], with repeats
    ids, vals = fetch(top, dists[:, top])
    seen: dict[int, int] = {}
    for col, t in enumerate(ids):
        seen.setdefault(int(t), col)
    order = sorted(seen, key=lambda t: (-vals[seen[t]], list(seen).index(t)))
    n = len(ids)
    return {
        "tokens": order,
        "p": [round(vals[seen[t]], 6) for t in order],
        "q": [round(vals[n + seen[t]], 6) for t in order],
        "residual": [round(vals[2 * n + seen[t]], 6) for t in order],
    }


def decision(i: int, x: int, p_x: float, q_x: float, u: float | None, ok: bool) -> dict[str, Any]:
    """One judged draft of a chain as plain data: its position, token, p(x), q(x), their ratio, the draw u (None
    where no draw decides) and whether it was accepted."""
    ratio = p_x / q_x if q_x > 0 else math.inf
    return {
        "pos": i,
        "token": int(x),
        "p": round(p_x, 6),
        "q": round(q_x, 6),
        "ratio": round(min(ratio, 1e6), 6),
        "u": None if u is None else round(u, 6),
        "accepted": ok,
    }
