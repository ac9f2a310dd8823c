"""A live run's price before it starts, from this device's measured cost (tuning.fit.DeviceCost), and the bound above
which the app refuses it.

A run of `max_new_tokens` takes about tokens / A steps at the method's step cost, after one prefill:
- plain decoding: A = 1, a step of the fit's `plain_ms`;
- a tree or window method (the fit's): A and the step's split (verify, draft, the rest) of the fit's candidate of
  that very shape (its fitted shape when its fields are left unset), else the conservative estimate below;
- any other method, or a shape the fit cannot price: A = 1 (no fewer steps than tokens) and a step of the curve's
  forward over its verified width, plus a share of plain decoding's step per drafting round.
The bound is model time, about 90 s by default; the server's operator sets another with SPECVIZ_RUN_BUDGET_S
(0 or less: no bound).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields, is_dataclass, replace
from typing import Any

from specviz import methods
from specviz.methods.base import settled, unfitted
from specviz.tuning import fit, probe
from specviz.tuning.turns import duration

ENV = "SPECVIZ_RUN_BUDGET_S"
DEFAULT_S = 90.0  # a live run's model time at most, unless the server's operator says otherwise
DRAFT_SHARE = 0.25  # a drafting round's cost over plain decoding's step, where none was timed (a head, a layer draft)
WIDE = 8  # a verified width past which the refusal names the tree's (the window's) size
MEMO_MAX = 512  # prices kept: the fit's search takes seconds, and every page render prices its run again


@dataclass(frozen=True)
class StepPrice:
    """One method's step on this device: tokens it commits (A), its cost, the tokens its forward verifies."""

    method: str
    A: float
    step_ms: float
    width: int
    from_fit: bool  # priced from the fit's candidate of this shape (else the conservative estimate)


@dataclass(frozen=True)
class Price:
    """A live run's predicted model time: every method's runs, each a prefill and tokens / A steps."""

    seconds: float
    steps: tuple[StepPrice, ...]
    tokens: int
    runs: int  # runs of each method (warm-ups and repeats)


_MEMO: dict[tuple, StepPrice] = {}  # (the cost's key, method, shape) -> the step's price


def from_curve(curve: probe.LatencyCurve) -> fit.DeviceCost:
    """A device's cost from its latency curve alone (no head timed): enough to price plain decoding and, with the
    conservative estimate, any method, without measuring the fit's steps."""
    return fit.DeviceCost(curve.device, list(curve.ks), list(curve.ms), curve.ms[0], {}, dict(curve.provenance))


def limit_s() -> float:
    """The bound on a live run's model time: SPECVIZ_RUN_BUDGET_S when it parses, else DEFAULT_S (≤ 0: none)."""
    try:
        return float(os.environ.get(ENV, DEFAULT_S))
    except ValueError:
        return DEFAULT_S


def shape(name: str, config: Any, cost: fit.DeviceCost) -> dict[str, Any]:
    """The config's fields as it will run: fitted fields left unset take the fit's best shape (as fit.measured
    does where the device has the method's timed steps), then their fallback."""
    if config is None or not is_dataclass(config) or isinstance(config, type):
        return {}
    empty, by = unfitted(config), fit.fitted_as(name)  # a composition takes its first part's fitted shape
    if empty and by in fit.PAPER and (by == "lookahead" or fit.FAMILY[by] in cost.samples):
        config = replace(config, **_fitted(by, cost))
    cfg = settled(config)
    return {f.name: getattr(cfg, f.name) for f in fields(cfg)}


def _fitted(name: str, cost: fit.DeviceCost) -> dict[str, int]:
    """The fit's best shape of `name` on this device (fit.fit_method, which searches once per device cost)."""
    return dict(fit.fit_method(name, cost).best.fields)


def width(name: str, f: Mapping[str, Any]) -> tuple[int, int]:
    """(tokens the verify forward carries, drafting rounds a step) for a method at fields `f`."""
    config = methods.get(name).Config if name in methods.available() else None
    if config is not None and isinstance(getattr(config, "forward_tokens", None), property):  # it counts its forward
        return config(**f).forward_tokens, int(f.get("depth", 1)) if "total_tokens" in f else 0
    if name == "sps":
        gamma = int(f.get("gamma") or 3)
        return 1 + gamma, gamma
    drafted = int(f.get("max_draft", f.get("guesses", 0)) or 0)
    return 1 + drafted, 0


def conservative(name: str, f: Mapping[str, Any], cost: fit.DeviceCost) -> StepPrice:
    """A step priced from the curve alone: the forward over its width, the rest of plain decoding's step, a share of
    it per drafting round, and A = 1."""
    n, rounds = width(name, f)
    rest = max(0.0, cost.plain_ms - cost.forward_ms(1))
    return StepPrice(name, 1.0, forward_ms(cost, n) + rest + rounds * DRAFT_SHARE * cost.plain_ms, n, False)


def forward_ms(cost: fit.DeviceCost, k: float) -> float:
    """A forward over k tokens: the curve, and past its last point the last point's cost per token (a prefill)."""
    last_k, last_ms = cost.ks[-1], cost.ms[-1]
    return cost.forward_ms(k) if k <= last_k else last_ms * k / last_k


def step_price(name: str, config: Any, cost: fit.DeviceCost) -> StepPrice:
    """What one step of `name` at `config` costs on the device `cost` describes (plain decoding: its own step)."""
    if name == "ar":
        return StepPrice("ar", 1.0, cost.plain_ms, 1, True)
    f = shape(name, config, cost)
    key = (fit.cost_key(cost), name, tuple(sorted((k, repr(v)) for k, v in f.items())))
    if key not in _MEMO:
        if len(_MEMO) > MEMO_MAX:
            _MEMO.clear()
        _MEMO[key] = _fit_price(name, f, cost) or conservative(name, f, cost)
    return _MEMO[key]


def _fit_price(name: str, f: Mapping[str, Any], cost: fit.DeviceCost) -> StepPrice | None:
    """The fit's candidate of exactly this shape, or None (not a fitted method, a shape past its tables)."""
    if name not in fit.PAPER:
        return None
    keys = fit.PAPER[name]
    want = {k: int(f[k]) for k in keys if k in f}
    try:
        cands = fit.window_candidates(cost) if name == "lookahead" else fit.tree_candidates(name, cost, want)
    except (OSError, KeyError, ValueError):  # no trained head or table here
        return None
    got = next((c for c in cands if c.fields == want), None)
    if got is None:
        return None
    return StepPrice(name, got.A, got.verify_ms + got.draft_ms + got.other_ms, got.forward_tokens, True)


def price(
    cost: fit.DeviceCost, configs: Mapping[str, Any], tokens: int, runs: int = 1, warm_tokens: int = 0, prompt: int = 32
) -> Price:
    """Every method of `configs` (name -> Config, None for its default; "ar" for plain decoding) run `runs` times
    at `tokens` new tokens, each after a `prompt`-token prefill, plus a warm-up of `warm_tokens` each."""
    steps = tuple(step_price(n, c if c is not None else _default(n), cost) for n, c in configs.items())
    prefill = forward_ms(cost, max(1, prompt))
    ms = 0.0
    for s in steps:
        ms += runs * (prefill + math.ceil(tokens / s.A) * s.step_ms)
        ms += (prefill + math.ceil(warm_tokens / s.A) * s.step_ms) if warm_tokens else 0.0
    return Price(ms / 1000, steps, tokens, runs)


def _default(name: str) -> Any:
    return None if name == "ar" else methods.make_config(name)


def refusal(p: Price, limit: float | None = None) -> str:
    """'' when `p` fits the bound; else one sentence: what the run would take, the bound, and what to lower."""
    limit = limit_s() if limit is None else limit
    if limit <= 0 or p.seconds <= limit:
        return ""
    names = [methods.card(s.method).short or methods.card(s.method).label for s in p.steps]
    drafting = [s for s in p.steps if s.method != "ar"]
    fits_tokens = max(1, math.floor(p.tokens * limit / p.seconds))
    lower = [f"the tokens ({p.tokens}; about {fits_tokens} fit)"]
    if p.runs > 1:
        lower.append(f"the repeats ({p.runs} runs of each)")
    if len(drafting) > 1:
        lower.append(f"the methods ({len(drafting)} beside plain decoding)")
    lower += [
        f"{methods.card(s.method).label}'s tree or window ({s.width} tokens a step)" for s in p.steps if s.width > WIDE
    ]
    return (
        f"This run would take about {duration(p.seconds)} of model time ({_and(names)}), over this server's bound of "
        f"{duration(limit)} a run: lower {_or(lower)}. The server's operator can raise the bound with {ENV}."
    )


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _or(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]
