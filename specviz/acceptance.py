"""Acceptance rules for draft tokens: greedy match, typical acceptance, speculative sampling, a flawed rule.

The flawed rule reproduces the demo code of seed 000 (threshold p(x)/max p, residual p - p(x)·p). It is a
COMMON MISTAKE kept here only so the app can show, measured, that it biases the output.
"""

from __future__ import annotations

import math
from typing import Any

import torch

RULES = ("speculative", "typical", "flawed")  # the sampling-time rules a chain can be judged with
RULE_LABELS = {
    "speculative": "Speculative sampling (lossless)",
    "typical": "Typical acceptance (lossy by design)",
    "flawed": "Flawed rule from seed 000 (a common mistake)",
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


def typical_accept(p_x: float, probs: torch.Tensor, eps: float, delta: float) -> bool:
    """Medusa's typical acceptance: p(x) above the entropy-dependent threshold."""
    return p_x > typical_threshold(probs, eps, delta)


def speculative_accept(p_x: float, q_x: float, u: float) -> bool:
    """Accept a draft token x ~ q with probability min(1, p(x)/q(x)), given a uniform draw u."""
    if q_x <= 0:  # the draft never proposes such a token; accept only if the target allows it
        return p_x > 0
    return u < min(1.0, p_x / q_x)


def residual(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(p - q, 0)) over [V]; falls back to p when the positive mass is ~0 (then p == q)."""
    r = (p.double() - q.double()).clamp_min(0)
    mass = float(r.sum())
    return (p.double() / p.double().sum() if mass < MASS_EPS else r / mass).to(p.dtype)


def flawed_accept(p_x: float, p_max: float, u: float) -> bool:
    """WRONG (seed 000): accept when u < p(x)/max p, ignoring the draft's own q(x)."""
    return u < p_x / p_max


def flawed_residual(p: torch.Tensor, p_x: float) -> torch.Tensor:
    """WRONG (seed 000): resample from norm(p - p(x)·p), which is just p again."""
    r = (p.double() - p_x * p.double()).clamp_min(0)
    mass = float(r.sum())
    return (p.double() / p.double().sum() if mass < MASS_EPS else r / mass).to(p.dtype)


def _uniform(gen: torch.Generator) -> float:
    return float(torch.rand(1, generator=gen, dtype=torch.float64))


def _draw(probs: torch.Tensor, gen: torch.Generator) -> int:
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
    """p, q and the resampling distribution over the union of their top-k tokens, as plain data."""
    ids = top_union([p, q, res], k)
    return {"tokens": ids, "p": [round(float(p[i]), 6) for i in ids],
            "q": [round(float(q[i]), 6) for i in ids], "residual": [round(float(res[i]), 6) for i in ids]}


def _record(i: int, x: int, p_x: float, q_x: float, u: float | None, ok: bool) -> dict[str, Any]:
    ratio = p_x / q_x if q_x > 0 else math.inf
    return {"pos": i, "token": int(x), "p": round(p_x, 6), "q": round(q_x, 6),
            "ratio": round(min(ratio, 1e6), 6), "u": None if u is None else round(u, 6), "accepted": ok}


def speculative_chain(p: torch.Tensor, q: torch.Tensor, drafts: list[int], gen: torch.Generator,
                      k: int = 8) -> tuple[int, int, list[dict[str, Any]]]:
    """Speculative sampling over a chain; p [γ+1, V], q [γ, V] -> (accepted, next token, records).

    The next token is drawn from norm((p - q)+) at the first rejection, else the bonus from p[γ].
    At the rejected position the record also holds `dists` (p, q, residual over the top tokens).
    """
    records: list[dict[str, Any]] = []
    for i, x in enumerate(drafts):
        p_x, q_x, u = float(p[i, x]), float(q[i, x]), _uniform(gen)
        ok = speculative_accept(p_x, q_x, u)
        records.append(_record(i, x, p_x, q_x, u, ok))
        if not ok:
            res = residual(p[i], q[i])
            records[-1]["dists"] = rejection_view(p[i], q[i], res, k)
            return i, _draw(res, gen), records
    return len(drafts), _draw(p[len(drafts)], gen), records


def typical_chain(p: torch.Tensor, q: torch.Tensor, drafts: list[int], gen: torch.Generator,
                  eps: float = 0.09, delta: float = 0.3, k: int = 8) -> tuple[int, int, list[dict[str, Any]]]:
    """Typical acceptance over a chain (lossy); the next token is drawn from p where the chain stops."""
    records: list[dict[str, Any]] = []
    for i, x in enumerate(drafts):
        p_x, q_x = float(p[i, x]), float(q[i, x])
        thr = typical_threshold(p[i], eps, delta)
        ok = p_x > thr
        records.append(_record(i, x, p_x, q_x, None, ok) | {"threshold": round(thr, 6)})
        if not ok:
            records[-1]["dists"] = rejection_view(p[i], q[i], p[i], k)
            return i, _draw(p[i], gen), records
    return len(drafts), _draw(p[len(drafts)], gen), records


def flawed_chain(p: torch.Tensor, q: torch.Tensor, drafts: list[int], gen: torch.Generator,
                 k: int = 8) -> tuple[int, int, list[dict[str, Any]]]:
    """Seed 000's WRONG rule over a chain: threshold p(x)/max p, residual norm(p - p(x)·p)."""
    records: list[dict[str, Any]] = []
    for i, x in enumerate(drafts):
        p_x, q_x, u = float(p[i, x]), float(q[i, x]), _uniform(gen)
        ok = flawed_accept(p_x, float(p[i].max()), u)
        records.append(_record(i, x, p_x, q_x, u, ok))
        if not ok:
            res = flawed_residual(p[i], p_x)
            records[-1]["dists"] = rejection_view(p[i], q[i], res, k)
            return i, _draw(res, gen), records
    return len(drafts), _draw(p[len(drafts)], gen), records


def decide_chain(rule: str, p: torch.Tensor, q: torch.Tensor, drafts: list[int], gen: torch.Generator,
                 eps: float = 0.09, delta: float = 0.3) -> tuple[int, int, list[dict[str, Any]]]:
    """Judge a drafted chain with the named rule (one of RULES)."""
    if rule == "speculative":
        return speculative_chain(p, q, drafts, gen)
    if rule == "typical":
        return typical_chain(p, q, drafts, gen, eps, delta)
    if rule == "flawed":
        return flawed_chain(p, q, drafts, gen)
    raise ValueError(f"Unknown rule {rule!r}; choose one of {', '.join(RULES)}.")
