"""The EAGLE head at inference: a drafting copy per dtype (prepacked on the CPU) and the Drafter, which
runs (feature, token) pairs through the head on its own KV cache."""

from __future__ import annotations

import copy
import weakref

import torch
from torch import nn

from specviz.heads.eagle import EagleHead, draft_weight
from specviz.kernels import PackedLinear, can_pack, pack_module
from specviz.model import LoadedModel

# head → {LM head → {dtype: (packed head, packed projection)}}; weak on both, so an entry lives only as
# long as the head and the LM head it was made from (a new model never finds an old model's projection)
_FAST: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def fast_head(head: EagleHead, lm_head: nn.Module, dtype: torch.dtype) -> tuple[EagleHead, nn.Module]:
    """The head in `dtype` for drafting, and its draft-vocabulary projection.

    On a CPU with oneDNN the head is copied once per dtype and the copy's linear layers and the
    projection are prepacked (PackedLinear), which takes a depth-2 draft from about 6.0 to 4.5 ms per
    step in bf16 on 2 cores; the trained head itself is left as it is, so it can still be read, saved
    or trained. Elsewhere (a GPU) the head is cast in place and the projection is a plain linear.
    """

    def projection() -> nn.Linear:
        weight = draft_weight(head, lm_head, dtype)  # [Vd, h]
        proj = nn.Linear(weight.shape[1], weight.shape[0], bias=False, device=weight.device, dtype=dtype)
        proj.weight = nn.Parameter(weight, requires_grad=False)
        return proj

    device = lm_head.get_parameter("weight").device
    if not can_pack(device, dtype):
        return head.to(device=device, dtype=dtype), projection()  # the head beside the embedding and LM head
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
