"""Reading tensor values back on the host, once: on a GPU every read waits until each queued kernel has run, so a
step gathers what it needs to know into one read rather than one per number (`python -m specviz doctor --overhead`
counts them)."""

from __future__ import annotations

import torch


def fetch(*tensors: torch.Tensor) -> list[list[float]]:
    """The values of several small tensors in one host read: each flattened, as Python floats, in order (float64 on
    the way, so token ids up to 2^53 come back exact; `ints` turns such a list back)."""
    if not tensors:
        return []
    flat = torch.cat([t.detach().reshape(-1).to(torch.float64) for t in tensors])
    values = flat.tolist()
    out, i = [], 0
    for t in tensors:
        n = t.numel()
        out.append(values[i : i + n])
        i += n
    return out


def ints(values: list[float]) -> list[int]:
    """Fetched token ids or indices as ints."""
    return [int(v) for v in values]
