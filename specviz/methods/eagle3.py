"""EAGLE-3: a draft head over a fusion of the target's low, middle and high layers grows EAGLE-2's dynamic tree.

The target's verify pass also hands over the inputs of three of its layers (LoadedModel.forward_layers);
the head (specviz.heads.eagle3) fuses them, drafts from its own outputs deeper in the tree, and the tree
is grown, verified, accepted and committed as EAGLE-2's (the pieces of specviz.trees.eagle_tree.TreeStepper;
this file's Eagle3Stepper changes what the root reads and what verification hands back): greedy matching at
T = 0, tree speculative sampling at T > 0, so the output is the target's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from specviz.core.details import Eagle3Detail
from specviz.core.host import fetch
from specviz.core.model import LoadedModel, fused_layers
from specviz.core.sampling import ConfigError
from specviz.heads.eagle import HeadError, pass_through
from specviz.heads.eagle3 import DEFAULT_DIR, Eagle3Drafter, Eagle3Head, cached_head, new_head
from specviz.heads.eagle_drafter import head_dtype
from specviz.methods.base import Card, Outcome, Run, Step, generator, tree_outcome
from specviz.trees.draft_tree import feature_view
from specviz.trees.eagle_tree import BudgetFields, RunView, Shape, TreeResult, TreeStepper, check_shape
from specviz.trees.tree import TreeSpec, verify_tree_layers
from specviz.trees.walk import walk

CARD = Card(
    name="eagle3",
    label="EAGLE-3",
    summary="A one-layer head reads a fusion of low, middle and high target layers and drafts EAGLE-2's dynamic tree.",
    colour="#117733",
    order=9,
    figures="specviz.output.viz.eagle:gallery",
    head="eagle3",
    head_label="EAGLE-3 head",
    models=DEFAULT_DIR,
)
NAME, LABEL, SUMMARY = CARD.name, CARD.label, CARD.summary


@dataclass(frozen=True)
class Config(BudgetFields):
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

    def __init__(self, *args, layers: tuple[int, ...] = (), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.layers = layers  # set by begin, from the head, before the prefill
        self.prompt_layers: torch.Tensor | None = None  # [n, 3H]

    def forward_prompt(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Run's prompt forward through forward_layers, keeping the prompt's layer inputs."""
        logits, hidden, self.prompt_layers = self.lm.forward_layers(
            self.prompt_ids, self.cache, self.layers, logits_for=slice(-1, None)
        )
        return logits, hidden


class Eagle3Stepper(TreeStepper):
    """EAGLE-2's tree stepper with an EAGLE-3 head: the target hands over layer inputs, not final features."""

    drafter: Eagle3Drafter

    def __init__(self, drafter: Eagle3Drafter, cfg: Shape, head: Eagle3Head) -> None:
        super().__init__(drafter, cfg, head.config.calibration, head.config.confidence)
        self.layers = tuple(head.config.layers)
        self.last_layers: torch.Tensor | None = None  # the last committed token's layer inputs [3H]

    def root_feature(self, run: RunView) -> torch.Tensor:
        """The last committed token's layer inputs [3H] (the drafter fuses them)."""
        if self.last_layers is None:
            raise RuntimeError("The EAGLE-3 stepper has not been started (eagle3.start).")
        return self.last_layers

    def verify(
        self, run: RunView, tokens: list[int], spec: TreeSpec
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One target forward over the tree, with every node's layer inputs."""
        return verify_tree_layers(run.lm, run.cache, tokens, spec, self.layers)

    def commit(self, run: RunView, prefix: int, tokens: list[int], feats: torch.Tensor, path: list[int]) -> None:
        """EAGLE-2's commit; then remember the accepted path's last layer inputs for the next root."""
        super().commit(run, prefix, tokens, feats, path)
        self.last_layers = feats[path[-1]]

    def record(self, res: TreeResult, text: Callable[[int], str]) -> dict[str, Any]:
        """An Eagle3Detail's fields: EAGLE-2's record, and the layers the head fuses."""
        return {**super().record(res, text), "layers": list(self.layers)}

    def feature_record(self, res: TreeResult, root_embed: torch.Tensor) -> dict:
        """The fused g the root's pair read and the head's normed output norm(a), against the target's final
        hidden state (both go through LM-head rows; the head is not trained to match it, only its tokens)."""
        dr = self.drafter
        with torch.inference_mode():
            g = dr.fused(res.f_t[None])[0]
            pred = dr.readout(res.tree.feats[0].to(dr.dtype))
            parts = res.f_t.double().view(len(self.layers), -1)  # the raw inputs of the fused layers
        rms, peak = fetch(parts.pow(2).mean(-1).sqrt(), parts.abs().amax(-1))  # one read for every layer
        rms, peak = [round(x, 2) for x in rms], [round(x, 1) for x in peak]
        return {**feature_view(g, root_embed, pred, res.hidden[0]), "layer_rms": rms, "layer_peak": peak}


def start(run: LayersRun, head: Eagle3Head, cfg: Config) -> Eagle3Stepper:
    """Prefill the target (keeping the prompt's layer inputs), then the head over the prompt's pairs."""
    stepper = Eagle3Stepper(Eagle3Drafter(head, run.lm, head_dtype(run.lm, cfg)), cfg, head)
    run.prefill()
    if run.prompt_layers is None:
        raise TypeError("An EAGLE-3 run's prefill must keep the prompt's layer inputs (prompt_layers).")
    stepper.begin(run, run.prompt_layers)
    stepper.last_layers = run.prompt_layers[-1]
    return stepper


class State:
    """Per-generation EAGLE-3 state next to the run: the tree stepper (the head's drafter and cache)."""

    def __init__(self, tree: Eagle3Stepper) -> None:
        self.tree = tree

    def step(self, run: Run, root: int) -> Outcome:
        """propose (the head drafts a tree from fused layers) → verify (one target forward, with layer inputs) →
        accept → commit (the target's cache; the head's queue, and the path's last layer inputs)."""
        stepper, prefix = self.tree, run.seq_len
        f_t = stepper.root_feature(run)  # the last committed token's layer inputs [3H]
        with run.phase("propose"):
            tree = stepper.draft(f_t, root)
            nodes, spec = tree.verified()
            tokens = [tree.tokens[n] for n in nodes]
        with run.phase("verify"):
            logits, hidden, layers = stepper.verify(run, tokens, spec)
        with run.phase("accept"):  # greedy match at T = 0, tree speculative sampling at T > 0
            w = walk(run.sampling, run.gen, tokens, spec, logits, None, run.lm.token_text)
        with run.phase("commit"):
            stepper.commit(run, prefix, tokens, layers, w.path)
        res = TreeResult(tree, nodes, spec, tokens, logits, hidden, w, f_t)
        return tree_outcome(res, lambda: Eagle3Detail(**stepper.record(res, run.lm.token_text)))


def begin(run: LayersRun, cfg: Config, head: Eagle3Head | None = None) -> Step:
    """The head (given, else found; ConfigError when none is, or when it fuses layers this model lacks), the
    layers the run's prefill keeps, and the stepper drafting from the run's state."""
    head = head or get_head(run.lm, cfg)
    layers, depth = tuple(head.config.layers), len(run.lm.hf.model.layers)
    if max(layers) >= depth:
        raise ConfigError(f"The EAGLE-3 head fuses layers {list(layers)}; this model has {depth}.")
    run.layers = layers
    return State(start(run, head, cfg)).step


generate = generator(
    NAME, Config, begin, "Decode with an EAGLE-3 head until EOS or max_new_tokens.", run_type=LayersRun
)


def tiny_resources(lm: LoadedModel, seed: int = 1) -> dict:
    """An untrained head in the model's own dtype, its fused layers fitted to the model's depth (any model)."""
    layers = fused_layers(len(lm.hf.model.layers))
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
