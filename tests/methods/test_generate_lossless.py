"""At T > 0 every registered method's real `generate` draws each output position from the target's distribution.

The model is a tiny Llama that says one of four words after anything, each with a chance that depends on the context,
so every method's drafts are often right and are accepted (asserted), and positions 2-4 are committed by the
acceptance rule (position 1 is the first root, drawn from p before any draft: the control). Each position's drawn
tokens are tested against the exact marginal (every prefix of the four words enumerated) by a chi-square at
ALPHA = 1e-3 over the four words (3 degrees of freedom; the model's other 508 ids carry < 1e-6 of the mass).

Power (tests.sampling_check.detectable_tv, checked by simulation below): a position whose distribution is off by a
total variation δ is caught with probability ≥ 90% whatever the direction of the shift once δ ≥ 0.208 at the fast
tier's 150 draws (the lossy rules below shift a drafted position by 0.27-0.50), δ ≥ 0.047 at the soak command's
3,000 (so a 5% shift is caught).

Excluded, because they are lossy by design and the app says so: Medusa's and Hydra's typical acceptance
(rule="typical": any token above an entropy threshold is kept, so the output leans toward the heads' picks)
and sps's rule="typical" and rule="flawed" (the lab's teaching rules). They are the negative controls: the same
test must reject each of them, from LOSSY_N = 150 draws (the fast tier's: 90% power from TV 0.208; they shift a
drafted position by 0.27-0.50).
"""

from __future__ import annotations

import copy
import threading
from dataclasses import replace

import numpy as np
import pytest
import torch
from scipy.stats import chi2

from specviz import methods
from specviz.core.model import Resources
from specviz.core.sampling import Sampling
from specviz.core.trace import Trace
from tests.conftest import make_tiny
from tests.sampling_check import Position, detectable_tv, exact_marginals, position_tests

ALPHA = 1e-3  # per position
FAST_N, SOAK_N = 150, 3000  # draws per method in the fast tier and in the soak command
LOSSY_N = FAST_N  # draws per lossy rule
POWER_TV = {FAST_N: 0.208, SOAK_N: 0.047}  # the δ each detects with probability ≥ 0.9 (the docstring's figures)
POSITIONS = 4  # new tokens per run; each one tested
T = 1.0
WORDS = [378, 392, 441, 511]  # " The", " we", " not", " all": inside the model's 512 ids
LIFT = [5.0, 4.95, 4.9, 4.85]  # each word's extra on dimension 0 of its embedding
LOSSY = [("sps", {"rule": "typical"}), ("sps", {"rule": "flawed"})] + [
    (m, {"rule": "typical"}) for m in ("medusa", "hydra")
]


@pytest.fixture(scope="module")
def lively(tokenizer):
    """The tiny model over the first 512 ids (fp32: ~7 ms a run) made to say one of WORDS after anything.

    Every embedding (tied to the LM head) gets 50 on dimension 0, so the hidden state points along it whatever the
    layers add, and the words LIFT more, so they share the mass (about 0.4 / 0.45 / 0.08 / 0.05, moving by ~0.1 with
    the context): the layers, attention and KV cache still decide each position's exact distribution.
    """
    lm = make_tiny(tokenizer, dtype=torch.float32, vocab=512)
    hf = copy.deepcopy(lm.hf)
    with torch.no_grad():
        weight = hf.get_input_embeddings().weight
        weight[:, 0] = 50.0
        for tok, lift in zip(WORDS, LIFT, strict=True):
            weight[tok, 0] += lift
    return replace(lm, hf=hf, name="tiny-lively", lock=threading.Lock(), resources=Resources())


@pytest.fixture(scope="module")
def marginals(lively) -> list[torch.Tensor]:
    return exact_marginals(lively, WORDS * 3, WORDS, POSITIONS, T)


def resources(name: str, lm, options: dict | None = None) -> dict:
    """The method's accepting_resources (else tiny_resources), its config changed by `options`."""
    module = methods.get(name)
    hook = getattr(module, "accepting_resources", None) or getattr(module, "tiny_resources", None)
    kw = hook(lm) if hook else {}
    if options:
        kw["config"] = replace(kw.get("config") or module.Config(), **options)
    return kw


def draws(lm, name: str, n: int, options: dict | None = None) -> list[Trace]:
    """n seeded runs of the method's generate at temperature T, POSITIONS new tokens each."""
    kw, module = resources(name, lm, options), methods.get(name)
    s = Sampling(max_new_tokens=POSITIONS, temperature=T)
    return [module.generate(lm, WORDS * 3, replace(s, seed=seed), **kw) for seed in range(n)]


def follows_p(lm, marginals, name: str, n: int) -> list[Position]:
    """Every position's chi-square for the method; its drafts must be accepted in some runs."""
    traces = draws(lm, name, n)
    assert all(len(tr.output_ids) == POSITIONS for tr in traces)
    if name != "ar":  # plain decoding drafts nothing
        accepted = sum(s.drafts_accepted for tr in traces for s in tr.steps)
        assert accepted > 0.1 * n, f"{name}: {accepted} drafted tokens accepted in {n} runs"
    return position_tests([tr.output_ids for tr in traces], marginals, WORDS)


@pytest.mark.parametrize("name", methods.available())
def test_every_position_follows_p(lively, marginals, name):
    rows = follows_p(lively, marginals, name, FAST_N)
    assert all(r.p_value > ALPHA for r in rows), rows


@pytest.mark.soak
@pytest.mark.parametrize("name", methods.available())
def test_every_position_follows_p_with_power_for_a_5_percent_shift(lively, marginals, name):
    rows = follows_p(lively, marginals, name, SOAK_N)
    assert all(r.p_value > ALPHA for r in rows), rows


@pytest.mark.parametrize(("name", "options"), LOSSY, ids=[f"{m}-{next(iter(o.values()))}" for m, o in LOSSY])
def test_the_lossy_rules_are_rejected(lively, marginals, name, options):
    """The excluded rules shift the output, and the same test sees it at some drafted position."""
    traces = draws(lively, name, LOSSY_N, options)
    rows = position_tests([tr.output_ids for tr in traces], marginals, WORDS)
    assert rows[0].p_value > ALPHA  # the first root is drawn from p before any rule acts
    assert min(r.p_value for r in rows[1:]) < ALPHA, rows


@pytest.mark.parametrize("n", sorted(POWER_TV))
def test_the_stated_power(n):
    """The docstring's δ is the computed one, and a shift of δ toward the worst direction is caught ≥ 90% of the time
    (10,000 simulated chi-squares of n multinomial draws; the noncentral chi-square is an approximation)."""
    tv = detectable_tv(n, len(WORDS), ALPHA)
    assert tv <= POWER_TV[n] < tv + 0.001  # stated rounded up
    p = np.array([0.5, 0.3, 0.12, 0.08])
    worst = p + tv * np.where(np.arange(4) == 0, 2.0, -2.0) * p  # d_i ∝ p_i, half the mass each way: λ = 4nδ²
    counts = np.random.default_rng(0).multinomial(n, worst, size=10_000)
    stats = ((counts - n * p) ** 2 / (n * p)).sum(axis=1)
    assert (stats > chi2.isf(ALPHA, len(WORDS) - 1)).mean() >= 0.88
