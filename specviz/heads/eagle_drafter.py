"""The EAGLE head at inference: a drafting copy per dtype (prepacked on the CPU), the Drafter, which runs
(feature, token) pairs through the head on its own KV cache, and the TreeStepper, a head's side of an EAGLE
tree step: it drafts a tree from the root (or skips), verifies a tree in one target forward, and commits the
accepted path to the target's cache and the head's queue. EAGLE-2's step (`TreeStepper.step`) is those phases
in order; the pool hybrid (specviz.methods.hybrid) composes its own step from the same pieces."""

from __future__ import annotations

import copy
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from specviz.core.kernels import PackedLinear, can_pack, pack_module
from specviz.core.model import LoadedModel
from specviz.core.sampling import ConfigError
from specviz.heads.eagle import DEFAULT_DIR, EagleHead, HeadError, cached_head, draft_weight, new_head, pass_through
from specviz.trees.draft_tree import DraftTree, feature_view, grow, static_paths, tree_detail
from specviz.trees.eagle_tree import Shape, Step, TreeResult
from specviz.trees.tree import TreeSpec, commit_path, verify_tree
from specviz.trees.walk import walk

# head → {LM head → {dtype: (packed head, packed projection)}}; weak on both, so an entry lives only as
# long as the head and the LM head it was made from (a new model never finds an old model's projection)
_FAST: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fast_head(head: EagleHead, lm_head: nn.Module, dtype: torch.dtype) -> tuple[EagleHead, nn.Module]:
    """The head in `dtype` on the LM head's device for drafting, and its draft-vocabulary projection.

    The head is never cast in place: the loaded head is shared by every session of the model, so casting it
    would change what another session drafts with (and what it saves). On a CPU with oneDNN it is copied once
    per (LM head, dtype) and the copy's linear layers and the projection are prepacked (PackedLinear), which
    takes a depth-2 draft from about 6.0 to 4.5 ms per step in bf16 on 2 cores. Elsewhere (a GPU) a head already
    in that dtype drafts as it is, and any other gets a fresh copy per drafter (one decoder layer; never cached,
    so it is never stale). RoPE's frequencies stay fp32 in every copy (EagleHead._apply).
    """

    def projection() -> nn.Linear:
        weight = draft_weight(head, lm_head, dtype)  # [Vd, h]
        proj = nn.Linear(weight.shape[1], weight.shape[0], bias=False, device=weight.device, dtype=dtype)
        proj.weight = nn.Parameter(weight, requires_grad=False)
        return proj

    device = lm_head.get_parameter("weight").device
    if not can_pack(device, dtype):
        if all(p.device == device and p.dtype == dtype for p in head.parameters()):
            return head, projection()
        return copy.deepcopy(head).to(device=device, dtype=dtype), projection()
    per_dtype = _FAST.setdefault(head, weakref.WeakKeyDictionary()).setdefault(lm_head, {})
    if dtype not in per_dtype:
        fast = copy.deepcopy(head).to(dtype).eval().requires_grad_(False)
        pack_module(fast)
        per_dtype[dtype] = (fast, PackedLinear(projection(), keep_weight=False))
    return per_dtype[dtype]


class Drafter:
    """The head at inference: its own KV cache over (f_j, x_{j+1}) pairs, plus a queue of pairs not yet run.

    Head position j holds the pair (f_j, x_{j+1}) and predicts f_{j+1}, whose LM-head row scores x_{j+2}.
    """

    def __init__(self, head: EagleHead, lm: LoadedModel, dtype: torch.dtype | None = None) -> None:
        self.lm, self.device = lm, lm.device
        self.dtype = dtype or next(head.parameters()).dtype
        self.head, self.project = fast_head(head, lm.lm_head, self.dtype)
        self.embed = lm.hf.get_input_embeddings()
        self.cache = head.new_cache()
        self.queue_feats: list[torch.Tensor] = []  # true features not yet run through the head, each [m, h]
        self.queue_tokens: list[int] = []

    @property
    def length(self) -> int:
        """Pairs held in the head's cache."""
        return self.cache.get_seq_length()

    def reset(self, prompt_ids: list[int], prompt_hidden: torch.Tensor) -> None:
        """Start a generation: run the prompt's pairs (f_j, x_{j+1}); prompt_hidden [n, h]."""
        self.cache = self.head.new_cache()
        self.queue_feats, self.queue_tokens = [prompt_hidden[:-1]], list(prompt_ids[1:])
        if self.queue_tokens:
            self.flush()

    def push(self, feats: torch.Tensor, tokens: list[int]) -> None:
        """Queue verified pairs: feats [m, h] are the target's true features, tokens the next tokens."""
        if tokens:
            self.queue_feats.append(feats[: len(tokens)])
            self.queue_tokens.extend(tokens)

    @torch.inference_mode()
    def run(
        self, feats: torch.Tensor, tokens: list[int], positions: torch.Tensor, see: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run pairs on top of the cache; see [q, cached+q] bool says what each may attend.

        Returns (predicted features [q, h], draft log-probs [q, Vd]).
        """
        dev = self.device
        ids = torch.as_tensor(tokens, dtype=torch.long, device=dev)
        emb = self.embed(ids).to(self.dtype)
        see = see.to(dev)
        mask = torch.zeros(see.shape, dtype=self.dtype, device=dev).masked_fill_(~see, torch.finfo(self.dtype).min)
        out = self.head(
            feats.to(dev, self.dtype)[None], emb[None], positions.to(dev)[None], self.cache, mask[None, None]
        )[0]
        logp = torch.log_softmax(self.project(self.readout(out)).float(), dim=-1)
        return out, logp

    def readout(self, out: torch.Tensor) -> torch.Tensor:
        """What the draft vocabulary's LM-head rows read from the head's output: EAGLE's feature as it is."""
        return out

    def flush(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Run every queued pair causally on top of the cache; return the last row's (feature, log-probs)."""
        feats = torch.cat([f.to(self.dtype) for f in self.queue_feats])
        tokens, past = self.queue_tokens, self.length
        q = len(tokens)
        dev = self.device
        see = torch.ones(q, past + q, dtype=torch.bool, device=dev)
        see[:, past:] = torch.ones(q, q, dtype=torch.bool, device=dev).tril()
        out, logp = self.run(feats, tokens, torch.arange(past, past + q, device=dev), see)
        self.queue_feats, self.queue_tokens = [], []
        return out[-1], logp[-1]

    def catch_up(self, root_feat: torch.Tensor, root: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Run the queued verified pairs plus (f_{N-1}, root); return (predicted f_N [h], log-probs [Vd])."""
        self.push(root_feat[None], [root])
        return self.flush()

    def to_token(self, draft_index: torch.Tensor) -> list[int]:
        """Draft-vocabulary indices → token ids."""
        return self.head.draft_ids[draft_index].tolist()

    def rollback(self, length: int) -> None:
        """Forget drafted tree nodes: keep the first `length` pairs."""
        extra = self.length - length
        if extra > 0:
            self.cache.crop(-extra)


def head_for(lm: LoadedModel, cfg: Shape, head: EagleHead | None) -> EagleHead:
    """The head given, else the config's (ConfigError, with the reason, when none can be loaded)."""
    try:
        return head or load_head(lm, cfg)
    except HeadError as exc:
        raise ConfigError(str(exc)) from None


def load_head(lm: LoadedModel, cfg: Shape) -> EagleHead:
    """The head named by the config, loaded once per (model, folder, file time); "random": untrained."""
    if cfg.head == "random":
        return new_head(lm.hf.config, lm.name, seed=0).to(lm.device).eval()
    return cached_head(lm, Path(cfg.head) if cfg.head else DEFAULT_DIR)  # on lm.device


def tiny_head(lm: LoadedModel, seed: int = 1, accepting: bool = False) -> EagleHead:
    """An untrained head in the model's own dtype, for any model (the contract test's tiny random model).

    accepting: the head passes the next token's embedding through (heads.eagle.pass_through), so every draft
    is right on a model whose next token does not depend on its input.
    """
    head = new_head(lm.hf.config, lm.name, seed=seed).to(lm.device, lm.dtype).eval().requires_grad_(False)
    return pass_through(head) if accepting else head


def head_dtype(lm: LoadedModel, cfg: Shape) -> torch.dtype:
    """bf16 only where the target runs fp32 or bf16 (the float64 test model keeps its own dtype)."""
    if cfg.head_dtype == "model" or lm.dtype == torch.float64:
        return lm.dtype
    return torch.bfloat16 if cfg.head_dtype == "bf16" else torch.float32


class TreeStepper:
    """Per-generation state of a tree method: the head's drafter (with its own KV cache) and the tree shape.

    What the drafter reads of the target is EAGLE's final hidden state; a head that reads something else
    (EAGLE-3's fused layers, specviz.heads.eagle3_drafter) brings its own drafter and overrides
    `root_feature` and `verify`.
    """

    def __init__(self, lm: LoadedModel, head: EagleHead, cfg: Shape, drafter: Drafter | None = None) -> None:
        self.cfg = cfg
        self.drafter = drafter if drafter is not None else Drafter(head, lm, head_dtype(lm, cfg))
        self.paths = static_paths(head.config.calibration, cfg) if cfg.tree == "static" else []

    @classmethod
    def start(cls, run: Step, head: EagleHead, cfg: Shape) -> TreeStepper:
        """Prefill the target, then the head's own prefill over the prompt's pairs (timed as prefill)."""
        _, hidden = run.prefill()
        stepper = cls(run.lm, head, cfg)
        t = run.now()
        stepper.drafter.reset(run.prompt_ids, hidden)
        run.prefill_s += run.now() - t
        return stepper

    def draft(self, feature: torch.Tensor, root: int) -> DraftTree:
        """Catch the head up with the verified features, then grow this step's tree from the root."""
        tree = DraftTree(tokens=[root])
        tree.feats[0], tree.logps[0] = self.drafter.catch_up(feature, root)
        grow(self.drafter, tree, self.cfg, self.cfg.tree, self.paths)
        return tree

    def root_feature(self, run: Step) -> torch.Tensor:
        """What the root's pair reads of the last committed token: its final hidden state."""
        return run.pending_hidden

    def verify(self, run: Step, tokens: list[int], spec: TreeSpec) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One target forward over the tree: (logits [n, V], hidden [n, H], what the drafter reads per node)."""
        logits, hidden = verify_tree(run.lm, run.cache, tokens, spec)
        return logits, hidden, hidden

    def skip(self, feature: torch.Tensor, root: int) -> DraftTree:
        """A tree of the root alone: the head drafts nothing this step, and the root's pair, which drafting
        would have run, waits in its queue with the verified pairs until the next step that drafts."""
        self.drafter.push(feature[None], [root])
        return DraftTree(tokens=[root])

    def commit(self, run: Step, prefix: int, tokens: list[int], feats: torch.Tensor, path: list[int]) -> None:
        """Keep the accepted path in the target's cache; the head keeps its pairs 0..prefix-1 (all built from
        true features; none were drafted past them on a skipped step) and queues the path's verified pairs."""
        commit_path(run.cache, prefix, path)
        self.drafter.rollback(prefix)
        self.drafter.push(feats[path], [tokens[i] for i in path[1:]])

    def step(self, run: Step, root: int) -> TreeResult:
        """propose (the head drafts a tree) → verify (one target forward) → accept → commit."""
        f_t, prefix = self.root_feature(run), run.seq_len
        with run.phase("propose"):
            tree = self.draft(f_t, root)
            nodes, spec = tree.verified()
            tokens = [tree.tokens[n] for n in nodes]
        with run.phase("verify"):
            logits, hidden, feats = self.verify(run, tokens, spec)
        with run.phase("accept"):
            w = walk(run.sampling, run.gen, tokens, spec, logits, None, run.lm.token_text)
        with run.phase("commit"):
            self.commit(run, prefix, tokens, feats, w.path)
        return TreeResult(tree, nodes, spec, tokens, logits, hidden, w, f_t)

    def record(self, res: TreeResult, text: Callable[[int], str]) -> dict[str, Any]:
        """The fields of an EagleStep for this result (figure data, built after the step's clock stops)."""
        root = res.tokens[0]
        emb = self.drafter.embed(torch.tensor([root], device=self.drafter.device)).detach()[0]
        return {
            "tree": tree_detail(res.tree, text, self.cfg.tree),
            "verify_nodes": res.nodes,
            "verify_parents": res.spec.parents,
            "path": [res.nodes[i] for i in res.path],
            "features": self.feature_record(res, emb) if 0 in res.tree.feats else {},  # {}: the head skipped
            "decisions": res.walk.decisions,
            "residual_token": res.walk.next_root,
        }

    def feature_record(self, res: TreeResult, root_embed: torch.Tensor) -> dict:
        """What the head read and predicted at the root against the target's feature, a few dimensions of it."""
        return feature_view(res.f_t, root_embed, res.tree.feats[0], res.hidden[0])
