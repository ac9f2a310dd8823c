"""EAGLE-3: a draft head over a fusion of the target's low, middle and high layers grows EAGLE-2's dynamic tree.

The target's verify pass also hands over the inputs of three of its layers (LoadedModel.forward_layers);
the head (specviz.heads.eagle3) fuses them, drafts from its own outputs deeper in the tree, and the tree
is grown, verified, accepted and committed exactly as EAGLE-2's (specviz.heads.eagle_drafter.TreeStepper):
greedy matching at T = 0, tree speculative sampling at T > 0, so the output is the target's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch

from specviz.core.details import Eagle3Step
from specviz.core.model import LoadedModel
from specviz.core.sampling import ConfigError, Sampling
from specviz.core.trace import Trace
from specviz.heads.eagle import HeadError, pass_through
from specviz.heads.eagle3 import DEFAULT_DIR, Eagle3Head, cached_head, default_layers, new_head
from specviz.heads.eagle3_drafter import Eagle3Stepper
from specviz.methods.base import OnStep, Outcome, Run, tree_outcome
from specviz.trees.eagle_tree import check_shape

NAME = "eagle3"
LABEL = "EAGLE-3"
SUMMARY = "A one-layer head reads a fusion of low, middle and high target layers and drafts EAGLE-2's dynamic tree."


@dataclass(frozen=True)
class Config:
    """Tree shape and the head, as EAGLE-2's (defaults: its CPU-tuned 2 / 4 / 6; GPU reference 5 / 10 / 60)."""

    depth: int = 2  # draft rounds = deepest drafted token
    top_k: int = 4  # dynamic: nodes expanded per round and children per node; static: max rank
    total_tokens: int = 6  # nodes verified in one target forward, root included
    tree: str = "dynamic"  # "dynamic" = EAGLE-2's growth (expand by confidence, rerank); "static" = EAGLE-1's
    head: str = ""  # folder of a trained head; "" = models/eagle3; "random" = untrained (tests)
    head_dtype: str = "bf16"  # the draft runs in bf16 on the CPU

    def __post_init__(self) -> None:
        check_shape(self)


def get_head(lm: LoadedModel, cfg: Config) -> Eagle3Head:
    """The head named by the config, loaded once per (model, folder, file time); "random": untrained."""
    if cfg.head == "random":
        return new_head(lm.hf.config, lm.name, seed=0).to(lm.device).eval()
    try:
        return cached_head(lm, Path(cfg.head) if cfg.head else DEFAULT_DIR)
    except HeadError as exc:
        raise ConfigError(str(exc)) from None


class LayersRun(Run):
    """A Run whose prefill also keeps the prompt's layer inputs, the first features the head reads."""

    def __init__(self, *args, layers: tuple[int, ...], **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.layers = layers
        self.prompt_layers: torch.Tensor | None = None  # [n, 3H]

    def forward_prompt(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Run's prompt forward through forward_layers, keeping the prompt's layer inputs."""
        logits, hidden, self.prompt_layers = self.lm.forward_layers(
            self.prompt_ids, self.cache, self.layers, logits_for=slice(-1, None)
        )
        return logits, hidden


class State:
    """Per-generation EAGLE-3 state next to the run: the tree stepper (the head's drafter and cache)."""

    def __init__(self, tree: Eagle3Stepper) -> None:
        self.tree = tree

    def step(self, run: Run, root: int) -> Outcome:
        """propose (draft tree) → verify (one target forward, with layer inputs) → accept → commit."""
        res = self.tree.step(run, root)
        return tree_outcome(res, lambda: Eagle3Step(**self.tree.record(res, run.lm.token_text)))


def generate(
    lm: LoadedModel,
    prompt_ids: list[int],
    sampling: Sampling,
    config: Config | None = None,
    prompt: str = "",
    on_step: OnStep | None = None,
    head: Eagle3Head | None = None,
) -> Trace:
    """Decode with an EAGLE-3 head until EOS or max_new_tokens; raise ConfigError when no head is found."""
    cfg = config or Config()
    head = head or get_head(lm, cfg)
    layers = tuple(head.config.layers)
    if max(layers) >= len(lm.hf.model.layers):
        raise ConfigError(f"The EAGLE-3 head fuses layers {list(layers)}; this model has {len(lm.hf.model.layers)}.")
    run = LayersRun(lm, prompt_ids, sampling, NAME, cfg, prompt, on_step, layers=layers)
    return run.decode(State(Eagle3Stepper.start(run, head, cfg)).step)


def tiny_resources(lm: LoadedModel, seed: int = 1) -> dict:
    """An untrained head in the model's own dtype, its fused layers fitted to the model's depth (any model)."""
    layers = default_layers(len(lm.hf.model.layers))
    head = new_head(lm.hf.config, lm.name, layers=layers, seed=seed).to(lm.device, lm.dtype)
    return {
        "config": Config(depth=3, top_k=3, total_tokens=8, head_dtype="model"),
        "head": head.eval().requires_grad_(False),
    }


def accepting_resources(lm: LoadedModel) -> dict:
    """tiny_resources with the head passing the next token's embedding through (heads.eagle.pass_through), so
    every draft is right on a model whose next token does not depend on its input."""
    kw = tiny_resources(lm)
    pass_through(kw["head"])
    return kw
