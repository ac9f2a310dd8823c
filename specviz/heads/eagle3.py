"""The EAGLE-3 draft head (Li et al., 2025): it reads a fusion of three target layers, and predicts tokens only.

At position t the head reads g_t = fuse(concat(norm_l(l_t), norm_m(m_t), norm_u(u_t))), the residual stream
entering a low, a middle and a high decoder layer of the target, fused by one Linear(3h → h). Its input is
fc(concat(embed(x_{t+1}), g_t)) → one decoder layer → its own hidden a_{t+1}; norm(a_{t+1}) through the
target's frozen LM-head rows of the draft vocabulary scores x_{t+2}. There is no feature target: the loss
is on tokens only (specviz.training.eagle3_train). One draft step deeper, the feature input at a drafted
position is the head's own previous output a, not a target feature (none exists there), so the head is
trained unrolled on its own outputs ("training-time test").

Design choices, beyond the paper:
- each of the three layers gets its own RMSNorm (learnable weight) before the fusing Linear: these
  pre-norm residuals carry massive activations (up to ~25,000 on a few tokens such as the first), which
  would swamp a plain linear fusion;
- the feature (g or a) and the token embedding are each RMS-normalised before fc, as EAGLE-3's reference
  normalises both inputs of its first layer, so a drafted a and a fused g enter on the same scale;
- token logits use the target's frozen LM-head rows over a reduced draft vocabulary (EAGLE-3's d2t idea,
  as specviz.heads.eagle does), behind the head's own final RMSNorm; no new output matrix is trained.

Eagle3Head is an EagleHead (same fc, decoder layer, rotary and draft vocabulary; only its inputs and its
read-out differ), so the draft tree (specviz.trees.draft_tree) and the EAGLE proposer run it unchanged; its
drafter (Eagle3Drafter) fuses the target's layer inputs before they enter the head's KV cache.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from specviz.core.model import LoadedModel, fused_layers
from specviz.core.paths import MODELS
from specviz.core.sampling import ConfigError
from specviz.core.schema import Between
from specviz.heads import store
from specviz.heads.eagle import SPECS, EagleHead, HeadConfig, HeadError, check_shape, init_linears, load_weights
from specviz.heads.eagle import save_head as save_eagle_head
from specviz.heads.eagle_drafter import Drafter
from specviz.heads.files import Kind

EAGLE3_FORMAT = "specviz-eagle3/1"
DEFAULT_DIR = MODELS / "eagle3"
WEIGHTS, CONFIG = "model.safetensors", "config.json"
TRAIN_HINT = "python -m specviz train eagle3"
KIND = Kind(EAGLE3_FORMAT, "an EAGLE-3 head", HeadError, f"retrain with: {TRAIN_HINT}")


@dataclass(frozen=True)
class Eagle3Config(HeadConfig):
    """An EAGLE head's shape and training record, plus which target layers' inputs it fuses."""

    format: str = EAGLE3_FORMAT
    layers: list[int] = field(default_factory=list)  # decoder layers whose input is fused, low → high

    @classmethod
    def for_target(
        cls, hf_config: Any, target: str = "", draft_vocab: int = 0, layers: tuple[int, ...] | None = None
    ) -> Eagle3Config:
        """The head's shape read off the target's transformers config; layers default to fused_layers."""
        base = HeadConfig.from_target(hf_config, target, draft_vocab)
        fused = fused_layers(int(hf_config.num_hidden_layers)) if layers is None else layers
        return cls(**{**asdict(base), "format": EAGLE3_FORMAT, "layers": [int(i) for i in fused]})


class Eagle3Head(EagleHead):
    """EagleHead with EAGLE-3's inputs (fused layers; normalised feature and embedding) and a normed read-out."""

    config: Eagle3Config

    def __init__(self, config: Eagle3Config, draft_ids: torch.Tensor | None = None) -> None:
        from transformers.models.llama.modeling_llama import LlamaRMSNorm

        super().__init__(config, draft_ids)
        h, eps = config.hidden_size, config.rms_norm_eps
        self.layer_norms = nn.ModuleList(LlamaRMSNorm(h, eps) for _ in config.layers)  # massive activations
        self.fuse = nn.Linear(len(config.layers) * h, h, bias=False)
        self.feat_norm, self.embed_norm = LlamaRMSNorm(h, eps), LlamaRMSNorm(h, eps)
        self.norm = LlamaRMSNorm(h, eps)  # before the frozen LM-head rows

    def fuse_layers(self, layers: torch.Tensor) -> torch.Tensor:
        """The target's layer inputs [..., 3h] (as forward_layers returns them) → the fused feature g [..., h]."""
        parts = layers.chunk(len(self.layer_norms), dim=-1)
        return self.fuse(torch.cat([norm(p) for norm, p in zip(self.layer_norms, parts, strict=True)], dim=-1))

    def forward(
        self,
        feats: torch.Tensor,
        embeds: torch.Tensor,
        positions: torch.Tensor,
        cache: Any = None,
        mask: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """feats (a fused g or the head's own a) and embeds [B, T, h] → the head's hidden a [B, T, h]."""
        return super().forward(self.feat_norm(feats), self.embed_norm(embeds), positions, cache, mask)

    def readout(self, out: torch.Tensor) -> torch.Tensor:
        """What the LM-head rows read: the head's final norm of its hidden a."""
        return self.norm(out)


def new_head(
    hf_config: Any,
    target: str = "",
    draft_ids: torch.Tensor | None = None,
    layers: tuple[int, ...] | None = None,
    seed: int = 0,
) -> Eagle3Head:
    """A freshly initialised EAGLE-3 head for a target (norm weights 1, linears drawn from `seed`)."""
    n = 0 if draft_ids is None else int(draft_ids.numel())
    head = Eagle3Head(Eagle3Config.for_target(hf_config, target, n, layers), draft_ids)
    init_linears(head, torch.Generator().manual_seed(seed))
    return head.float()


def save_head(
    head: Eagle3Head, out_dir: str | Path, dtype: torch.dtype = torch.bfloat16, manifest: dict | None = None
) -> Path:
    """Write model.safetensors (half precision by default), config.json and the manifest when given; return it."""
    return save_eagle_head(head, out_dir, dtype, manifest)


def read_config(folder: str | Path) -> Eagle3Config:
    """Parse a head's config.json; HeadError on a missing, corrupt or foreign file."""
    specs = {**SPECS, "layers": [Between("int", 0, 1023), 16]}
    missing = f"No EAGLE-3 head in {Path(folder)}; train one with: {TRAIN_HINT}"
    cfg = store.config(folder, Eagle3Config, specs, KIND, missing, check_shape)
    if len(cfg.layers) != 3:
        raise HeadError(f"{Path(folder) / CONFIG} names {len(cfg.layers)} fused layers, not 3; {KIND.hint}")
    return cfg


def check_fits(cfg: Any, hf_config: Any, folder: str | Path, kind: Kind = KIND) -> None:
    """HeadError unless the head (EAGLE-3's, or another `kind` reading fused layers: DFlash's drafter) was made for a
    model of this width, vocabulary and depth."""
    want = HeadConfig.from_target(hf_config)
    n_layers = int(hf_config.num_hidden_layers)
    if (want.hidden_size, want.vocab_size) != (cfg.hidden_size, cfg.vocab_size) or max(cfg.layers) >= n_layers:
        raise HeadError(
            f"The {kind.name.split(' ', 1)[1]} in {folder} was trained for another model (hidden {cfg.hidden_size}, "
            f"vocab {cfg.vocab_size}, layers {cfg.layers}); {kind.hint}"
        )


def load_head(
    folder: str | Path = DEFAULT_DIR, hf_config: Any = None, dtype: torch.dtype = torch.float32
) -> Eagle3Head:
    """Load a saved head (checked against `hf_config` when given); HeadError with one sentence on failure."""
    cfg = read_config(folder)
    if hf_config is not None:
        check_fits(cfg, hf_config, folder)
    return load_weights(folder, cfg, Eagle3Head, KIND, dtype)


def cached_head(lm: LoadedModel, folder: str | Path | None = None) -> Eagle3Head:
    """The trained head in `folder` for `lm`, loaded once per (folder, file time) and kept in `lm.resources`."""
    return store.cached(lm, "eagle3.head", folder, DEFAULT_DIR, load_head)


def warm_start(head: Eagle3Head, folder: str | Path) -> list[str]:
    """Copy an EAGLE-2 head's fc and decoder layer into a fresh EAGLE-3 head (the same shapes): a starting point
    for training on little data. The fusing layer, the norms and the draft vocabulary stay the EAGLE-3 head's
    own. Returns the copied names; HeadError when the folder holds no readable head."""
    from safetensors.torch import load_file

    path = Path(folder) / WEIGHTS
    try:
        state = load_file(str(path))
    except Exception as exc:  # missing or corrupt: one clear sentence
        raise HeadError(f"Cannot read the EAGLE-2 head {path} to start from ({exc}).") from exc
    own = head.state_dict()
    picked = {
        k: v for k, v in state.items() if k.startswith(("fc.", "layer.")) and k in own and own[k].shape == v.shape
    }
    head.load_state_dict({**own, **{k: v.to(own[k].dtype) for k, v in picked.items()}})
    return sorted(picked)


class Eagle3Drafter(Drafter):
    """The EAGLE drafter for an Eagle3Head: true features arrive as the target's layer inputs [m, 3h], fused into g
    (Eagle3Head.fuse_layers) before they enter its KV cache; drafts are read through the head's final norm."""

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


def head_for(lm: LoadedModel, folder: str, head: Eagle3Head | None) -> Eagle3Head:
    """The head given, else the one in `folder` (a Config's `head`; "" the default), loaded once per (model, folder,
    file time); "random": untrained; ConfigError, with the reason, when none can be loaded."""
    if head is not None:
        return head
    if folder == "random":
        return new_head(lm.hf.config, lm.name, seed=0).to(lm.device).eval()
    try:
        return cached_head(lm, Path(folder) if folder else DEFAULT_DIR)
    except HeadError as exc:
        raise ConfigError(str(exc)) from None
