"""Named presets of the tree and window methods: the fastest setting where it was measured, and the one in each
paper.

Each preset is a frozen method Config. "fastest" is the method's default, calibrated on 2 CPU cores (the sweeps
in models/ say where and when, and the preset is named for that machine, not for the one it runs on); "paper" is
the reference setting from each method's paper or code, where the figures teach: Medusa's 63-node sparse tree over
4 heads and their top-10 (as the reference's mc_sim_7b_63, here built from this checkout's calibration by
specviz.trees.tree.sparse_tree), EAGLE-2's total 60 / depth 5 / top-k 10, and Lookahead's W 7 / N 5 / G 7 (the
reference's recommended setting for 7B models).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from specviz import methods
from specviz.core.measure import Provenance
from specviz.core.paths import EAGLE_DIR, LOOKAHEAD_SWEEP, MEDUSA_DIR
from specviz.methods import eagle, lookahead, medusa


@dataclass(frozen=True)
class Preset:
    """A named setting of one method: its Config and why it is chosen."""

    key: str  # "fastest" or "paper"
    label: str
    config: Any  # the method's frozen Config
    why: str


FASTEST, PAPER, WINDOW = "fastest", "paper", "window"
_E, _L = eagle.Config(), lookahead.Config()  # the calibrated CPU defaults
_L2 = lookahead.Config(window=3, ngram=3, guesses=2)  # the smallest window with two levels


def swept(sweep: Path, config: lookahead.Config) -> str:
    """'1.17×': the speedup the lookahead sweep measured at this W / N / G ('' where it has no such row)."""
    try:
        rows = json.loads(sweep.read_text(encoding="utf-8"))["rows"]
        row = next(
            r for r in rows if (r["window"], r["ngram"], r["guesses"]) == (config.window, config.ngram, config.guesses)
        )
        return f"{float(row['speedup']):.2f}×"
    except (OSError, ValueError, KeyError, TypeError, StopIteration):
        return ""


def fastest_label(sweep: Path) -> str:
    """'fastest measured on a 2-core CPU': named for where the sweep that chose the default ran (its provenance)."""
    try:
        p = Provenance.from_dict(json.loads(sweep.read_text(encoding="utf-8"))["provenance"])
    except (OSError, ValueError, KeyError, TypeError):
        return "fastest where it was calibrated"
    return f"fastest measured on {'a GPU' if 'cuda' in p.device else f'a {p.cores}-core CPU'}"


PRESETS: dict[str, tuple[Preset, ...]] = {
    "medusa": (
        Preset(
            FASTEST,
            fastest_label(MEDUSA_DIR / "sweep.json"),
            medusa.Config(),
            f"{medusa.Config().total_tokens} tokens verified, the root included ({medusa.Config().total_tokens - 1} "
            "drafted): the fastest tree of the CPU sweep (models/medusa/sweep.json).",
        ),
        Preset(
            PAPER,
            "as in the paper",
            medusa.Config(heads=4, total_tokens=64),
            "64 tokens verified: the root and 63 drafted nodes over 4 heads and their top-10, chosen by the "
            "calibration's accuracies (the reference's mc_sim_7b_63 has the same size).",
        ),
    ),
    "eagle": (
        Preset(
            FASTEST,
            fastest_label(EAGLE_DIR / "live_sweep.json"),
            eagle.Config(),
            f"depth {_E.depth}, top-k {_E.top_k}, {_E.total_tokens} verified nodes: the fastest shape of the CPU "
            "live sweep "
            "(models/eagle/live_sweep.json).",
        ),
        Preset(
            PAPER,
            "as in the paper",
            eagle.Config(depth=5, top_k=10, total_tokens=60, tree="dynamic"),
            "EAGLE-2's reference setting: 5 draft rounds, top-k 10, 60 verified nodes, the dynamic tree.",
        ),
    ),
    "lookahead": (
        Preset(
            FASTEST,
            fastest_label(LOOKAHEAD_SWEEP),
            lookahead.Config(),
            f"W {_L.window} / N {_L.ngram} / G {_L.guesses}, {_L.forward_tokens} tokens per forward: the fastest of "
            "the CPU sweep (models/lookahead_sweep.json).",
        ),
        Preset(
            WINDOW,
            "the smallest 2-D window",
            _L2,
            f"W {_L2.window} / N {_L2.ngram} / G {_L2.guesses}, {_L2.forward_tokens} tokens per forward: two levels "
            "of guesses, so the window is the 2-D one the method is named for (N 2 keeps a single level). The CPU "
            f"sweep measured {swept(LOOKAHEAD_SWEEP, _L2) or 'it'} for it against "
            f"{swept(LOOKAHEAD_SWEEP, _L) or 'more'} for the fastest (models/lookahead_sweep.json).",
        ),
        Preset(
            PAPER,
            "as in the paper",
            lookahead.Config(window=7, ngram=5, guesses=7),
            "W 7 / N 5 / G 7, the reference's recommended setting for 7B models: a window of 4 levels and 7 "
            "n-grams verified per step.",
        ),
    ),
}


def presets(method: str) -> tuple[Preset, ...]:
    """The presets of one method (empty for a method without any)."""
    return PRESETS.get(method, ())


START = {"lookahead": WINDOW}  # where a page starts, when not at the fastest: Lookahead's figures need two levels


def start(method: str) -> Preset:
    """The preset a method's page starts at: the fastest, unless its figures teach nothing there (START)."""
    return get(method, START.get(method, FASTEST))


def get(method: str, key: str) -> Preset:
    """One preset by method and key; KeyError names the ones there are."""
    for p in presets(method):
        if p.key == key:
            return p
    raise KeyError(f"{method} has no preset {key!r} (presets: {', '.join(p.key for p in presets(method)) or 'none'}).")


def fields(method: str) -> tuple[str, ...]:
    """The Config fields a preset sets (its card's preset_fields); the pages' other settings (acceptance, initial
    guesses…) are left as they are."""
    return methods.card(method).preset_fields


def values(method: str, preset: Preset) -> dict[str, Any]:
    """The preset's values of the fields presets set."""
    return {n: getattr(preset.config, n) for n in fields(method)}


def matching(method: str, current: dict[str, Any]) -> Preset | None:
    """The preset whose values equal `current` (a value for each of its fields), if any."""
    return next((p for p in presets(method) if values(method, p) == current), None)


def applied(method: str, config: Any, preset: Preset) -> Any:
    """`config` with the preset's values; its other fields are kept."""
    return replace(config, **values(method, preset))


def verified_tokens(config: Any) -> int:
    """Tokens one target forward verifies under this config (the root included), once a step is full: every
    preset method's Config says (forward_tokens)."""
    return config.forward_tokens
