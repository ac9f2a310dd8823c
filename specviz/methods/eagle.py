"""EAGLE / EAGLE-2: a feature-level draft head grows a token tree; one target forward verifies it."""

from __future__ import annotations

from dataclasses import dataclass

from specviz.core.details import EagleDetail
from specviz.core.model import LoadedModel
from specviz.heads.eagle import DEFAULT_DIR, EagleHead
from specviz.heads.eagle_drafter import load_head, tiny_head
from specviz.methods.base import Card, Run, Step, generator
from specviz.methods.speculator import EagleSpeculator, eagle_proposer
from specviz.trees.eagle_tree import EagleConfig
from specviz.trees.verifier import TreeVerifier

CARD = Card(
    name="eagle",
    label="EAGLE-2",
    summary="A one-layer head drafts features, not just tokens; a dynamic tree is verified in one pass.",
    colour="#009e73",
    order=5,
    head="eagle",
    head_label="EAGLE-2 head",
    models=DEFAULT_DIR,
    batched="eagle",
    confidence=True,
    preset_fields=("depth", "top_k", "total_tokens", "tree"),
)


@dataclass(frozen=True)
class Config(EagleConfig):
    """Tree shape and the head (models/eagle's by default); defaults tuned on this 2-core CPU (EagleConfig says
    how; GPU reference: 5 / 10 / 60)."""


def get_head(lm: LoadedModel, cfg: Config) -> EagleHead:
    """The head named by the config, loaded once per (model, folder, file time)."""
    return load_head(lm, cfg.head)


class Eagle(EagleSpeculator):
    """One EAGLE-2 generation: the head's proposer (its drafter and cache; a tree grown by confidence and reranked
    to total_tokens) and the tree verifier, in the tree methods' one step (methods.speculator.TreeSpeculator.step:
    propose → verify → accept → commit, the head keeping the accepted path's features)."""

    DETAIL = EagleDetail


def begin(run: Run, cfg: Config, head: EagleHead | None = None) -> Step:
    """The head (given, else cfg.head's; ConfigError when none is) drafting from the run's state: the proposer
    holds the Config (its tree shape and budget), the head's module sees only its folder and draft dtype."""
    return Eagle(eagle_proposer(run.lm, cfg, head), TreeVerifier()).start(run)


generate = generator(CARD.name, Config, begin, "Decode with an EAGLE head until EOS or max_new_tokens.")


def tiny_resources(lm: LoadedModel, seed: int = 1, accepting: bool = False) -> dict:
    """An untrained head (heads.eagle_drafter.tiny_head) and a small tree, for any model."""
    return {
        "config": Config(depth=3, top_k=3, total_tokens=8, head_dtype="model"),
        "head": tiny_head(lm, seed, accepting),
    }


def accepting_resources(lm: LoadedModel) -> dict:
    """tiny_resources with a head whose every draft is right on a model whose next token ignores its input."""
    return tiny_resources(lm, accepting=True)
