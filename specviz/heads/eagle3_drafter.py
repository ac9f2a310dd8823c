"""The EAGLE-3 head at inference: its drafter (the EAGLE drafter, fed fused layers) and its tree stepper.

The target's verify pass also returns the inputs of the head's three layers for every node
(`LoadedModel.forward_layers`); the drafter fuses the accepted ones into g (Eagle3Head.fuse_layers)
before they enter its KV cache, and reads its drafts through the head's final norm. Drafted tree nodes
read the head's own outputs a, exactly as EAGLE-2's do (specviz.trees.draft_tree), so tree growth, the rerank,
verification, acceptance and the commit are the EAGLE-2 stepper's (specviz.heads.eagle_drafter.TreeStepper).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from specviz.core.model import LoadedModel
from specviz.heads.eagle import EagleHead
from specviz.heads.eagle3 import Eagle3Head
from specviz.heads.eagle_drafter import Drafter, TreeStepper, head_dtype
from specviz.trees.draft_tree import feature_view
from specviz.trees.eagle_tree import Shape, Step, TreeResult
from specviz.trees.tree import TreeSpec


class Eagle3Drafter(Drafter):
    """The EAGLE drafter for an Eagle3Head: true features arrive as the target's layer inputs [m, 3h]."""

    head: Eagle3Head

    def __init__(self, head: Eagle3Head, lm: LoadedModel, dtype: torch.dtype | None = None) -> None:
        super().__init__(head, lm, dtype)

    @torch.inference_mode()
    def fused(self, layers: torch.Tensor) -> torch.Tensor:
        """Layer inputs [m, 3h] → the fused features g [m, h] the head's pairs read."""
        return self.head.fuse_layers(layers.to(self.device, self.dtype))

    def reset(self, prompt_ids: list[int], prompt_hidden: torch.Tensor) -> None:
        """Start a generation from the prompt's layer inputs [n, 3h]: pairs (g_j, x_{j+1})."""
        super().reset(prompt_ids, self.fused(prompt_hidden))

    def push(self, feats: torch.Tensor, tokens: list[int]) -> None:
        """Queue verified pairs from the target's layer inputs feats [m, 3h] and the next tokens."""
        if tokens:
            super().push(self.fused(feats[: len(tokens)]), tokens)

    def readout(self, out: torch.Tensor) -> torch.Tensor:
        """The head's final norm: what its LM-head rows read."""
        return self.head.readout(out)


def verify_layers(
    lm: LoadedModel, cache: Any, tokens: list[int], spec: TreeSpec, layers: tuple[int, ...]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """specviz.trees.tree.verify_tree, also returning each node's layer inputs: (logits, hidden, fused [n, 3H])."""
    if len(tokens) != len(spec):
        raise ValueError(f"{len(tokens)} tokens for a tree of {len(spec)} nodes.")
    prefix = cache.get_seq_length()
    mask = None if spec.is_chain() else spec.mask(lm.neg_inf(), lm.dtype)
    return lm.forward_layers(tokens, cache, layers, positions=spec.positions(prefix), mask=mask)


class Eagle3Stepper(TreeStepper):
    """The EAGLE-2 tree step with an EAGLE-3 head: the target hands over layer inputs, not final features."""

    drafter: Eagle3Drafter

    def __init__(self, lm: LoadedModel, head: EagleHead, cfg: Shape, drafter: Drafter | None = None) -> None:
        if not isinstance(head, Eagle3Head):
            raise TypeError(f"EAGLE-3 steps need an Eagle3Head, not a {type(head).__name__}.")
        super().__init__(lm, head, cfg, drafter or Eagle3Drafter(head, lm, head_dtype(lm, cfg)))
        self.layers = tuple(head.config.layers)
        self.last_layers: torch.Tensor | None = None  # the last committed token's layer inputs [3H]

    @classmethod
    def start(cls, run: Step, head: EagleHead, cfg: Shape) -> Eagle3Stepper:
        """Prefill the target, then the head over the prompt's pairs (timed as prefill).

        `run.prefill()` must also keep the prompt's layer inputs as `run.prompt_layers` [n, 3H]
        (specviz.methods.eagle3's LayersRun does).
        """
        stepper = cls(run.lm, head, cfg)
        run.prefill()
        layers = getattr(run, "prompt_layers", None)
        if layers is None:
            raise TypeError("An EAGLE-3 run's prefill must keep the prompt's layer inputs (prompt_layers).")
        t = run.now()
        stepper.drafter.reset(run.prompt_ids, layers)
        stepper.last_layers = layers[-1]
        run.prefill_s += run.now() - t
        return stepper

    def root_feature(self, run: Step) -> torch.Tensor:
        """The last committed token's layer inputs [3H] (the drafter fuses them)."""
        if self.last_layers is None:
            raise RuntimeError("The EAGLE-3 stepper has not been started (Eagle3Stepper.start).")
        return self.last_layers

    def verify(self, run: Step, tokens: list[int], spec: TreeSpec) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One target forward over the tree, with every node's layer inputs."""
        return verify_layers(run.lm, run.cache, tokens, spec, self.layers)

    def commit(self, run: Step, prefix: int, tokens: list[int], feats: torch.Tensor, path: list[int]) -> None:
        """EAGLE-2's commit; then remember the accepted path's last layer inputs for the next root."""
        super().commit(run, prefix, tokens, feats, path)
        self.last_layers = feats[path[-1]]

    def record(self, res: TreeResult, text: Callable[[int], str]) -> dict[str, Any]:
        """An Eagle3Step's fields: EAGLE-2's record, and the layers the head fuses."""
        return {**super().record(res, text), "layers": list(self.layers)}

    def feature_record(self, res: TreeResult, root_embed: torch.Tensor) -> dict:
        """The fused g the root's pair read and the head's normed output norm(a), against the target's final
        hidden state (both go through LM-head rows; the head is not trained to match it, only its tokens)."""
        dr = self.drafter
        with torch.inference_mode():
            g = dr.fused(res.f_t[None])[0]
            pred = dr.readout(res.tree.feats[0].to(dr.dtype))
            parts = res.f_t.double().view(len(self.layers), -1)  # the raw inputs of the fused layers
        rms = [round(float(p.pow(2).mean().sqrt()), 2) for p in parts]
        peak = [round(float(p.abs().max()), 1) for p in parts]
        return {**feature_view(g, root_embed, pred, res.hidden[0]), "layer_rms": rms, "layer_peak": peak}
