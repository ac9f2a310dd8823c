"""How long a copied draft pays: the expected tokens a step commits over what its forward costs on this device.

One rule for prompt lookup alone and in a batch: in a batch every row pays for the widest row's block, so one
width is chosen from every row's acceptance rate and the measured cost of B·(w+1) new tokens; with one row it
is the one-row rule, (1 + a + … + a^k) / cost(k+1).
"""

from __future__ import annotations

from collections.abc import Callable

from specviz.core.drafting import VerifyLatency


def forward_cost(curve: VerifyLatency, n: int) -> float:
    """A forward over n new tokens relative to one: the measured curve, and proportional to n past its last point."""
    last = curve.ks[-1]
    return curve.relative(n) if n <= last else curve.relative(last) * n / last


def best_width(rates: list[float], available: list[int], max_draft: int, cost: Callable[[int], float]) -> int:
    """The draft width w maximising the rows' expected tokens per step over the step's cost(B·(w+1)) / cost(B).

    A row drafts min(w, what it can copy) and one with nothing to copy (0) still commits its root; w = 0 is a
    plain step. One row (B = 1) with cost = curve.relative is prompt_lookup's length rule (best_length reads this).
    """
    b = len(rates)
    best_w, best_gain = 0, 1.0  # w = 0: a plain step, one token per row
    for w in range(1, min(max(available, default=0), max_draft) + 1):
        expect = sum(sum(a**i for i in range(min(w, n) + 1)) for a, n in zip(rates, available, strict=True)) / b
        gain = expect / (cost(b * (w + 1)) / cost(b))
        if gain > best_gain:
            best_w, best_gain = w, gain
    return best_w


def expected_tokens(alpha: float, gamma: int) -> float:
    """(1 − α^(γ+1)) / (1 − α): tokens a speculative-sampling step commits with γ drafts each accepted with
    probability α, the bonus token counted."""
    return float(gamma + 1) if alpha >= 1 else (1 - alpha ** (gamma + 1)) / (1 - alpha)


def alpha_from(a: float, gamma: int) -> float:
    """The α whose expected tokens per step at `gamma` equal the measured A (bisection)."""
    lo, hi = 0.0, 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if expected_tokens(mid, gamma) < a else (lo, mid)
    return round((lo + hi) / 2, 4)
