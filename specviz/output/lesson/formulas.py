"""The lesson's arithmetic: why speculative sampling is exact (worked on three tokens), its cost model with the
measured α and c of the drafts, and (lesson.gpu) the GPU stop's measured and modelled cost curves; each reduced to
what a check can name.

All of it is exact arithmetic or a model over stored measurements: nothing here runs the model.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specviz.core.draft_length import alpha_from, expected_tokens
from specviz.core.paths import REPO
from specviz.output.lesson.gpu import CHIPS, FLAT, SEVEN_B, flat_until, knee, whatif_functions  # noqa: F401

# the worked example: a target p and a draft q over a three-token vocabulary whose residual max(0, p − q) falls on
# two tokens, so the slide shows the rejection's mass shared out in proportion (any such p and q would do)
TOKENS = ("cat", "dog", "fox")
P, Q = (0.5, 0.3, 0.2), (0.2, 0.2, 0.6)
SWEEP = REPO / "models" / "draft" / "gamma_sweep.json"  # calibrate draft: the trained draft and a layer prefix
PUBLISHED = REPO / "docs" / "lesson" / "published.json"  # speedups and A copied from papers, each with its source
GAMMAS = tuple(range(0, 9))  # drafts per step the cost model considers (0: plain decoding)


def exact_parts(p: tuple[float, ...] = P, q: tuple[float, ...] = Q) -> dict[str, list[float]]:
    """Per token: accepted as drafted, min(p, q); given by the normalised residual on a rejection; and what the
    flawed rule (threshold p(x)/max p, then p again) gives; their sums are the output distributions."""
    accepted = [min(a, b) for a, b in zip(p, q, strict=True)]
    reject = 1.0 - sum(accepted)  # = Σ max(0, q − p) = Σ max(0, p − q)
    residual = [max(0.0, a - b) for a, b in zip(p, q, strict=True)]
    norm = sum(residual) or 1.0
    top = max(p)
    kept = [b * a / top for a, b in zip(p, q, strict=True)]  # the flawed threshold ignores q(x)
    flawed_reject = 1.0 - sum(kept)
    return {
        "p": list(p),
        "q": list(q),
        "accepted": accepted,
        "resampled": [reject * r / norm for r in residual],
        "flawed": [k + flawed_reject * a for k, a in zip(kept, p, strict=True)],
    }


def exact_functions() -> dict[str, Callable[..., Any]]:
    """gap(rule): the largest |output − p| over the three tokens; rejected(): the rejection's probability;
    residual_tokens(): how many tokens the residual gives mass to."""
    parts = exact_parts()
    out = {"speculative": [a + r for a, r in zip(parts["accepted"], parts["resampled"], strict=True)]}
    out["flawed"] = parts["flawed"]
    return {
        "gap": lambda rule: round(max(abs(o - t) for o, t in zip(out[rule], P, strict=True)), 12),
        "rejected": lambda: round(1.0 - sum(parts["accepted"]), 6),
        "residual_tokens": lambda: sum(r > 0 for r in parts["resampled"]),
    }


@dataclass(frozen=True)
class Draft:
    """A draft's measured acceptance α (per token, independent: the model's assumption) and cost c (one draft
    token against one target pass), with the verify pass's cost v against a plain step."""

    name: str
    label: str
    alpha: float
    c: float
    v: float
    measured: float  # the sweep's own speedup at its γ, for comparison with the model
    gamma: int
    needed: float = 0.0  # the α this draft's c would need for 1.3× (drawn dashed), 0 when not drawn


def model_speedup(alpha: float, c: float, gamma: int, v: float = 1.0) -> float:
    """Expected tokens per step over its cost in plain steps, γc + v (v: the verify pass against a plain step)."""
    return expected_tokens(alpha, gamma) / (gamma * c + (v if gamma else 1.0))


def best(alpha: float, c: float, v: float = 1.0) -> tuple[int, float]:
    """(γ, speedup) of the best γ in GAMMAS (0: no drafting pays)."""
    return max(((g, model_speedup(alpha, c, g, v)) for g in GAMMAS), key=lambda t: (round(t[1], 9), -t[0]))


def alpha_for(target: float, c: float, v: float = 1.0) -> float:
    """The smallest α at which some γ reaches `target` (bisection; 1.0 if none does)."""
    lo, hi = 0.0, 1.0
    if best(hi - 1e-9, c, v)[1] < target:
        return 1.0
    for _ in range(50):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if best(mid, c, v)[1] < target else (lo, mid)
    return math.ceil(hi * 1e4) / 1e4  # rounded up: at this α the target is reached


def drafts(path: Path = SWEEP) -> tuple[list[Draft], dict[str, Any]]:
    """The trained draft at the γ its sweep found best and the layer prefix the sweep measured, with the sweep's
    provenance: α fitted to the measured A, c and v from the measured draft and verify times."""
    data = json.loads(path.read_text(encoding="utf-8"))
    ar_ms = float(data["ar_ms_per_token"])
    rows = {(r["draft"], r["layers"]): r for r in data["rows"] if r["draft"] == "layers"}
    trained = max((r for r in data["rows"] if r["draft"] == "trained"), key=lambda r: r["speedup"])
    out = []
    for r in [trained, *rows.values()]:
        g = int(r["gamma"])
        name = "trained" if r["draft"] == "trained" else "layers"
        label = "the trained draft" if name == "trained" else f"the untrained prefix (layers {r['layers']})"
        c, v = float(r["draft_ms"]) / g / ar_ms, float(r["verify_ms"]) / ar_ms
        out.append(Draft(name, label, alpha_from(float(r["A"]), g), round(c, 4), round(v, 4), r["speedup"], g))
    return out, {"provenance": data.get("provenance", {}), "command": data.get("command", "")}


def cost_functions(found: list[Draft]) -> dict[str, Callable[..., Any]]:
    by = {d.name: d for d in found}
    return {
        "alpha": lambda n: by[n].alpha,
        "c": lambda n: by[n].c,
        "best_gamma": lambda n: best(by[n].alpha, by[n].c, by[n].v)[0],
        "best_speedup": lambda n: round(best(by[n].alpha, by[n].c, by[n].v)[1], 4),
        "alpha_for": lambda s, n: alpha_for(float(s), by[n].c, by[n].v),
    }


def plain_math(text: str) -> str:
    """A narration's $$ … $$ formulas as plain Unicode for a slide: \\frac{a}{b} → (a)/(b), Greek letters, ^{…}."""
    out = re.sub(r"\s*\$\$(.+?)\$\$\s*", lambda m: f"\n    {_unlatex(m.group(1))}\n", text)
    return out.strip()


def display_math(text: str) -> str:
    """A narration for markdown: each $$ … $$ formula on its own lines, so it is rendered as display math."""
    return re.sub(r"\s*\$\$(.+?)\$\$\s*", lambda m: f"\n\n$$\n{m.group(1).strip()}\n$$\n\n", text).strip()


GREEK = {"alpha": "α", "gamma": "γ", "delta": "δ", "varepsilon": "ε", "epsilon": "ε", "approx": "≈", "cdot": "·",
         "sum_y": "Σ_y", "sum": "Σ", "le": "≤", "ge": "≥", "min": "min", "max": "max"}  # fmt: skip
SUPER = str.maketrans("0123456789+-()γ", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁽⁾ᵞ")


def _unlatex(s: str) -> str:
    s = re.sub(r"\\(?:text|mathrm|operatorname)\{([^{}]*)\}", r"\1", s)
    s = s.replace(r"\mathbb{E}", "E").replace(r"\left", "").replace(r"\right", "").replace(r"\Big", "")
    s = s.replace(r"\,", " ").replace(r"\ ", " ")
    s = re.sub(r"\^\{([^{}]*)\}", _power, s)  # powers first: their braces sit inside a fraction's
    for _ in range(3):  # nested fractions, innermost first
        s = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", lambda m: f"{_group(m.group(1))} / {_group(m.group(2))}", s)
    s = re.sub(r"\\([A-Za-z_]+)", lambda m: GREEK.get(m.group(1), m.group(1)), s)
    return " ".join(s.replace("{", "").replace("}", "").split())


def _group(s: str) -> str:
    """A fraction's part, in parentheses unless it is one symbol or a call."""
    return s if re.fullmatch(r"[\w\\]+(\([^()]*\))?", s.strip()) else f"({s})"


def _power(m: re.Match[str]) -> str:
    """^{…} as superscripts where every character has one, else ^(…)."""
    s = m.group(1).replace("\\gamma", "γ").replace(" ", "")
    return s.translate(SUPER) if all(ch in "0123456789+-()γ" for ch in s) else f"^({s})"


def computed(name: str, stored: dict[str, Any]) -> tuple[Any, dict[str, Callable[..., Any]], str]:
    """A computed stop's figure, the functions its checks read, and where its data was measured."""
    if name == "sps_exact":
        from specviz.output.viz.exactness import exact_figure

        return exact_figure(exact_parts(), TOKENS), exact_functions(), ""
    if name == "sps_cost_model":
        from dataclasses import replace

        from specviz.core.measure import Provenance
        from specviz.output.viz.exactness import cost_figure

        found, meta = drafts()
        where = Provenance.from_dict(meta["provenance"]).describe(None) if meta["provenance"] else "not recorded"
        fns = cost_functions(found)
        shown = [replace(d, needed=fns["alpha_for"](1.3, d.name)) if d.name == "trained" else d for d in found]
        return cost_figure(shown, model_speedup, GAMMAS, f"the sweep {where}"), fns, f"the draft sweep, {where}"
    if name == "gpu_whatif":
        from specviz.output.lesson.gpu import whatif

        return whatif(stored)
    if name == "what_data_buys":
        return _data_buys()
    if name == "published_figures":
        return _published()
    raise KeyError(f"no computed figure {name!r}")


def _published() -> tuple[Any, dict[str, Callable[..., Any]], str]:
    """The papers' and Spec-Bench's numbers beside this project's H200 run, badged with their sources, and
    published(source, method, stat): a stored speedup or A as the file copies it."""
    from specviz.output.deck import badge
    from specviz.output.viz.published import published_figure

    data = json.loads(PUBLISHED.read_text(encoding="utf-8"))
    table = {s["id"]: s["methods"] for s in data["sources"]}
    fig = badge(published_figure(data), "stored: " + "; ".join(s["badge"] for s in data["sources"]))
    where = "; ".join(f"{s['label']}: {s['cite']}" for s in data["sources"])
    return fig, {"published": lambda source, method, stat: float(table[source][method][stat])}, where


def _data_buys() -> tuple[Any, dict[str, Callable[..., Any]], str]:
    """The shipped heads' learning curves (models/: at most six lines on a slide), and top1(kind, data): each
    curve's last held-out top-1 at depth 1."""
    from specviz.output.viz.learning import learning_figure
    from specviz.tuning.learning import curves

    shipped = [c for c in curves() if c.folder.startswith("models/")][:6]
    last = {(c.kind, " + ".join(c.data)): c.points[-1][1][0] for c in shipped if c.points}
    where = "; ".join(sorted({c.where.describe(None) for c in shipped if c.where is not None}))
    fns = {"top1": lambda kind, data: round(last[kind, data], 4)}
    return learning_figure(shipped, [], 1), fns, f"the shipped heads' training, {where}"
