"""The EAGLE head at inference: a drafting copy per dtype (prepacked on the CPU) and the Drafter, which runs
(feature, token) pairs through the head on its own KV cache; `drafter` builds one for the EAGLE proposer
(specviz.methods.eagle.EagleProposer, which grows EAGLE-2's tree with it)."""

from __future__ import annotations

import copy
import weakref
from pathlib import Path

import torch
from torch import nn

from specviz.core.kernels import PackedLinear, bf16_native, can_pack, pack_module
from specviz.core.lean import KV, DecoderLayer, Linear, Pass, rope_angles
from specviz.core.model import LoadedModel, to_device
from specviz.core.sampling import ConfigError
from specviz.heads.eagle import DEFAULT_DIR, EagleHead, HeadError, cached_head, draft_weight, new_head, pass_through

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
        proj = nn.Linear(weight.shape[1], weight.shape[0], bias=False, device="meta", dtype=dtype)  # no init
        proj.weight = nn.Parameter(weight, requires_grad=False)  # (a drafter a run: 28 ms of random init per run)
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


class LeanHead:
    """The head's forward written out (core.lean's layer): fc over (embedding, feature), one decoder layer on a KV
    cache, a few dozen torch calls a round and no host read. EAGLE-3's input norms go first when the head has them.
    Built from a copy of the head in the draft dtype (the shared head is never cast)."""

    def __init__(self, head: EagleHead, device: torch.device, dtype: torch.dtype) -> None:
        src = copy.deepcopy(head).to(device=device, dtype=dtype).eval().requires_grad_(False)
        pack = can_pack(device, dtype)
        self.source = src
        cfg = head.config
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.scale = self.head_dim**-0.5
        self.pre = (getattr(src, "feat_norm", None), getattr(src, "embed_norm", None))
        self.fc = Linear(src.fc.weight, pack, src.fc.bias)
        self.layer = DecoderLayer(src.layer, pack)
        self.rotary, self.device, self.dtype = src.rotary, device, dtype

    def new_cache(self) -> KV:
        return KV(1, self.kv_heads, self.head_dim, self.device, self.dtype)

    def __call__(
        self, feats: torch.Tensor, emb: torch.Tensor, positions: torch.Tensor, kv: KV, mask: torch.Tensor | None
    ) -> torch.Tensor:
        """feats, emb [q, h] at positions [q] on top of the cache; mask additive [q, held + q] → the head's out."""
        past, q = kv.length, feats.shape[0]
        kv.reserve(past + q)
        feat_norm, embed_norm = self.pre
        if feat_norm is not None and embed_norm is not None:
            feats, emb = feat_norm(feats), embed_norm(emb)
        x = self.fc(torch.cat([emb, feats], dim=-1))
        cos, sin = rope_angles(self.rotary, x, positions, self.head_dim)
        out = self.layer(x, 0, Pass(kv, past, q, past + q, None, cos, sin, mask), self)
        kv.length = past + q
        return out


# head → {device → {dtype: LeanHead}}: built once per draft dtype, alive as long as the head
_LEAN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def lean_head(head: EagleHead, device: torch.device, dtype: torch.dtype) -> LeanHead:
    """The written-out forward of `head` in `dtype` on `device`, built once."""
    per = _LEAN.setdefault(head, {})
    key = (str(device), dtype)
    if key not in per:
        per[key] = LeanHead(head, device, dtype)
    return per[key]


class Drafter:
    """The head at inference: its own KV cache over (f_j, x_{j+1}) pairs, plus a queue of pairs not yet run.

    Head position j holds the pair (f_j, x_{j+1}) and predicts f_{j+1}, whose LM-head row scores x_{j+2}.
    """

    def __init__(self, head: EagleHead, lm: LoadedModel, dtype: torch.dtype | None = None) -> None:
        self.lm, self.device = lm, lm.device
        self.dtype = dtype or next(head.parameters()).dtype
        self.head, self.project = fast_head(head, lm.lm_head, self.dtype)
        self.lean = lean_head(head, lm.device, self.dtype)
        self.embed = lm.hf.get_input_embeddings()
        self.cache: KV = self.lean.new_cache()
        self.queue_feats: list[torch.Tensor] = []  # true features not yet run through the head, each [m, h]
        self.queue_tokens: list[int] = []

    @property
    def length(self) -> int:
        """Pairs held in the head's cache."""
        return self.cache.get_seq_length()

    def reset(self, prompt_ids: list[int], prompt_hidden: torch.Tensor) -> None:
        """Start a generation: run the prompt's pairs (f_j, x_{j+1}); prompt_hidden [n, h]."""
        self.cache = self.lean.new_cache()
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
        self, feats: torch.Tensor, tokens: list[int] | torch.Tensor, positions: torch.Tensor, see: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Run pairs on top of the cache; see [q, cached+q] bool says what each may attend.

        Returns (predicted features [q, h], draft log-probs [q, Vd]).
        """
        dev = self.device
        ids = to_device(tokens, dev, torch.long)
        emb = self.embed(ids).to(self.dtype)
        see = to_device(see, dev, torch.bool)
        mask = torch.zeros(see.shape, dtype=self.dtype, device=dev).masked_fill_(~see, torch.finfo(self.dtype).min)
        out = self.lean(feats.to(dev, self.dtype), emb, to_device(positions, dev, torch.long), self.cache, mask)
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

    def token_ids(self, draft_index: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary indices → token ids, on the device (read them back with the values they go with)."""
        return self.head.draft_ids[draft_index]

    def rollback(self, length: int) -> None:
        """Forget drafted tree nodes: keep the first `length` pairs."""
        extra = self.length - length
        if extra > 0:
            self.cache.crop(-extra)


def head_for(lm: LoadedModel, folder: str, head: EagleHead | None) -> EagleHead:
    """The head given, else the one in `folder`, a Config's `head` (ConfigError, with the reason, when none can be
    loaded)."""
    try:
        return head or load_head(lm, folder)
    except HeadError as exc:
        raise ConfigError(str(exc)) from None


def load_head(lm: LoadedModel, folder: str) -> EagleHead:
    """The head in `folder` (a Config's `head`; "" the default), loaded once per (model, folder, file time);
    "random": untrained."""
    if folder == "random":
        return new_head(lm.hf.config, lm.name, seed=0).to(lm.device).eval()
    return cached_head(lm, Path(folder) if folder else DEFAULT_DIR)  # on lm.device


def tiny_head(lm: LoadedModel, seed: int = 1, accepting: bool = False) -> EagleHead:
    """An untrained head in the model's own dtype, for any model (the contract test's tiny random model).

    accepting: the head passes the next token's embedding through (heads.eagle.pass_through), so every draft
    is right on a model whose next token does not depend on its input.
    """
    head = new_head(lm.hf.config, lm.name, seed=seed).to(lm.device, lm.dtype).eval().requires_grad_(False)
    return pass_through(head) if accepting else head


def head_dtype(lm: LoadedModel, name: str) -> torch.dtype:
    """The draft dtype a Config names (its `head_dtype`): "auto" is bf16 where the device computes bf16 in hardware
    (core.kernels.bf16_native: a GPU, avx512_bf16 or AMX) and fp32 elsewhere, where bf16 is emulated and slower;
    "bf16" and "fp32" as named. The float64 test model keeps its own dtype."""
    if name == "model" or lm.dtype == torch.float64:
        return lm.dtype
    if name == "auto":
        return torch.bfloat16 if bf16_native(lm.device) else torch.float32
    return torch.bfloat16 if name == "bf16" else torch.float32


def drafter(lm: LoadedModel, head: EagleHead, dtype: str) -> Drafter:
    """The head's drafter in the draft dtype a Config names; the Config itself goes to the proposer
    (methods.eagle.EagleProposer, with head.config's tables), not through this module."""
    return Drafter(head, lm, head_dtype(lm, dtype))
