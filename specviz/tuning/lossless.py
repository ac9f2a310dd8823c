"""The losslessness lab: sample one draft-and-decide step N times per rule and compare with the target p.

The model gives p and q on its own device; the lab's draws come from CPU generators, so its distributions (two
vectors over the vocabulary) move to the CPU first and the same seed gives the same counts on any device.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch
from scipy.stats import chi2 as chi2_dist

from specviz.core.acceptance import RULE_LABELS, RULES, keep_probs, residual, top_union, typical_threshold
from specviz.core.drafting import LayerDraft, as_full, parse_layers
from specviz.core.model import LoadedModel
from specviz.core.sampling import Sampling, target_probs
from specviz.heads.draft import cached_draft, parts

LAB_TEMPERATURE = 1.0  # the lab needs a real distribution; T = 0 is replaced by this


DRAFTS = ("perturbed", "layers", "trained")  # where the lab's draft q comes from (trained: models/draft)


def perturbed(p: torch.Tensor, strength: float = 1.0, seed: int = 0) -> torch.Tensor:
    """A plausible draft q [V]: p flattened and jittered in log space (a weaker model's guess)."""
    gen = torch.Generator().manual_seed(seed)
    noise = torch.randn(p.shape, generator=gen, dtype=torch.float64, device=gen.device).to(p.device)
    return torch.softmax(0.7 * p.double().clamp_min(1e-30).log() + strength * noise, dim=-1)


def context_dists(
    lm: LoadedModel,
    prompt_ids: list[int],
    temperature: float,
    layers: str = "0-3",
    top_p: float = 1.0,
    draft: str = "perturbed",
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Target p [V] and a draft q [V] (perturbed p, the first layers, or the trained draft model) for the token after
    the prompt."""
    s = Sampling(max_new_tokens=1, temperature=temperature or LAB_TEMPERATURE, top_p=top_p)
    logits, _ = lm.forward(prompt_ids, lm.new_cache(), logits_for=slice(-1, None))
    p = target_probs(logits[-1], s).double()
    if draft == "perturbed":
        return p, perturbed(p, seed=seed)
    if draft not in DRAFTS:
        raise ValueError(f"Unknown lab draft {draft!r}; choose one of {', '.join(DRAFTS)}.")
    if draft == "trained":  # heads.draft.DraftError (a RuntimeError) when models/draft is missing or corrupt
        layer_draft = LayerDraft(lm, [], 0, parts(cached_draft(lm)))
    else:
        layer_draft = LayerDraft(lm, parse_layers(layers, len(lm.hf.model.layers)), 0)
    q = as_full(target_probs(layer_draft.forward(prompt_ids), s), logits.shape[-1], layer_draft.ids)
    return p, q.double()


def accept_probs(rule: str, p: torch.Tensor, q: torch.Tensor, eps: float, delta: float) -> torch.Tensor:
    """Probability [V] that a drafted token x is kept, under each rule."""
    if rule == "speculative":
        return keep_probs(p, q)
    if rule == "typical":
        return (p > typical_threshold(p, eps, delta)).to(p.dtype)
    if rule == "flawed":
        return p / p.max()
    raise ValueError(f"Unknown rule {rule!r}; choose one of {', '.join(RULES)}.")


def fallback(rule: str, p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Where a rejected draft sends the next token [V]: the residual, or p itself (typical; the flawed rule's
    norm(p - p(x)·p) is p again)."""
    if rule == "speculative":
        return residual(p, q)
    return p  # typical resamples from p; norm(p - p(x)·p) is p again


def exact_output(rule: str, p: torch.Tensor, q: torch.Tensor, eps: float, delta: float) -> torch.Tensor:
    """The rule's output distribution [V], in closed form: q·a + (1 − Σ q·a)·fallback."""
    kept = q * accept_probs(rule, p, q, eps, delta)
    return kept + (1 - kept.sum()) * fallback(rule, p, q)


def sample_output(
    rule: str, p: torch.Tensor, q: torch.Tensor, n: int, gen: torch.Generator, eps: float, delta: float
) -> tuple[torch.Tensor, int]:
    """Counts [V] of the committed token over n independent draft-and-decide trials; also n accepted.

    `gen` is a CPU generator: the draws are made there, from p and q moved to the CPU."""
    p, q = p.cpu(), q.cpu()
    x = torch.multinomial(q.cpu(), n, replacement=True, generator=gen)  # [n] drafts
    u = torch.rand(n, generator=gen, dtype=torch.float64, device=gen.device)
    ok = u < accept_probs(rule, p, q, eps, delta)[x]
    rejected = int((~ok).sum())
    redraw = torch.multinomial(fallback(rule, p, q).cpu(), max(rejected, 1), replacement=True, generator=gen)
    redraw = redraw[:rejected]
    out = torch.cat([x[ok], redraw])
    return torch.bincount(out, minlength=p.shape[0]).double(), int(ok.sum())


def chi_square(counts: torch.Tensor, p: torch.Tensor, min_expected: float = 5.0) -> tuple[float, int, float]:
    """Pearson chi-square of counts [V] against p; tokens expected < min_expected are pooled into one bin."""
    n = float(counts.sum())
    expected = p * n
    big = expected >= min_expected
    obs = torch.cat([counts[big], counts[~big].sum().view(1)])
    exp = torch.cat([expected[big], expected[~big].sum().view(1)])
    keep = exp > 0
    stat = float(((obs[keep] - exp[keep]) ** 2 / exp[keep]).sum())
    dof = int(keep.sum()) - 1
    if bool((obs[~keep] > 0).any()):  # mass where p has none: impossible under p
        return math.inf, max(dof, 1), 0.0
    return stat, dof, float(chi2_dist.sf(stat, dof)) if dof > 0 else 1.0


def run_rule(
    rule: str, p: torch.Tensor, q: torch.Tensor, n: int, seed: int, eps: float = 0.09, delta: float = 0.3
) -> dict[str, Any]:
    """One rule's lab result as tensors (on the CPU) plus plain statistics."""
    p, q = p.cpu(), q.cpu()
    gen = torch.Generator().manual_seed(seed)
    counts, accepted = sample_output(rule, p, q, n, gen, eps, delta)
    emp = counts / n
    exact = exact_output(rule, p, q, eps, delta)
    stat, dof, pval = chi_square(counts, p)
    return {
        "rule": rule,
        "empirical": emp,
        "exact": exact,
        "n": n,
        "accept_rate": accepted / n,
        "tv": 0.5 * float((emp - p).abs().sum()),
        "tv_exact": 0.5 * float((exact - p).abs().sum()),
        "chi2": stat,
        "dof": dof,
        "p_value": pval,
    }


def _shown(r: dict[str, Any], ids: list[int]) -> dict[str, Any]:
    """One rule's result as plain data over the shown tokens `ids` (the rest pooled as `other`)."""
    return {
        "rule": r["rule"],
        "label": RULE_LABELS[r["rule"]],
        "empirical": _on(r["empirical"], ids),
        "exact": _on(r["exact"], ids),
        "other": round(1 - float(r["empirical"][ids].sum()), 6),
    } | {k: _finite(r[k]) for k in ("n", "accept_rate", "tv", "tv_exact", "chi2", "dof", "p_value")}


def _on(v: torch.Tensor, ids: list[int]) -> list[float]:
    """The entries of v [V] at ids, rounded."""
    return [round(float(v[i]), 6) for i in ids]


def lab_from_dists(
    p: torch.Tensor,
    q: torch.Tensor,
    n: int,
    seed: int = 0,
    eps: float = 0.09,
    delta: float = 0.3,
    top_k: int = 12,
    rules: tuple[str, ...] = RULES,
) -> dict[str, Any]:
    """Every rule's lab result over the most likely tokens of p and q, as plain data."""
    p, q = p.cpu(), q.cpu()
    ids = top_union([p, q], top_k)[: top_k + 4]
    out = [_shown(run_rule(rule, p, q, n, seed + i, eps, delta), ids) for i, rule in enumerate(rules)]
    return {
        "tokens": ids,
        "p": _on(p, ids),
        "q": _on(q, ids),
        "p_other": round(1 - float(p[ids].sum()), 6),
        "q_other": round(1 - float(q[ids].sum()), 6),
        "n": n,
        "eps": eps,
        "delta": delta,
        "rules": out,
    }


def _finite(v: float | int) -> float | int | None:
    """JSON-safe numbers: rounded floats, None for infinities."""
    if isinstance(v, int):
        return v
    return round(v, 6) if math.isfinite(v) else None


@dataclass(frozen=True)
class LabConfig:
    """One run of the lab: the context's temperature, the trials per rule, the typical rule's ε and δ, the draft."""

    temperature: float = 0.0  # of the target's p; 0 is replaced by LAB_TEMPERATURE (the lab needs a distribution)
    n: int = 20000  # draft-and-decide trials per rule
    seed: int = 0  # rule i draws from seed + i
    eps: float = 0.09  # typical acceptance: keep x when p(x) > min(eps, delta · exp(-H(p)))
    delta: float = 0.3
    layers: str = "0-3"  # the `layers` draft: these first layers of the target, as speculative sampling drafts
    top_k: int = 12  # tokens shown: the union of p's and q's top k (the rest pooled)
    draft: str = "perturbed"  # where q comes from, one of DRAFTS


def lab(lm: LoadedModel, prompt_ids: list[int], cfg: LabConfig) -> dict[str, Any]:
    """The losslessness lab on the real context: the target p vs each rule's committed-token distribution."""
    with lm.lock:  # the model is shared (the app's sessions): one run at a time
        p, q = context_dists(lm, prompt_ids, cfg.temperature, cfg.layers, draft=cfg.draft, seed=cfg.seed)
    result = lab_from_dists(p, q, cfg.n, cfg.seed, cfg.eps, cfg.delta, cfg.top_k)
    result["texts"] = [lm.token_text(t) for t in result["tokens"]]
    result["temperature"] = cfg.temperature or LAB_TEMPERATURE
    result["layers"], result["draft"] = cfg.layers, cfg.draft
    return result
