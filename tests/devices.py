"""The devices tests run on here (the CPU, and a GPU when there is one), and the tiny model on each in the dtype
and kernels production gives it there."""

from __future__ import annotations

import copy
import os
import threading
from dataclasses import replace

import torch

from specviz.core.kernels import can_pack, pack_linears
from specviz.core.lean import LeanLlama
from specviz.core.model import LoadedModel, Resources, pick_dtype

DEVICES = ["cpu", *(["cuda"] if torch.cuda.is_available() else [])]


def production(lm: LoadedModel, device: str) -> LoadedModel:
    """A copy of `lm` on `device` in the dtype load_model picks there by default (fp32 on every device), with the
    kernels it would get (oneDNN-prepacked linears on a CPU); its own lock and resources."""
    dev = torch.device(device)
    dtype = pick_dtype(dev)
    hf = copy.deepcopy(lm.hf).to(device=dev, dtype=dtype)
    kernels = "aten"
    lean = LeanLlama(hf, pack=can_pack(dev, dtype))  # as load_model: built before the prepacking drops the weights
    if can_pack(dev, dtype):
        pack_linears(hf)
        kernels = "onednn"
    out = replace(
        lm,
        hf=hf,
        device=dev,
        dtype=dtype,
        kernels=kernels,
        lock=threading.Lock(),
        resources=Resources(),
        lean=lean,
        graphs=None,
    )
    if dev.type == "cuda" and os.environ.get("SPECVIZ_GRAPHS", "0") == "1":  # as load_model: captured when asked
        from specviz.core.graphs import Graphs

        out.graphs = Graphs(out)
    return out
