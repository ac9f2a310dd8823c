"""What each page offers a lesson: its file and title, the figures a stop may focus, and its settings by widget key.

The settings mirror the pages' own widgets (their keys and ranges), so a stop's values are ones the page accepts.
"""

from __future__ import annotations

from specviz import methods
from specviz.core.acceptance import RULES
from specviz.methods.jacobi import INIT_SOURCES
from specviz.tuning.lossless import DRAFTS
from specviz.tuning.presets import PRESETS

PRESET_KEYS = {m: tuple(p.key for p in ps) for m, ps in PRESETS.items()}  # the pages' own preset radios

# page id -> (file, what the page is called in the app)
PAGES: dict[str, tuple[str, str]] = {
    "home": ("views/home.py", "Why parallel decoding"),
    "timeline": ("views/timeline.py", "Timeline"),
    "medusa": ("views/medusa.py", "Medusa"),
    "eagle": ("views/eagle.py", "EAGLE"),
    "lookahead": ("views/lookahead.py", "Lookahead & Jacobi"),
    "acceptance": ("views/acceptance.py", "Acceptance decisions"),
    "compare": ("views/compare.py", "Compare methods"),
    "lineage": ("views/lineage.py", "Lineage"),
}
# the figures a stop may focus, by the name each page gives it (ui.common.show_figure); each is drawn from traces
# or stored measurements, and output/lesson_deck.py draws the same one for the slide
FIGURES: dict[str, tuple[str, ...]] = {
    "home": ("latency_curve", "gpu_whatif"),
    "timeline": ("timeline_race", "timeline_at", "tokens_over_time"),
    "medusa": ("medusa_tree", "medusa_mask", "medusa_steps", "medusa_tokens", "hydra_depths"),
    "eagle": (
        "eagle_growth",
        "eagle_features",
        "eagle_verify",
        "eagle_steps",
        "hybrid_origins",
        "eagle3_fusion",
        "eagle_static_vs_dynamic",
        "eagle_tree_sampling",
    ),
    "lookahead": ("lookahead_window", "lookahead_verify", "lookahead_mask", "lookahead_steps", "jacobi_grid"),
    "acceptance": (
        "acceptance_decisions",
        "acceptance_typical",
        "acceptance_lab",
        "sps_residual",
        "kv_cache",
        "sps_exact",
        "sps_cost_model",
        "what_data_buys",
    ),
    "compare": ("speedup", "a_and_r", "where_methods_win", "speedup_vs_batch", "speedup_vs_context"),
    "lineage": ("lineage",),
}
# figures only the lesson draws (output/lesson_math.py, viz/kvcache.py, viz/whatif.py), none of them a page's
LESSON_ONLY = ("gpu_whatif", "sps_residual", "kv_cache", "sps_exact", "sps_cost_model", "what_data_buys",
               "eagle_tree_sampling")  # fmt: skip
# drawn from stored data or arithmetic, no run of the stop's methods
COMPUTED = ("gpu_whatif", "sps_exact", "sps_cost_model", "what_data_buys")
REPEATS = (1, 9)  # a live page's interleaved runs: its `<page>.repeats` input
# widget keys a lesson may still use from before a rename: old key -> (today's key, what its value gains); Medusa's
# tree was `budget` (drafted nodes), now total_tokens (the root included, as every tree method counts)
OLD_SETTINGS: dict[str, tuple[str, int]] = {"medusa.budget": ("medusa.total_tokens", 1)}
# page -> widget key -> ("int"|"float", low, high) | ("bool",) | ("choice", options) | ("methods",)
SETTINGS: dict[str, dict[str, tuple]] = {
    "home": {},
    "timeline": {"timeline.methods": ("methods",)},
    "medusa": {
        "medusa.preset": ("choice", PRESET_KEYS["medusa"]),
        "medusa.total_tokens": ("int", 1, 65),
        "medusa.acceptance": ("choice", ("exact", "typical")),
        "medusa.temperature": ("float", 0.0, 1.5),
        "medusa.eps": ("float", 0.01, 0.5),
        "medusa.delta": ("float", 0.05, 1.0),
        "medusa.hydra": ("bool",),
        "medusa.repeats": ("int", *REPEATS),
    },
    "eagle": {
        "eagle.preset": ("choice", PRESET_KEYS["eagle"]),
        "eagle.depth": ("int", 1, 8),
        "eagle.top_k": ("int", 1, 16),
        "eagle.total_tokens": ("int", 2, 80),
        "eagle.tree": ("choice", ("dynamic", "static")),
        "eagle.temperature": ("float", 0.0, 1.5),
        "eagle.eagle3": ("bool",),
        "eagle.hybrid": ("bool",),
        "eagle.repeats": ("int", *REPEATS),
    },
    "lookahead": {
        "lookahead.preset": ("choice", PRESET_KEYS["lookahead"]),
        "lookahead.window": ("int", 1, 12),
        "lookahead.ngram": ("int", 2, 6),
        "lookahead.guesses": ("int", 0, 8),
        "lookahead.init": ("choice", INIT_SOURCES),
        "lookahead.seed_prompt": ("bool",),
        "lookahead.jacobi_guesses": ("int", 1, 16),
        "lookahead.jacobi_init": ("choice", INIT_SOURCES),
        "lookahead.repeats": ("int", *REPEATS),
    },
    "acceptance": {
        "acceptance.rule": ("choice", RULES),
        "acceptance.temperature": ("float", 0.0, 2.0),
        "acceptance.gamma": ("int", 1, 8),
        "acceptance.draft": ("choice", ("layers", "trained")),  # "trained" needs models/draft
        "acceptance.depth": ("int", 1, 16),
        "acceptance.eps": ("float", 0.01, 0.5),
        "acceptance.delta": ("float", 0.05, 1.0),
        "acceptance.samples": ("choice", (1000, 5000, 20000, 100000)),
        "acceptance.lab_draft": ("choice", DRAFTS),
    },
    "compare": {
        **{f"compare.on.{n}": ("bool",) for n in methods.MODULES if n != "ar"},
        "compare.repeats": ("int", *REPEATS),
    },
    "lineage": {},
}
