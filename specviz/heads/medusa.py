"""Medusa heads: K ResBlocks on the last hidden state, projected through the frozen LM head's rows.

Head k (1-based) reads h_t, the hidden state that produced the pending token t+1, and predicts token
t+1+k: p^(k) = softmax(W_lm[vocab] · (h + SiLU(W1^(k) h + b1^(k)))). W1 starts at zero, so every head
starts as the model's own next-token predictor. The projection is the shared, frozen LM head restricted
to a draft vocabulary (the most frequent continuation tokens), done for all heads in ONE matmul: on
2 CPU cores one drafting call for all 4 heads, prepacked for oneDNN, takes about 5.0 ms with the full
49,152-row head and 1.7 ms with the 8,192-row slice (head_ms in models/medusa/sweep.json).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from specviz.core.kernels import PackedLinear, can_pack
from specviz.core.model import LoadedModel, ModelError
from specviz.core.paths import MEDUSA_DIR
from specviz.core.schema import Between
from specviz.heads import store
from specviz.heads.files import MAX_VOCAB, Kind, ids_fit, read_weights, stamp

WEIGHTS_FILE = "heads.safetensors"
CONFIG_FILE = "config.json"
CALIBRATION_FILE = "calibration.json"
FORMAT = "specviz-medusa/1"


class HeadsError(ModelError):
    """Missing, corrupt or mismatched head files; the message says what to do."""


KIND = Kind(FORMAT, "a Medusa heads", HeadsError, "retrain or restore it from git")
SPECS = {  # the bounds of a heads config.json (Medusa's and Hydra's)
    "num_heads": Between("int", 1, 16),
    "hidden_size": Between("int", 1, 16384),
    "layers": Between("int", 1, 8),
    "draft_vocab": Between("int", 1, MAX_VOCAB),
}
CALIBRATION = [[Between("float", 0, 1), 256], 16]  # accuracy[head][rank]


def models_dir() -> Path:
    """Where the committed, trained Medusa heads live (models/medusa in the repository)."""
    return MEDUSA_DIR


@dataclass(frozen=True)
class HeadsConfig:
    """Shape of a set of Medusa heads."""

    num_heads: int = 4  # K: head k predicts the token k+1 places after the one h_t produced
    hidden_size: int = 576  # the target's hidden size
    layers: int = 1  # ResBlocks per head (Medusa uses 1)
    draft_vocab: int = 8192  # rows of the frozen LM head the heads project onto
    model: str = "smollm2-135m"  # the target the heads were trained on
    format: str = FORMAT


class ResBlock(nn.Module):
    """h + SiLU(W h + b), with W = 0 at start so the block is the identity."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(size, size)
        nn.init.zeros_(self.linear.weight)
        nn.init.zeros_(self.linear.bias)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """h [..., H] → h + SiLU(W h + b)."""
        return h + nn.functional.silu(self.linear(h))


class MedusaHeads(nn.Module):
    """K heads over one hidden state; `vocab` maps draft-vocabulary rows back to token ids."""

    vocab: torch.Tensor  # buffers, declared for the type checker
    proj: torch.Tensor

    def __init__(self, cfg: HeadsConfig, vocab: torch.Tensor, lm_weight: torch.Tensor) -> None:
        super().__init__()
        self.cfg = cfg
        self.blocks = nn.ModuleList(
            nn.Sequential(*(ResBlock(cfg.hidden_size) for _ in range(cfg.layers))) for _ in range(cfg.num_heads)
        )
        self.register_buffer("vocab", vocab.long(), persistent=False)  # [Vd] token ids
        # [Vd, H]: the frozen LM head's rows for the draft vocabulary (not saved: it is the model's)
        self.register_buffer("proj", lm_weight[vocab.long()].detach().clone(), persistent=False)
        self._packed: nn.Module | None = None  # inference-only oneDNN copy of proj, made on first topk

    def _project(self, feats: torch.Tensor) -> torch.Tensor:
        """feats [..., H] → draft logits [..., Vd] (see project)."""
        return project(self, feats)

    def features(self, h: torch.Tensor) -> torch.Tensor:
        """h [..., H] → per-head features [..., K, H]."""
        return torch.stack([blk(h) for blk in self.blocks], dim=-2)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        """Draft-vocabulary logits [..., K, Vd] for hidden states h [..., H], all heads in one matmul."""
        return self.features(h.to(self.proj.dtype)) @ self.proj.T

    @torch.inference_mode()
    def topk(self, h: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Top-k (token ids [K, k], probs [K, k]) of each head for one hidden state h [H]."""
        probs = torch.softmax(self._project(self.features(h.to(self.proj.dtype))).float(), dim=-1)  # [K, Vd]
        p, idx = probs.topk(k, dim=-1)
        return self.vocab[idx], p


def project(heads: Any, feats: torch.Tensor) -> torch.Tensor:
    """feats [..., H] → draft logits [..., Vd] through `heads.proj`; at inference on a CPU, through a weight
    prepacked for oneDNN on first use and kept in `heads._packed` (Medusa's heads, Hydra's).

    `feats @ proj.T` in fp32 takes about 2.3 ms for the 4 head rows on 2 cores; the same product with the
    weight prepacked (as the target's own linears are) takes about 0.25 ms. A training module is never packed.
    """
    proj: torch.Tensor = heads.proj
    if heads._packed is None and not heads.training and can_pack(proj.device, proj.dtype):
        lin = nn.Linear(proj.shape[1], proj.shape[0], bias=False, device="meta", dtype=proj.dtype)  # no init
        lin.weight = nn.Parameter(proj, requires_grad=False)
        heads._packed = PackedLinear(lin, keep_weight=False)
    return feats @ proj.T if heads._packed is None else heads._packed(feats)


def frequent_tokens(ids: torch.Tensor, size: int, always: list[int]) -> torch.Tensor:
    """The `size` most frequent token ids in ids [N] (ties: lower id), `always` included; sorted."""
    counts = torch.bincount(ids.long(), minlength=int(ids.max()) + 1).double()
    counts[torch.tensor(always, dtype=torch.long)] = float("inf")
    order = torch.argsort(-counts, stable=True)[:size]
    return order.sort().values


def new_heads(lm: LoadedModel, cfg: HeadsConfig, vocab: torch.Tensor) -> MedusaHeads:
    """Fresh heads (W1 = 0: each head predicts the next token) over the model's frozen LM head."""
    return MedusaHeads(cfg, vocab, lm.lm_head.get_parameter("weight").float())


def save_heads(
    heads: MedusaHeads, folder: Path, dtype: torch.dtype | None = None, manifest: dict | None = None
) -> Path:
    """Write weights (safetensors, cast to dtype if given), config (JSON) and the manifest when given, into folder.

    Checkpoints keep fp32 so a resumed run is exact; the committed heads are stored in bf16 (half the
    size) and loaded back into fp32, and their calibration is measured on those rounded weights.
    """
    weights = store.tensors(heads.blocks.state_dict(), dtype, ids=("vocab", heads.vocab))
    return store.save(folder, (WEIGHTS_FILE, weights), FORMAT, asdict(heads.cfg), manifest)


def read_config(folder: Path) -> HeadsConfig:
    """The HeadsConfig stored beside the weights; HeadsError when missing, corrupt or foreign."""
    missing = f"No Medusa heads in {folder} ({CONFIG_FILE} missing); train them with: python -m specviz train medusa"
    return store.config(folder, HeadsConfig, SPECS, KIND, missing)


def vocab_map(state: dict[str, torch.Tensor], draft_vocab: int, lm: LoadedModel, path: Path) -> torch.Tensor:
    """The stored draft-vocabulary map (Medusa's, Hydra's): draft_vocab token ids of the model; HeadsError."""
    vocab = state.pop("vocab", None)
    if not ids_fit(vocab, draft_vocab, int(lm.lm_head.get_parameter("weight").shape[0])):
        raise HeadsError(f"{path} has a vocabulary map that does not fit its config or the model; retrain the heads.")
    assert vocab is not None  # ids_fit said so
    return vocab.long()


def load_heads(lm: LoadedModel, folder: Path | None = None, num_heads: int | None = None) -> MedusaHeads:
    """Load trained heads for `lm` (optionally only the first num_heads); HeadsError when unusable."""
    folder = Path(folder or models_dir())
    cfg = read_config(folder)
    return load_folder(lm, folder, cfg, KIND, lambda vocab: new_heads(lm, cfg, vocab), "blocks", num_heads)


def load_folder(
    lm: LoadedModel, folder: Path, cfg: Any, kind: Kind, build: Callable, part: str, num_heads: int | None
) -> Any:
    """Heads of a checked config (Medusa's or Hydra's) built over their stored vocabulary map, the weights of
    their trained `part` loaded (fp32, whatever the stored dtype) and cut to num_heads; HeadsError when unusable."""
    if cfg.hidden_size != int(lm.hf.config.hidden_size):
        raise HeadsError(
            f"The heads in {folder} expect hidden size {cfg.hidden_size}, "
            f"but the model has {lm.hf.config.hidden_size}; they belong to {cfg.model}."
        )
    state = read_weights(folder / WEIGHTS_FILE, kind)
    heads = build(vocab_map(state, cfg.draft_vocab, lm, folder / WEIGHTS_FILE))
    store.load_state(getattr(heads, part), state, folder / WEIGHTS_FILE, kind)
    if num_heads is not None:
        if not 1 <= num_heads <= cfg.num_heads:
            raise HeadsError(f"heads must be between 1 and {cfg.num_heads} for the heads in {folder}.")
        setattr(heads, part, getattr(heads, part)[:num_heads])
    return heads.to(lm.device).eval().requires_grad_(False)


def cached_heads(lm: LoadedModel, folder: str | Path | None = None, num_heads: int | None = None) -> MedusaHeads:
    """Trained heads for `lm`, loaded once per (folder, heads, file time) and kept in `lm.resources`."""
    folder = Path(folder or models_dir()).expanduser().resolve()
    version = stamp(folder / WEIGHTS_FILE)
    key = ("medusa.heads", str(folder), num_heads, version)
    return lm.resources.get(key, lambda: load_heads(lm, folder, num_heads))


def load_calibration(folder: Path | None = None) -> list[list[float]]:
    """Rank accuracies a_k^(i) (head k, rank i) measured on held-out data."""
    return store.read_calibration(folder or models_dir(), KIND, CALIBRATION, "python -m specviz calibrate medusa")
