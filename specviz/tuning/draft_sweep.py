"""The trained speculative-sampling draft's γ sweep: each γ timed against plain decoding, interleaved (sweep's
rules), with the untrained layer prefix beside it, on held-out openings no corpus, feature or learning curve read;
written beside the draft (models/draft/gamma_sweep.json) by `python -m specviz calibrate draft`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specviz.core.model import LoadedModel, load_model
from specviz.core.paths import DRAFT_DIR
from specviz.corpus.sharegpt import heldout_prompts
from specviz.methods import sps
from specviz.tuning.sweep import Measured, _median, _per_step_ms, header, interleaved

SPS_PATH = DRAFT_DIR / "gamma_sweep.json"
SPS_COMMAND = "python -m specviz calibrate draft  # about 10 min on an idle 2-core machine"
SPS_GAMMAS = (1, 2, 3, 4, 5, 6)
HELDOUT_USED = 64  # the held-out openings the learning curves are measured on (training.heldout): not swept


def sweep_prompts(n: int) -> list[str]:
    """n opening turns of held-out conversations past the ones the learning curves use: no corpus, feature or head
    ever read them, and no curve was measured on them."""
    return heldout_prompts(HELDOUT_USED + n)[HELDOUT_USED:]


def _sps_row(c: sps.Config, m: Measured, prompts: int) -> dict[str, Any]:
    """One speculative-sampling setting's row of the γ sweep."""
    accepted = [x.drafts_accepted for t in m.traces for x in t.steps if x.proposed]
    proposed = [x.proposed for t in m.traces for x in t.steps if x.proposed]
    return {
        "draft": c.draft,
        "layers": c.layers if c.draft == "layers" else "",
        "gamma": c.gamma,
        "speedup": m.speedup,
        "A": m.A,
        "accept_rate": round(sum(accepted) / max(1, sum(proposed)), 4),
        "draft_ms": _per_step_ms(m, "propose_s"),
        "verify_ms": _per_step_ms(m, "verify_s"),
        "identical": m.identical,
        "prompts": prompts,
    }


def measure_sps(
    lm: LoadedModel,
    prompts: list[str],
    gammas: tuple[int, ...] = SPS_GAMMAS,
    untrained: str = "0-3",
    max_new_tokens: int = 48,
    repeats: int = 2,
    progress: Callable[[str], None] = print,
) -> dict:
    """Greedy speedup over `ar`, A and the share of drafts kept for the trained draft at each γ, and for the
    untrained layer prefix (`untrained` layers, at the page's γ) beside it; every setting interleaved with ar."""
    cfgs = [sps.Config(gamma=g, draft="trained") for g in gammas]
    cfgs += [sps.Config(gamma=sps.PREFIX_GAMMA, draft="layers", layers=untrained)] if untrained else []
    measured, plain = interleaved(
        lm,
        prompts,
        cfgs,
        sps.generate,
        max_new_tokens,
        repeats,
        progress,
        lambda c: f"{c.draft} γ={c.gamma}",
    )
    rows = [_sps_row(c, m, len(prompts)) for c, m in zip(cfgs, measured, strict=True)]
    trained = [r for r in rows if r["draft"] == "trained"]
    return {
        **header(lm, SPS_COMMAND, "specviz.tuning.sweep.measure_sps", max_new_tokens, repeats, prompts),
        "ar_ms_per_token": _median([1000 * t.s_per_token for t in plain]),
        "rows": rows,
        "best": max(trained, key=lambda r: r["speedup"]),
    }


def write_sps(path: Path | str = SPS_PATH, n_prompts: int = 8, **kw: Any) -> dict:
    """Measure the trained draft's γ sweep on held-out ShareGPT openings and write it beside the draft."""
    prompts = sweep_prompts(n_prompts)
    lm = load_model("default", device="cpu", dtype="fp32", progress=lambda _m: None)
    out = measure_sps(lm, prompts, **kw)
    out["source"] = (
        f"{n_prompts} opening turns of held-out ShareGPT conversations (i % 10 == 9) past the {HELDOUT_USED} the "
        "learning curves use: never in the corpus, the features or any curve"
    )
    out["note"] = (
        f"Measured on {n_prompts} held-out prompts × {out['max_new_tokens']} tokens at T = 0 on {out['device']}; "
        f"each γ interleaved with plain decoding, {out['repeats']} repeats, median ratios; load after "
        f"{out['load_average_after']}."
    )
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return out
