"""The statistical losslessness checks sampling methods run through their real `generate`."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import brentq
from scipy.stats import chi2, chisquare, ncx2

from specviz.core.sampling import Sampling, target_probs
from specviz.core.trace import Trace

PROMPT = "one two three one two three one two"


def second_token_follows_p(lm, run: Callable[[list[int], Sampling], Trace], n: int = 1500, t: float = 0.8) -> None:
    """At temperature t, the token after the most common first token is distributed as the target's p.

    The second token is drawn through the method's tree (a head's, the pool's or the residual's), so a
    biased acceptance rule shows here. A chi-square over the 6 likeliest tokens and the rest must not
    reject p (p-value > 1e-3), while the same test must reject a sample with 20% extra on one token (10% is
    within its power only some of the time at 1,500 runs).
    """
    ids = lm.encode_prompt(PROMPT)
    traces = [run(ids, Sampling(max_new_tokens=2, temperature=t, seed=i)) for i in range(n)]
    first = Counter(tr.output_ids[0] for tr in traces).most_common(1)[0][0]
    second = [tr.output_ids[1] for tr in traces if tr.output_ids[0] == first]
    with torch.no_grad():
        logits = lm.hf(torch.tensor([[*ids, first]], device=lm.device)).logits[0, -1].float().cpu()
    p = target_probs(logits, Sampling(temperature=t)).double()
    top = p.argsort(descending=True)[:6].tolist()
    observed = [sum(x == k for x in second) for k in top] + [sum(x not in top for x in second)]
    expected = [float(p[k]) * len(second) for k in top] + [float(1 - p[top].sum()) * len(second)]
    assert len(second) > 300 and chisquare(observed, expected).pvalue > 1e-3
    biased = observed[:]
    biased[0] += len(second) // 5
    assert chisquare(biased, [e * sum(biased) / sum(expected) for e in expected]).pvalue < 1e-3


@dataclass(frozen=True)
class Position:
    """One output position's chi-square: the tokens drawn there against the exact marginal."""

    position: int  # 1 = the first new token
    n: int  # draws
    p_value: float
    tv: float  # total variation between the drawn frequencies and the marginal


def exact_marginals(lm, prompt: list[int], tokens: list[int], positions: int, t: float) -> list[torch.Tensor]:
    """Each output position's distribution over `tokens` [K] at temperature t, by enumerating every prefix of them.

    Prefixes that leave `tokens` are not followed: the mass they carry must be negligible (< 1e-6).
    """
    s = Sampling(temperature=t)
    prefixes, weights, out = [[*prompt]], torch.ones(1, dtype=torch.float64), []
    for _ in range(positions):
        with torch.no_grad():
            logits = lm.hf(torch.tensor(prefixes, device=lm.device)).logits[:, -1]  # [prefixes, V]
        probs = target_probs(logits, s).double().cpu()  # [prefixes, V]
        outside = probs.sum(-1) - probs[:, tokens].sum(-1)
        assert float(weights @ outside.abs()) < 1e-6, "the model puts mass outside `tokens`"
        p = probs[:, tokens] / probs[:, tokens].sum(-1, keepdim=True)  # [prefixes, K]
        out.append(weights @ p)
        weights = (weights[:, None] * p).reshape(-1)
        prefixes = [[*pre, k] for pre in prefixes for k in tokens]
    return out


def position_tests(outputs: list[list[int]], marginals: list[torch.Tensor], tokens: list[int]) -> list[Position]:
    """A chi-square of the tokens drawn at each position (every output as long as `marginals`) against its marginal."""
    rows = []
    for j, m in enumerate(marginals):
        seen = Counter(out[j] for out in outputs)
        counts = np.array([seen[k] for k in tokens], dtype=np.float64)
        assert counts.sum() == len(outputs), f"position {j + 1}: a token outside `tokens` was drawn"
        p = (m / m.sum()).numpy()
        pval = float(chisquare(counts, p * len(outputs)).pvalue)
        rows.append(Position(j + 1, len(outputs), pval, float(0.5 * np.abs(counts / len(outputs) - p).sum())))
    return rows


def detectable_tv(n: int, bins: int, alpha: float, power: float = 0.9) -> float:
    """The smallest total variation δ from the expected distribution over `bins` cells that a chi-square at level
    alpha detects with probability ≥ power from n draws, whatever the distribution and the direction of the shift.

    A shift d has noncentrality λ = n Σ d_i²/p_i ≥ n (Σ|d_i|)² = 4nδ² (Cauchy–Schwarz, Σ p_i = 1), so with λ* the
    noncentrality at which P(χ²_{bins-1}(λ*) > its 1-alpha quantile) = power, every δ ≥ sqrt(λ*/4n) is detected.
    """
    crit = chi2.isf(alpha, bins - 1)
    lam = brentq(lambda x: ncx2.sf(crit, bins - 1, x) - power, 1e-6, 1e6, full_output=False)
    assert isinstance(lam, float)
    return math.sqrt(lam / (4 * n))
