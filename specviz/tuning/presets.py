"""Named presets of the tree and window methods: the shape fitted to the device, and the one in each paper.

Each preset is a frozen method Config. "fitted" is the shape the device's fit chose (specviz.tuning.fit: the head's
held-out acceptance against this device's measured step cost); without a fit (no model loaded, a replay) its shape
fields stay unset and the fit fills them where a run starts. "paper" is the reference setting from each method's
paper or code, where the figures teach: Medusa's 63-node sparse tree over 4 heads and their top-10 (as the
reference's mc_sim_7b_63, here built from this checkout's calibration by specviz.trees.tree.sparse_tree),
EAGLE-2's total 60 / depth 5 / top-k 10, and Lookahead's W 7 / N 5 / G 7 (the reference's recommended setting for
7B models).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from specviz import methods
from specviz.methods import eagle, lookahead, medusa
from specviz.methods.base import unfitted


@dataclass(frozen=True)
class Preset:
    """A named setting of one method: its Config and why it is chosen."""

    key: str  # "fitted", "paper" or "window"
    label: str
    config: Any  # the method's frozen Config
    why: str


FITTED, PAPER, WINDOW = "fitted", "paper", "window"
_L2 = lookahead.Config(window=3, ngram=3, guesses=2)  # the smallest window with two levels
FITTED_LABEL = "fitted to this device"
CONFIGS = {"medusa": medusa.Config, "eagle": eagle.Config, "lookahead": lookahead.Config}


def fitted(method: str, shape: Mapping[str, int] | None = None, why: str = "") -> Preset:
    """The fitted preset: `shape` (the fit's fields on this device) over the method's Config; none given, the shape
    is left for the fit to fill where the run starts."""
    cfg = replace(CONFIGS[method](), **dict(shape or {}))
    told = (
        why
        or "The shape the fit chooses on the device that runs it: the head's held-out acceptance against "
        "this device's measured step cost (python -m specviz fit prints it)."
    )
    return Preset(FITTED, FITTED_LABEL, cfg, told)


def _paper(method: str) -> tuple[Preset, ...]:
    if method == "medusa":
        return (
            Preset(
                PAPER,
                "as in the paper",
                medusa.Config(heads=4, total_tokens=64),
                "64 tokens verified: the root and 63 drafted nodes over 4 heads and their top-10, chosen by the "
                "calibration's accuracies (the reference's mc_sim_7b_63 has the same size).",
            ),
        )
    if method == "eagle":
        return (
            Preset(
                PAPER,
                "as in the paper",
                eagle.Config(depth=5, top_k=10, total_tokens=60, tree="dynamic"),
                "EAGLE-2's reference setting: 5 draft rounds, top-k 10, 60 verified nodes, the dynamic tree.",
            ),
        )
    return (
        Preset(
            WINDOW,
            "the smallest 2-D window",
            _L2,
            f"W {_L2.window} / N {_L2.ngram} / G {_L2.guesses}, {_L2.forward_tokens} tokens per forward: two levels "
            "of guesses, so the window is the 2-D one the method is named for (N 2 keeps a single level).",
        ),
        Preset(
            PAPER,
            "as in the paper",
            lookahead.Config(window=7, ngram=5, guesses=7),
            "W 7 / N 5 / G 7, the reference's recommended setting for 7B models: a window of 4 levels and 7 "
            "n-grams verified per step.",
        ),
    )


def presets(method: str, shape: Mapping[str, int] | None = None, why: str = "") -> tuple[Preset, ...]:
    """The presets of one method (empty for a method without any): the fitted one first (`shape`, the fit's fields
    on this device, where the caller has them), then the paper's and any the figures need."""
    if method not in CONFIGS:
        return ()
    return (fitted(method, shape, why), *_paper(method))


START = {"lookahead": WINDOW}  # where a page starts, when not at the fitted shape: Lookahead's figures need two levels


def start(method: str, shape: Mapping[str, int] | None = None) -> Preset:
    """The preset a method's page starts at: the fitted one, unless its figures teach nothing there (START)."""
    return get(method, START.get(method, FITTED), shape)


def get(method: str, key: str, shape: Mapping[str, int] | None = None) -> Preset:
    """One preset by method and key; KeyError names the ones there are."""
    for p in presets(method, shape):
        if p.key == key:
            return p
    have = ", ".join(p.key for p in presets(method)) or "none"
    raise KeyError(f"{method} has no preset {key!r} (presets: {have}).")


def fields(method: str) -> tuple[str, ...]:
    """The Config fields a preset sets (its card's preset_fields); the pages' other settings (acceptance, initial
    guesses…) are left as they are."""
    return methods.card(method).preset_fields


def values(method: str, preset: Preset) -> dict[str, Any]:
    """The preset's values of the fields presets set (a field it leaves for the fit left out)."""
    empty = set(unfitted(preset.config))
    return {n: getattr(preset.config, n) for n in fields(method) if n not in empty}


def matching(method: str, current: dict[str, Any], shape: Mapping[str, int] | None = None) -> Preset | None:
    """The preset whose values equal `current` (a value for each of its fields), if any."""
    return next((p for p in presets(method, shape) if values(method, p) == current), None)


def applied(method: str, config: Any, preset: Preset) -> Any:
    """`config` with the preset's values; its other fields are kept."""
    return replace(config, **values(method, preset))


def verified_tokens(config: Any) -> int:
    """Tokens one target forward verifies under this config (the root included), once a step is full: every
    preset method's Config says (forward_tokens)."""
    return config.forward_tokens
