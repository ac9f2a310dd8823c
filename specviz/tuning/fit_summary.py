"""The fit as plain data: what it chooses on a device (a lesson's pack keeps it; the size figure draws it), and
the device cost stored for a device a trace names."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from specviz.core.kernels import cpu_isa
from specviz.core.paths import cache_root
from specviz.tuning.fit import FAMILY, PAPER, VERSION, Candidate, DeviceCost, fit_method


def stored_cost(device: str) -> DeviceCost | None:
    """The cost stored for a device as `LoadedModel.describe()` names it (a trace's `device`), on this process's
    kernels; None where none is stored or it cannot be read."""
    safe = f"{device} {cpu_isa()}".replace(" · ", "_").replace("/", "_").replace(" ", "_")
    path = cache_root() / "fit" / f"{safe}.json"
    try:
        cost = DeviceCost.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return cost if cost.version == VERSION and cost.device == device else None


def summary(cost: DeviceCost) -> dict[str, Any]:
    """What the fit chooses on the device `cost` describes, as plain data (a lesson's pack keeps it): each method's
    fitted shape with its predicted A, r and speedup, the paper's shape priced there, the best shape per verified
    width, the device's curve and where a forward first costs twice one token's."""

    def priced(c: Candidate) -> dict[str, Any]:
        return {"forward_tokens": c.forward_tokens, "A": round(c.A, 4), "r": round(c.r, 4),
                "speedup": round(c.speedup, 4)}  # fmt: skip

    out = {}
    for name in PAPER:
        if name == "lookahead" or FAMILY[name] in cost.samples:
            f = fit_method(name, cost)
            widths = [[c.forward_tokens, round(c.A, 4), round(c.r, 4), round(c.speedup, 4)] for c in f.by_width]
            out[name] = priced(f.best) | {"fields": dict(f.best.fields), "widths": widths}
            out[name] |= {"paper": priced(f.paper)} if f.paper else {}
    rel = [m / cost.ms[0] for m in cost.ms]
    twice = next((i for i in range(1, len(rel)) if rel[i] >= 2), None)
    knee = (
        None
        if twice is None
        else round(float(np.interp(2, rel[twice - 1 : twice + 1], cost.ks[twice - 1 : twice + 1])), 1)
    )
    return {"device": cost.device, "ks": list(cost.ks), "ms": [round(m, 4) for m in cost.ms],
            "plain_ms": round(cost.plain_ms, 4), "knee": knee, "methods": out}  # fmt: skip
