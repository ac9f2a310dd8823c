"""The lineage of parallel decoding: each work, what it changed, and its answer to the four questions.

The four questions place any method: where the drafts come from, how the candidates are organised, whether
acceptance is lossless, and whether the step is bandwidth- or compute-bound. A work the app runs names its
registered method (`runs`), so a figure can put a measured A and speedup beside it; the others are
described from their papers, never measured here.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Work:
    key: str
    name: str
    year: int
    authors: str
    arxiv: str
    drafts: str  # where the drafts come from
    organised: str  # how candidates are organised and verified
    lossless: str  # whether acceptance keeps the target's distribution
    bound: str  # what the step spends, and when that stops paying
    parents: tuple[tuple[str, str], ...] = ()  # (parent key, what this work changed; "" draws no label)
    runs: str = ""  # the app's method name, "" when the app does not run it
    runs_note: str = ""  # how the app runs it, when not by default
    place: tuple[float, float] = (0.0, 0.0)  # (column, row) in the lineage figure


BANDWIDTH = "bandwidth-bound at batch 1: verifying a few tokens costs about one step"
WORKS: tuple[Work, ...] = (
    Work("stern", "Blockwise parallel decoding", 2018, "Stern, Shazeer & Uszkoreit", "1811.03115",
         "extra output heads on the model, each guessing one future position", "one block (a chain)",
         "yes at greedy: the longest prefix the model agrees with", BANDWIDTH, place=(1.6, 4.4)),
    Work("sps", "Speculative sampling", 2023, "Leviathan, Kalman & Matias; Chen et al.", "2211.17192",
         "a separate, smaller draft model (here: the target's first layers)", "a chain of γ drafts",
         "yes: accept with min(1, p/q), resample the residual", BANDWIDTH + "; the draft's own cost adds to r",
         runs="sps", place=(0, 1.6)),
    Work("pld", "Prompt lookup", 2023, "Saxena", "",
         "n-grams copied from the prompt and the text so far", "a chain", "yes (greedy match)",
         "almost free drafts; pays where the output copies its input", parents=(("sps", "no draft model"),),
         runs="pld", place=(0.5, 4.4)),
    Work("specinfer", "SpecInfer", 2023, "Miao et al.", "2305.09781",
         "several small draft models", "a token tree, verified in one pass with a tree attention mask",
         "yes: multi-step speculative sampling over the tree", BANDWIDTH + "; a wide tree moves it toward compute",
         parents=(("sps", "token trees"),), place=(1.05, 1.6)),
    Work("jacobi", "Jacobi decoding", 2023, "Santilli et al.", "2305.10427",
         "the model itself, iterating a window of guesses to a fixed point", "a window of parallel guesses",
         "yes (greedy: what converges is what plain decoding would write)", BANDWIDTH, runs="jacobi",
         place=(0, 0)),
    Work("medusa", "Medusa", 2024, "Cai et al.", "2401.10774",
         "K heads on the last hidden state, each guessing one position independently",
         "a static sparse tree chosen from calibration", "typical acceptance is not; exact matching is",
         BANDWIDTH + "; the tree's width is r", parents=(("stern", "heads"), ("specinfer", "tree attention")),
         runs="medusa", place=(2.1, 1.6)),
    Work("lookahead", "Lookahead decoding", 2024, "Fu, Bailis, Stoica & Zhang", "2402.02057",
         "Jacobi iteration fills an n-gram pool", "a 2-D window plus n-gram candidates, one forward",
         "yes (greedy match; rejection sampling at T > 0)", "spends FLOPs for steps: needs spare compute",
         parents=(("jacobi", "keep the n-grams"),), runs="lookahead", place=(2, 0)),
    Work("hydra", "Hydra", 2024, "Ankner et al.", "2402.05109",
         "heads that read the tokens already drafted on their branch", "a tree, as Medusa",
         "as Medusa", BANDWIDTH, parents=(("medusa", "dependent heads"),), runs="hydra",
         place=(2.7, 4.4)),
    Work("eagle", "EAGLE", 2024, "Li, Wei, Zhang & Zhang", "2401.15077",
         "a one-layer head, autoregressive over the target's features and the shifted tokens",
         "a static tree", "yes", BANDWIDTH, parents=(("medusa", "feature-level autoregression"),),
         runs="eagle", runs_note="tree=static", place=(3.15, 1.6)),
    Work("eagle2", "EAGLE-2", 2024, "Li, Wei, Zhang & Zhang", "2406.16858",
         "the EAGLE head", "a dynamic tree, grown and pruned by the draft's confidence", "yes", BANDWIDTH,
         parents=(("eagle", "dynamic tree"),), runs="eagle", place=(4.05, 1.6)),
    Work("eagle3", "EAGLE-3", 2025, "Li, Wei, Zhang & Zhang", "2503.01840",
         "a head fusing low, middle and high layers' features, predicting tokens",
         "a dynamic tree", "yes", BANDWIDTH, parents=(("eagle2", "fused layers"),),
         runs="eagle3", place=(5.1, 1.6)),
    Work("hybrid", "EAGLE-2 + n-gram pool", 2026, "this app", "",
         "the EAGLE head, plus n-gram continuations found in the text itself",
         "one tree: the pool's n-grams take the weakest leaves' places under the same node budget; "
         "while the text is being copied, the pool's chain alone",
         "yes (greedy match; tree rejection sampling over point masses)", BANDWIDTH,
         parents=(("eagle2", "graft the pool"), ("lookahead", "")), runs="hybrid", place=(4.5, 0)),
    Work("dflash", "DFlash", 2026, "Chen, Liang & Liu", "2602.06036",
         "a light block-diffusion model: a whole block of drafts in one parallel, non-causal pass",
         "a block", "yes", BANDWIDTH + "; drafting stops being serial",
         parents=(("eagle3", "drafts by diffusion"),), runs="dflash", place=(6, 1.6)),
)  # fmt: skip


def by_key() -> dict[str, Work]:
    return {w.key: w for w in WORKS}


def edges() -> list[tuple[Work, Work, str]]:
    """(parent, child, what the child changed), for every parent link."""
    works = by_key()
    return [(works[p], w, why) for w in WORKS for p, why in w.parents]
