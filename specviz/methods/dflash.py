"""DFlash (Chen, Liang & Liu, 2026): a block drafter fills a whole block of masked positions in one forward pass.

Every other trained draft here is serial: EAGLE's head runs once per depth of its tree, a draft model once per
token. DFlash drafts like a block-diffusion model. Its context is the target's own features (the inputs of a low,
a middle and a high layer, as EAGLE-3 reads them) at every committed position, kept as keys and values in the
drafter's cache. One step:

- propose: one drafter forward over [root, MASK, …, MASK] (block positions, no causal mask among them) reads
  out a token at every masked position: block - 1 drafts from one pass (heads.dflash);
- verify: one target forward over root + drafts, a chain, which also hands over the fused layers' inputs;
- accept: the longest prefix the target agrees with at T = 0; at T > 0 each draft is a point-mass proposal
  judged by speculative sampling's rule (trees.walk), so the output is distributed exactly as the target's;
- commit: the target keeps the accepted prefix in its cache, and the drafter adds the accepted tokens' features
  to its context. The bonus token is the next root.
"""

from __future__ import annotations

import copy
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from specviz.core.details import DFlashDetail
from specviz.core.drafting import fit_field
from specviz.core.host import fetch
from specviz.core.model import LoadedModel
from specviz.core.sampling import ConfigError
from specviz.heads.dflash import DEFAULT_DIR, MAX_BLOCK, DFlashHead, cached_head, new_head, pass_root
from specviz.heads.eagle import HeadError, draft_weight
from specviz.heads.eagle_drafter import head_dtype
from specviz.methods.base import Card, Outcome, Run, Step, generator
from specviz.methods.speculator import TreeSpeculator, path_outcome
from specviz.trees.tree import TreeSpec
from specviz.trees.verifier import RunView, TreeVerifier, Verified
from specviz.trees.walk import Walk

CARD = Card(
    name="dflash",
    label="DFlash",
    summary="A block drafter fills a whole block of masked positions in one pass; the target verifies it as a chain.",
    colour="#6a3d9a",
    order=10,
    head="dflash",
    head_label="DFlash drafter",
    models=DEFAULT_DIR,
)


@dataclass(frozen=True)
class Config:
    """How many block positions to draft and which drafter, in which dtype."""

    # block positions verified, the root included: up to the drafter's own block, which it always drafts in one pass
    block: int = field(default=0, metadata=fit_field(4))
    head: str = ""  # folder of a trained drafter; "" = models/dflash; "random" = untrained (tests)
    head_dtype: str = "auto"  # the draft's dtype: "auto" = bf16 where the device computes it natively, else fp32

    def __post_init__(self) -> None:
        if not (self.block == 0 or 2 <= self.block <= MAX_BLOCK):
            raise ConfigError(f"block must be 2-{MAX_BLOCK} (0: fitted to the device), got {self.block!r}.")
        if self.head_dtype not in ("auto", "bf16", "fp32", "model"):
            raise ConfigError(f"head_dtype must be auto, bf16, fp32 or model, got {str(self.head_dtype)[:40]!r}.")


@dataclass
class Block:
    """One drafted block: root + drafts as sent to the target, as a chain, and the drafter's confidence in each."""

    tokens: list[int]
    spec: TreeSpec
    conf: list[float]


_COPIES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # head -> {(device, dtype): its drafting copy}


def drafting_copy(head: DFlashHead, device: torch.device, dtype: torch.dtype) -> DFlashHead:
    """The drafter in the draft dtype, made once per (head, device, dtype) and kept as long as the head is: the
    loaded drafter is shared by every session of the model, so it is never cast in place."""
    if head.fuse.weight.dtype == dtype and head.fuse.weight.device == device:
        return head
    per = _COPIES.setdefault(head, {})
    if (str(device), dtype) not in per:
        per[(str(device), dtype)] = copy.deepcopy(head).to(device, dtype).eval().requires_grad_(False)
    return per[(str(device), dtype)]


class BlockProposer:
    """The drafter over one generation: its context cache (each layer's keys and values of every committed
    position), and one forward a step that drafts a whole block."""

    def __init__(self, lm: LoadedModel, head: DFlashHead, cfg: Config) -> None:
        self.lm, self.dtype = lm, head_dtype(lm, cfg.head_dtype)
        self.head = drafting_copy(head, lm.device, self.dtype)
        self.layers = tuple(head.config.layers)
        self.block = head.config.block  # the drafter always fills the block it was trained on
        self.sent = min(cfg.block or self.block, self.block)  # the positions sent to the target, the root included
        self.rows = draft_weight(head, lm.lm_head, self.dtype)  # [Vd, h]
        self.context: list[tuple[torch.Tensor, torch.Tensor]] = []
        self.last: torch.Tensor | None = None  # the last committed position's context feature [1, 1, h]

    @torch.inference_mode()
    def add(self, feats: torch.Tensor, first: int) -> None:
        """The target's layer inputs [m, 3h] at positions first … first + m - 1 join the context."""
        positions = torch.arange(first, first + len(feats), device=self.lm.device)[None]
        c = self.head.fused(feats.to(self.dtype)[None])
        self.last = c[:, -1:]
        new = self.head.context(c, positions)
        if not self.context:
            self.context = new
            return
        self.context = [(torch.cat([k, k2], 2), torch.cat([v, v2], 2)) for (k, v), (k2, v2) in zip(self.context, new)]

    def start(self, run: RunView, prompt_feats: torch.Tensor) -> None:
        """The prompt's features are the first context."""
        self.context = []
        self.add(prompt_feats, 0)

    @torch.inference_mode()
    def propose(self, run: Run, root: int) -> Block:
        """One drafter forward over [root, MASK × (block - 1)] at the root's position and after: a token and its
        probability at every masked position, read back once; drafts stop at an EOS and at the answer's end."""
        base = run.seq_len
        emb = run.lm.hf.get_input_embeddings()(torch.tensor([[root]], device=self.lm.device)).to(self.dtype)
        x = self.head.block_inputs(emb, self.block, self.last)
        positions = torch.arange(base, base + self.block, device=self.lm.device)[None]
        out = self.head(x, positions, self.context)[0, 1:]  # [block - 1, h]
        probs = torch.softmax((out @ self.rows.T).float(), dim=-1)
        conf, index = probs.max(-1)
        drafts, conf_host = fetch(self.head.draft_ids[index], conf)  # the step's one read: the block's tokens
        n = min(self.sent - 1, max(0, run.remaining - 1))
        ends = next((i for i, x in enumerate(drafts[:n]) if x in run.lm.eos_ids), n - 1)
        drafts = [int(x) for x in drafts[: ends + 1]]
        return Block(
            [root, *drafts], TreeSpec.chain(1 + len(drafts)), [round(float(c), 4) for c in conf_host[: len(drafts)]]
        )

    def commit(self, v: Verified, path: list[int]) -> None:
        """The accepted prefix's layer inputs (root included) join the context, at their positions."""
        self.add(v.feats[path], v.prefix)


class DFlash(TreeSpeculator):
    """One DFlash generation: the block proposer, and a verifier that hands over the fused layers' inputs."""

    DETAIL = DFlashDetail
    proposer: BlockProposer

    def outcome(self, run: Run, draft: Any, v: Verified, w: Walk) -> Outcome:
        def detail() -> DFlashDetail:
            said = [int(t) for t in fetch(v.logits.argmax(-1))[0]] if run.sampling.greedy else []
            drafts = draft.tokens[1:]
            texts = [run.lm.token_text(t) for t in drafts]
            return DFlashDetail(self.proposer.sent, drafts, texts, draft.conf, said, len(w.path) - 1)

        return path_outcome(v, w, detail)


def head_for(lm: LoadedModel, cfg: Config, head: DFlashHead | None) -> DFlashHead:
    """The drafter given, else the one the config names (loaded once per folder and file time); "random": untrained;
    ConfigError with the reason when none can be loaded, or when it reads layers this model lacks."""
    if head is None and cfg.head == "random":
        head = new_head(lm.hf.config, lm.name, depth=2).to(lm.device).eval()
    if head is None:
        try:
            head = cached_head(lm, Path(cfg.head) if cfg.head else DEFAULT_DIR)
        except HeadError as exc:
            raise ConfigError(str(exc)) from None
    if max(head.config.layers) >= len(lm.hf.model.layers):
        raise ConfigError(f"The DFlash drafter reads layers {head.config.layers}; this model has fewer.")
    return head


def begin(run: Run, cfg: Config, head: DFlashHead | None = None) -> Step:
    """The drafter and a verifier that hands over the layers it reads; the prefill keeps the prompt's inputs of them."""
    drafting = BlockProposer(run.lm, head_for(run.lm, cfg, head), cfg)
    return DFlash(drafting, TreeVerifier(layers=drafting.layers)).start(run)


generate = generator(CARD.name, Config, begin, "Decode with a DFlash block drafter until EOS or max_new_tokens.")


def tiny_resources(lm: LoadedModel, seed: int = 1) -> dict:
    """An untrained drafter in the model's own dtype, reading layers that fit the model's depth (any model)."""
    head = new_head(lm.hf.config, lm.name, seed=seed, block=4)
    return {"config": Config(head_dtype="model"), "head": head.to(lm.device, lm.dtype).eval().requires_grad_(False)}


def accepting_resources(lm: LoadedModel) -> dict:
    """tiny_resources with a drafter that guesses the root again at every position (heads.dflash.pass_root): right
    inside the sticky model's runs."""
    kw = tiny_resources(lm)
    pass_root(kw["head"])
    return kw
