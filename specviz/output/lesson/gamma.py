"""The cost model tested on runs it did not see: speculative sampling's model fitted at the stop's γ alone
(viz.gamma.fit_at), predicting A and the decoding speedup A / r at other γ, which the recording then runs
(interleaved with plain decoding, after a warm-up) and compares. Drawn when the lesson is recorded."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from specviz.core.sampling import Sampling
from specviz.output.viz import gamma as viz

UNSEEN = (1, 2, 4, 6)  # the γ values run besides the stop's own


def test(lm: Any, group: Any, repeats: int = 3) -> dict[str, Any]:
    """The model fitted on the group's runs at its γ, and at each other γ its prediction beside runs made now."""
    from specviz.tuning.compare import interleaved_runs
    from specviz.tuning.probe import cached_curve

    cfg, base = group.configs["sps"], group.runs["ar"][0]
    gamma = int(cfg["gamma"] if isinstance(cfg, dict) else cfg.gamma)
    pairs = {gamma: list(zip(group.runs["ar"], group.runs["sps"], strict=False))}
    sampling = Sampling(**base.config["sampling"])
    for g in UNSEEN:
        one = cfg | {"gamma": g} if isinstance(cfg, dict) else replace(cfg, gamma=g)
        runs = interleaved_runs(lm, base.prompt_ids, {"sps": one}, sampling, repeats=repeats, prompt=base.prompt)
        pairs[g] = list(zip(runs["ar"], runs["sps"], strict=False))
    curve = cached_curve(lm)
    return viz.table(viz.fit_at(pairs[gamma], gamma), pairs, (curve.ks, curve.ms))


def functions(data: dict[str, Any]) -> dict[str, Any]:
    """gamma_test(what, γ): A_pred, A_meas, s_pred or s_meas at γ; at γ 0, A_err or s_err (the largest relative
    miss over the γ values the model did not see), alpha, c or fitted_gamma."""

    def read(what: str, g: int) -> float:
        if what in ("A_err", "s_err"):
            k = what[0]
            unseen = [i for i, (x, m) in enumerate(zip(data["gammas"], data[f"{k}_meas"], strict=True))
                      if x != data["fitted_gamma"] and m is not None]  # fmt: skip
            return round(max(abs(data[f"{k}_pred"][i] / data[f"{k}_meas"][i] - 1) for i in unseen), 4)
        if what in ("alpha", "c", "fitted_gamma"):
            return data[what]
        return data[what][data["gammas"].index(int(g))]

    return {"gamma_test": read}
