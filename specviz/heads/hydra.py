"""Hydra heads: like Medusa's, but head k also reads the tokens already drafted on its branch.

Medusa's head k predicts token t+1+k from h_t alone, so it never knows what heads 1..k-1 chose. Hydra's
head k (Ankner et al., 2024) reads z_k = [h_t, e(x_{t+1}), …, e(x_{t+k})]: the hidden state that produced
the pending token x_{t+1} (the tree's root) and the target's own embeddings of the branch's tokens, then
p^(k) = softmax(W_lm[vocab] · R(W_in^(k) z_k)), with R Medusa's ResBlocks. W_in starts as [I, 0, …, 0], so
every head starts as the model's own next-token predictor on h_t. The embedding and LM head are the
target's, frozen; only W_in and the ResBlocks are trained (and saved).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn

from specviz.core.model import LoadedModel
from specviz.core.paths import MODELS
from specviz.heads import store
from specviz.heads.files import Kind, stamp
from specviz.heads.medusa import CALIBRATION, SPECS, HeadsError, ResBlock, load_folder, project

WEIGHTS_FILE = "heads.safetensors"
CONFIG_FILE = "config.json"
CALIBRATION_FILE = "calibration.json"
FORMAT = "specviz-hydra/1"
KIND = Kind(FORMAT, "a Hydra heads", HeadsError, "retrain or restore it from git")


def models_dir() -> Path:
    """Where the committed, trained Hydra heads live (models/hydra in the repository)."""
    return MODELS / "hydra"


@dataclass(frozen=True)
class HydraConfig:
    """Shape of a set of Hydra heads."""

    num_heads: int = 4  # K: head k predicts token t+1+k from h_t and the k tokens x_{t+1..t+k}
    hidden_size: int = 576
    layers: int = 1  # ResBlocks per head after the input projection
    draft_vocab: int = 8192
    model: str = "smollm2-135m"
    format: str = FORMAT


class Head(nn.Module):
    """One Hydra head: W_in over [h, e_1..e_k], then ResBlocks."""

    def __init__(self, k: int, size: int, layers: int) -> None:
        super().__init__()
        self.inp = nn.Linear((k + 1) * size, size)
        with torch.no_grad():  # start as the identity on h: the model's own next-token predictor
            self.inp.weight.zero_()
            self.inp.weight[:, :size] = torch.eye(size)
            self.inp.bias.zero_()
        self.blocks = nn.Sequential(*(ResBlock(size) for _ in range(layers)))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """z [..., (k+1)H] → feature [..., H]."""
        return self.blocks(self.inp(z))


class HydraHeads(nn.Module):
    """K sequentially dependent heads; `vocab` maps draft rows to token ids, `proj` and `embed` are the target's."""

    vocab: torch.Tensor  # buffers, declared for the type checker
    proj: torch.Tensor
    embed: torch.Tensor

    def __init__(self, cfg: HydraConfig, vocab: torch.Tensor, lm_weight: torch.Tensor, embed: torch.Tensor) -> None:
        super().__init__()
        self.cfg = cfg
        self.heads = nn.ModuleList(Head(k, cfg.hidden_size, cfg.layers) for k in range(1, cfg.num_heads + 1))
        self.register_buffer("vocab", vocab.long(), persistent=False)
        self.register_buffer("proj", lm_weight[vocab.long()].detach().clone(), persistent=False)  # [Vd, H]
        self.register_buffer("embed", embed.detach(), persistent=False)  # [V, H], the target's input embedding
        self._packed: nn.Module | None = None  # inference-only oneDNN copy of proj (medusa.project)

    def head_logits(self, k: int, h: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        """Head k (1-based): h [B, H], branch token ids [B, k] (x_{t+1..t+k}) → draft logits [B, Vd]."""
        z = torch.cat([h.to(self.proj.dtype), self.embed[branch].flatten(1).to(self.proj.dtype)], dim=-1)
        return project(self, self.heads[k - 1](z))

    def forward(self, h: torch.Tensor, branch: torch.Tensor) -> torch.Tensor:
        """Training: h [B, H], the true tokens x_{t+1..t+K} [B, K] → draft logits of every head [B, K, Vd]."""
        return torch.stack([self.head_logits(k, h, branch[:, :k]) for k in range(1, len(self.heads) + 1)], dim=1)


def _target_weights(lm: LoadedModel) -> tuple[torch.Tensor, torch.Tensor]:
    """The target's LM-head weight and input embedding, fp32."""
    return lm.lm_head.get_parameter("weight").float(), lm.hf.get_input_embeddings().weight.float()


def new_heads(lm: LoadedModel, cfg: HydraConfig, vocab: torch.Tensor) -> HydraHeads:
    """Fresh heads (each starts as the model's next-token predictor on h_t) for a model."""
    return HydraHeads(cfg, vocab, *_target_weights(lm))


def save_heads(heads: HydraHeads, folder: Path, dtype: torch.dtype | None = None, manifest: dict | None = None) -> Path:
    """Weights (safetensors, cast to dtype if given), config (JSON) and the manifest when given, into folder."""
    weights = store.tensors(heads.heads.state_dict(), dtype, ids=("vocab", heads.vocab))
    return store.save(folder, (WEIGHTS_FILE, weights), FORMAT, asdict(heads.cfg), manifest)


def read_config(folder: Path) -> HydraConfig:
    """The HydraConfig stored beside the weights; HeadsError when missing or corrupt."""
    missing = f"No Hydra heads in {folder} ({CONFIG_FILE} missing); train them: python -m specviz train hydra"
    return store.config(folder, HydraConfig, SPECS, KIND, missing)


def load_heads(lm: LoadedModel, folder: Path | None = None, num_heads: int | None = None) -> HydraHeads:
    """Trained heads for lm (optionally only the first num_heads); HeadsError when unusable."""
    folder = Path(folder or models_dir())
    cfg = read_config(folder)
    return load_folder(lm, folder, cfg, KIND, lambda vocab: new_heads(lm, cfg, vocab), "heads", num_heads)


def cached_heads(lm: LoadedModel, folder: str | Path | None = None, num_heads: int | None = None) -> HydraHeads:
    """Trained heads for lm, loaded once per (folder, heads, file time) and kept in lm.resources."""
    folder = Path(folder or models_dir()).expanduser().resolve()
    version = stamp(folder / WEIGHTS_FILE)
    return lm.resources.get(("hydra.heads", str(folder), num_heads, version), lambda: load_heads(lm, folder, num_heads))


def load_calibration(folder: Path | None = None) -> list[list[float]]:
    """Rank accuracies a_k^(i) (head k, rank i, the branch's true tokens given) measured on held-out data."""
    return store.read_calibration(folder or models_dir(), KIND, CALIBRATION, "python -m specviz calibrate hydra")
