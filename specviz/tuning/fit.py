"""The fit: each tree and window method's shape chosen for the device it runs on.

A shape's speedup is predicted as A / r (core.measure's terms):
- **A**, tokens committed per target forward, from what the method's drafts are worth, which does not depend on
  the device: a head's held-out rank acceptance (EAGLE-2's and EAGLE-3's per depth, Medusa's and Hydra's per head),
  summed over the best nodes a shape can hold (trees.tree.sparse_tree's positional model, as Sequoia's); for
  Lookahead, the acceptance its sweep measured at each W / N / G.
- **r**, a step's cost over plain decoding's, from this device: the forward over the shape's verified tokens (the
  latency probe's curve), the drafting (a linear model of the head's rounds, fitted to steps timed here) and the
  rest of the step (acceptance, commit, bookkeeping), all measured once per device and model and cached with their
  provenance (`device_cost`).

The shape with the largest predicted A / r wins, within the paper's own setting (`PAPER`): on a device where a
wide forward costs about as much as a narrow one (a GPU) that is where the fit lands; on a CPU whose curve rises
early it picks a small tree. `python -m specviz fit` prints it; every page, bench, lesson run and command starts
from it (`measured`: a Config's fitted fields left at 0 are filled here).
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from functools import cache
from typing import Any

import numpy as np

from specviz import methods
from specviz.core.kernels import cpu_isa
from specviz.core.measure import Provenance, provenance
from specviz.core.model import LoadedModel
from specviz.core.paths import EAGLE_DIR, LOOKAHEAD_SWEEP, MODELS, cache_root
from specviz.core.prompts import prepare as encode
from specviz.core.sampling import Sampling
from specviz.methods.base import settled, unfitted, unmeasured
from specviz.trees.tree import path_weight, sparse_tree
from specviz.tuning import probe

# the papers' own settings: the fit searches up to them, and on a flat curve it lands on them
PAPER: dict[str, dict[str, int]] = {
    "eagle": {"depth": 5, "top_k": 10, "total_tokens": 60},
    "eagle3": {"depth": 5, "top_k": 10, "total_tokens": 60},
    "hybrid": {"depth": 5, "top_k": 10, "total_tokens": 60},
    "medusa": {"heads": 4, "total_tokens": 64},
    "hydra": {"heads": 4, "total_tokens": 64},
    "lookahead": {"window": 7, "ngram": 5, "guesses": 7},
    "dflash": {"block": 16},  # the paper's drafters draft blocks of 16; ours is capped by the block it was trained on
}
FAMILY = {m: m for m in PAPER if m != "lookahead"} | {"hybrid": "eagle"}  # whose head's acceptance a method reads
# the steps timed for the draft model of each head (the fields set; the rest fitted or default): enough points to
# fit its terms (EAGLE: a round's fixed part and its part per expanded node; Medusa: per head; Hydra: per depth)
SAMPLES: dict[str, tuple[dict[str, int], ...]] = {
    "eagle": (
        {"depth": 1, "top_k": 2, "total_tokens": 3},
        {"depth": 3, "top_k": 2, "total_tokens": 6},
        {"depth": 3, "top_k": 8, "total_tokens": 12},
    ),
    "eagle3": (
        {"depth": 1, "top_k": 2, "total_tokens": 3},
        {"depth": 3, "top_k": 2, "total_tokens": 6},
        {"depth": 3, "top_k": 8, "total_tokens": 12},
    ),
    "medusa": ({"heads": 1, "total_tokens": 3}, {"heads": 4, "total_tokens": 6}),
    "hydra": ({"heads": 1, "total_tokens": 2}, {"heads": 4, "total_tokens": 8}),
    "lookahead": ({"window": 3, "ngram": 2, "guesses": 2},),
    "dflash": ({"block": 2}, {"block": 8}),  # one drafter pass whatever the block: its cost is one term
}
# what the fit times its steps on: a fixed request, never a prompt anything is evaluated on
PROMPT = "Describe, step by step, how a refrigerator keeps the food inside it cold."
TOKENS = 32
VERSION = 2  # 2: DFlash's steps timed too


@dataclass(frozen=True)
class StepSample:
    """One timed generation at one shape: its mean step split (ms) and the tokens it verified a step."""

    settings: dict[str, int]
    forward_tokens: float
    draft_ms: float
    verify_ms: float
    other_ms: float  # acceptance, commit and the rest of the step


@dataclass(frozen=True)
class DeviceCost:
    """What a step costs on one device: the latency curve, plain decoding's step and each head's timed steps."""

    device: str
    ks: list[int]
    ms: list[float]
    plain_ms: float  # plain decoding's mean step (one forward and its bookkeeping)
    samples: dict[str, list[StepSample]]
    provenance: dict = field(default_factory=dict)
    version: int = VERSION

    def forward_ms(self, k: float) -> float:
        """A forward over k new tokens (the curve, interpolated)."""
        return float(np.interp(k, self.ks, self.ms))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> DeviceCost:
        samples = {m: [StepSample(**s) for s in rows] for m, rows in d["samples"].items()}
        return cls(**{**d, "samples": samples})


@dataclass(frozen=True)
class Candidate:
    """One shape with its predicted A, r and speedup, and its step split (ms)."""

    fields: dict[str, int]
    forward_tokens: int
    A: float
    verify_ms: float
    draft_ms: float
    other_ms: float
    plain_ms: float

    @property
    def r(self) -> float:
        return (self.verify_ms + self.draft_ms + self.other_ms) / self.plain_ms

    @property
    def speedup(self) -> float:
        return self.A / self.r


@dataclass(frozen=True)
class Fit:
    """A method's fitted shape on one device, the paper's for comparison, and the best shape per forward width."""

    method: str
    best: Candidate
    paper: Candidate | None
    by_width: tuple[Candidate, ...]  # the best shape for each verified width, in increasing width
    device: str
    provenance: dict

    def describe(self) -> str:
        """'fitted to this device: 6 nodes (predicted 1.31×, A 1.7 / r 1.30)'."""
        b, f = self.best, self.best.fields
        what = {"lookahead": "W {window} / N {ngram} / G {guesses}", "dflash": "a block of {block}"}.get(self.method)
        what = what.format(**f) if what else f"{b.forward_tokens} nodes"
        return f"fitted to this device: {what} (predicted {b.speedup:.2f}×, A {b.A:.2f} / r {b.r:.2f})"


def interp_or(samples: Sequence[StepSample], cost: DeviceCost) -> float:
    """How much a method's verify forward costs over the probe's forward of the same width (tree masks, gathers):
    the median over its timed steps, 1 where none were timed."""
    ratios = [s.verify_ms / cost.forward_ms(s.forward_tokens) for s in samples if s.forward_tokens > 0]
    return statistics.median(ratios) if ratios else 1.0


def _terms(method: str, f: Mapping[str, int], depth_used: int = 0) -> list[float]:
    """The draft model's terms for one shape (see SAMPLES)."""
    family = FAMILY.get(method, method)
    if family in ("eagle", "eagle3"):
        return [1.0, float(f["depth"]), float(f["depth"] * f["top_k"])]
    if family == "medusa":
        return [1.0, float(f["heads"])]
    if family == "hydra":
        return [1.0, float(depth_used or f["heads"])]
    return [1.0]


def draft_model(method: str, samples: Sequence[StepSample]) -> np.ndarray:
    """Least-squares coefficients of the draft time (ms) over `_terms`, from the timed steps (none: zero)."""
    if not samples:
        return np.zeros(len(_terms(method, PAPER.get(method, {}) or {"heads": 1})))
    rows = [_terms(method, s.settings, _hydra_depth(method, s.settings)) for s in samples]
    coef, *_ = np.linalg.lstsq(np.array(rows), np.array([s.draft_ms for s in samples]), rcond=None)
    return coef


def _hydra_depth(method: str, f: Mapping[str, int]) -> int:
    if FAMILY.get(method) != "hydra":
        return 0
    picks, _ = sparse_tree(acceptance(method)[: f["heads"]], f["total_tokens"])
    return max((len(p) for p in picks), default=0)


@cache
def acceptance(method: str) -> tuple[tuple[float, ...], ...]:
    """The head's held-out rank acceptance, [depth or head][rank] (device-independent; committed with the head)."""
    family = FAMILY[method]
    if family in ("eagle", "eagle3", "dflash"):
        folder = EAGLE_DIR if family == "eagle" else MODELS / family
        table = json.loads((folder / "config.json").read_text(encoding="utf-8"))["calibration"]
    else:
        table = json.loads((MODELS / family / "calibration.json").read_text(encoding="utf-8"))["accuracy"]
    return tuple(tuple(float(x) for x in row) for row in table)


def _prefix_gains(acc: Sequence[Sequence[float]], n: int) -> list[float]:
    """A for budgets 1..n (root included): 1 plus the path weights of the best nodes, greedily picked."""
    picks, _ = sparse_tree(acc, n)
    out, total = [1.0], 1.0
    for p in picks:
        total += path_weight(acc, p)
        out.append(total)
    return out + [total] * (n - len(out))


def tree_candidates(method: str, cost: DeviceCost, cap: Mapping[str, int]) -> list[Candidate]:
    """Every tree shape up to the paper's, priced on this device."""
    family = FAMILY[method]
    acc = acceptance(method)
    samples = cost.samples.get(family, [])
    coef, scale = draft_model(method, samples), interp_or(samples, cost)
    other = statistics.median([s.other_ms for s in samples]) if samples else 0.0
    out = []
    if family == "dflash":  # a chain: block position i is kept when every one before it was
        n_max = min(cap["block"], len(acc) + 1)
        gains = _prefix_gains([row[:1] for row in acc], n_max)
        return [
            Candidate({"block": n}, n, gains[n - 1], scale * cost.forward_ms(n), float(coef[0]), other, cost.plain_ms)
            for n in range(2, n_max + 1)
        ]
    n_max = cap["total_tokens"]
    if family in ("eagle", "eagle3"):
        for depth in range(1, min(cap["depth"], len(acc)) + 1):
            for top_k in range(1, cap["top_k"] + 1):
                gains = _prefix_gains([row[:top_k] for row in acc[:depth]], n_max)
                draft = max(0.0, float(np.dot(coef, _terms(method, {"depth": depth, "top_k": top_k}))))
                for n in range(2, n_max + 1):
                    f = {"depth": depth, "top_k": top_k, "total_tokens": n}
                    out.append(Candidate(f, n, gains[n - 1], scale * cost.forward_ms(n), draft, other, cost.plain_ms))
        return out
    for heads in range(1, min(cap["heads"], len(acc)) + 1):
        gains = _prefix_gains(acc[:heads], n_max)
        for n in range(2, n_max + 1):
            f = {"heads": heads, "total_tokens": n}
            draft = max(0.0, float(np.dot(coef, _terms(method, f, _hydra_depth(method, f)))))
            out.append(Candidate(f, n, gains[n - 1], scale * cost.forward_ms(n), draft, other, cost.plain_ms))
    return out


def lookahead_rows() -> list[dict[str, Any]]:
    """Lookahead's measured acceptance per W / N / G (models/lookahead_sweep.json; A does not depend on the device
    at temperature 0)."""
    return json.loads(LOOKAHEAD_SWEEP.read_text(encoding="utf-8"))["rows"]


def window_candidates(cost: DeviceCost) -> list[Candidate]:
    """Every Lookahead setting whose acceptance was measured, priced on this device."""
    samples = cost.samples.get("lookahead", [])
    scale = interp_or(samples, cost)
    other = statistics.median([s.other_ms for s in samples]) if samples else 0.0
    draft = statistics.median([s.draft_ms for s in samples]) if samples else 0.0
    out = []
    for row in lookahead_rows():
        f = {k: int(row[k]) for k in ("window", "ngram", "guesses")}
        n = 1 + (f["ngram"] - 1) * (f["window"] + f["guesses"])
        out.append(Candidate(f, n, float(row["A"]), scale * cost.forward_ms(n), draft, other, cost.plain_ms))
    return out


def _best(cands: Iterable[Candidate], paper: Mapping[str, int]) -> Candidate:
    """The largest predicted speedup; a tie goes to the narrower forward, then to the shape nearest the paper's
    (where the acceptance tables cannot tell two shapes apart: EAGLE's ranks past the 8th, a head that never
    enters the tree)."""

    def key(c: Candidate) -> tuple:
        return (-round(c.speedup, 6), c.forward_tokens, sum(abs(v - paper.get(k, v)) for k, v in c.fields.items()))

    return min(cands, key=key)


def cost_key(cost: DeviceCost) -> tuple:
    """What tells two device costs apart (a DeviceCost holds lists and dicts, so it is no key itself)."""
    return (cost.device, tuple(cost.ks), tuple(cost.ms), cost.plain_ms, repr(cost.samples))


_SEARCHED: dict[tuple, Fit] = {}  # (method, the cost's key) -> its fit: the search runs once per device cost


def fit_method(method: str, cost: DeviceCost) -> Fit:
    """`method`'s fitted shape on the device `cost` describes, searched once per cost (every run's start asks for
    it, through `measured`, and so does the run's price, tuning.budget)."""
    key = (method, *cost_key(cost))
    if key not in _SEARCHED:
        _SEARCHED[key] = _search(method, cost)
    return _SEARCHED[key]


def _search(method: str, cost: DeviceCost) -> Fit:
    """Every shape of `method` up to the paper's priced on `cost`: the best, the paper's, the best per width."""
    cands = window_candidates(cost) if method == "lookahead" else tree_candidates(method, cost, PAPER[method])
    paper = next((c for c in cands if c.fields == PAPER[method]), None)
    widths: dict[int, list[Candidate]] = {}
    for c in cands:
        widths.setdefault(c.forward_tokens, []).append(c)
    by_width = tuple(_best(widths[n], PAPER[method]) for n in sorted(widths))
    return Fit(method, _best(cands, PAPER[method]), paper, by_width, cost.device, cost.provenance)


# ---- measuring a device's cost ---------------------------------------------------------------------------------


def _timed(lm: LoadedModel, name: str, settings: Mapping[str, int], ids: list[int]) -> StepSample | None:
    """One generation at `settings` after a short warm-up: its mean step split, or None when the method cannot run
    here (no trained head for this model)."""
    mod = methods.get(name)
    try:
        cfg = replace(settled(mod.Config()), **settings)
        mod.generate(lm, ids, Sampling(max_new_tokens=4), cfg)
        trace = mod.generate(lm, ids, Sampling(max_new_tokens=TOKENS), cfg)
    except (OSError, ValueError, KeyError, RuntimeError):
        return None
    steps = [s for s in trace.steps if s.forward_tokens > 0]
    if not steps:
        return None
    n = len(steps)
    return StepSample(
        dict(settings),
        round(sum(s.forward_tokens for s in steps) / n, 3),
        round(sum(s.propose_s for s in steps) / n * 1000, 3),
        round(sum(s.verify_s for s in steps) / n * 1000, 3),
        round(sum(s.wall_s - s.propose_s - s.verify_s for s in steps) / n * 1000, 3),
    )


def measure_cost(lm: LoadedModel, curve: probe.LatencyCurve | None = None) -> DeviceCost:
    """Time plain decoding's step and each head's steps at SAMPLES' shapes on `lm`, beside the latency curve."""
    curve = curve or probe.cached_curve(lm)
    ids = encode(lm, PROMPT)
    where = provenance(lm.describe()).to_dict()  # before the runs: the load average is other work's
    with lm.lock:
        base = _timed(lm, "ar", {}, ids)
        samples = {}
        for name, shapes in SAMPLES.items():
            got = [s for s in (_timed(lm, name, shape, ids) for shape in shapes) if s is not None]
            if got:
                samples[name] = got
    plain = (base.verify_ms + base.other_ms) if base else curve.ms[0]
    return DeviceCost(lm.describe(), list(curve.ks), list(curve.ms), round(plain, 3), samples, where)


def _path(lm: LoadedModel):
    safe = f"{lm.describe()} {cpu_isa()}".replace(" · ", "_").replace("/", "_").replace(" ", "_")
    return cache_root() / "fit" / f"{safe}.json"


def device_cost(lm: LoadedModel, refresh: bool = False) -> DeviceCost:
    """This device's stored cost, measured (with the latency curve) when absent, stale or asked for; a cost that
    cannot be stored is still returned."""
    path = _path(lm)
    if path.is_file() and not refresh:
        try:
            stored = DeviceCost.from_dict(json.loads(path.read_text(encoding="utf-8")))
            if stored.version == VERSION and stored.device == lm.describe():
                return stored
        except (ValueError, TypeError, KeyError):
            pass  # a damaged file is measured again
    cost = measure_cost(lm, probe.cached_curve(lm, refresh=refresh))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(cost), indent=1), encoding="utf-8")
    except OSError:
        pass  # a read-only cache: the measurement is used, not kept
    return cost


def fits(lm: LoadedModel, refresh: bool = False) -> dict[str, Fit]:
    """Every fitted method on this device (those whose head or table is here)."""
    cost = device_cost(lm, refresh)
    out = {}
    for name in PAPER:
        if name == "lookahead" or FAMILY[name] in cost.samples:
            out[name] = fit_method(name, cost)
    return out


# ---- Configs as they run --------------------------------------------------------------------------------------


def fitted_as(method: str) -> str:
    """The method whose fitted shape `method` runs at: itself, or a composition's first part (Medusa + Lookahead's
    tree is Medusa's)."""
    return next(iter(methods.card(method).composes if method in methods.available() else ()), method)


def fitted_fields(lm: LoadedModel, method: str) -> dict[str, int]:
    """The fitted shape of `method` on `lm`'s device ({} where it has none here); a composition's, the shape of the
    method its card names (Medusa + Lookahead's tree is Medusa's)."""
    fit = fits(lm).get(fitted_as(method))
    return dict(fit.best.fields) if fit else {}


def measured(lm: LoadedModel, cfg: Any, method: str = "") -> Any:
    """`cfg` as it runs on `lm`: prompt lookup's verify-cost curve filled from the latency probe, and a tree's or a
    window's shape fields left at 0 filled from the fit (any the fit has no value for: their fallback)."""
    empty = set(unmeasured(cfg))
    fill: dict[str, Any] = {}
    if empty - set(unfitted(cfg)):
        fill |= dict.fromkeys(empty - set(unfitted(cfg)), probe.verify_cost(lm))
    if unfitted(cfg) and method:
        shape = fitted_fields(lm, method)
        fill |= {n: shape[n] for n in unfitted(cfg) if n in shape}
    return settled(replace(cfg, **fill) if fill else cfg)


def prepare(lm: LoadedModel, configs: Mapping[str, Any], names: Iterable[str] = ()) -> dict[str, Any]:
    """Every method of `configs` and `names` with the Config it runs on `lm`: the one given, else its default, with
    what it measures of the device filled in (`measured`). A name that is no method (a bench peer) is left out."""
    known, out = set(methods.available()), {}
    for name in dict.fromkeys([*configs, *names]):
        cfg = configs.get(name)
        if cfg is None and name not in known:
            continue
        out[name] = measured(lm, cfg if cfg is not None else methods.make_config(name), name)
    return out


def report(all_fits: Mapping[str, Fit], cost: DeviceCost) -> str:
    """The fit as text: the device's curve, each method's fitted shape with its predicted A, r and speedup and its
    step split (ms: draft, verify, the rest) against plain decoding's step, and the paper's setting priced here."""
    where = Provenance.from_dict(cost.provenance).describe(flag_load=True) if cost.provenance else "unrecorded"
    rel = " ".join(f"{k}:{m / cost.ms[0]:.2f}x" for k, m in zip(cost.ks, cost.ms, strict=True))
    lines = [
        f"the fit on {cost.device} ({where})",
        f"  a forward of k tokens over one: {rel}",
        f"  plain decoding's step {cost.plain_ms:.1f} ms",
        "",
        f"{'method':<10} {'fitted shape':<34} {'A':>5} {'r':>5} {'pred.':>6}  {'draft':>6} {'verify':>7} {'rest':>5}"
        f"   paper here",
    ]
    for name, f in all_fits.items():
        b = f.best
        shape = " ".join(f"{k}={v}" for k, v in b.fields.items())
        paper = f"{f.paper.speedup:.2f}x (r {f.paper.r:.2f})" if f.paper else "not measured"
        lines.append(
            f"{name:<10} {shape:<34} {b.A:>5.2f} {b.r:>5.2f} {b.speedup:>5.2f}x  {b.draft_ms:>6.1f} "
            f"{b.verify_ms:>7.1f} {b.other_ms:>5.1f}   {paper}"
        )
    return "\n".join(lines)
