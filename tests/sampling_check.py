"""The statistical losslessness check every sampling tree method runs through its real `generate`."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import torch
from scipy.stats import chisquare

from specviz.core.sampling import Sampling, target_probs
from specviz.core.trace import Trace

PROMPT = "one two three one two three one two"


def second_token_follows_p(lm, run: Callable[[list[int], Sampling], Trace], n: int = 1500, t: float = 0.8) -> None:
    """At temperature t, the token after the most common first token is distributed as the target's p.

    The second token is drawn through the method's tree (a head's, the pool's or the residual's), so a
    biased acceptance rule shows here. A chi-square over the 6 likeliest tokens and the rest must not
    reject p (p-value > 1e-3), while the same test must reject a sample with 20% extra on one token (10% is
    within its power only some of the time at 1,500 runs).
    """
    ids = lm.encode_prompt(PROMPT)
    traces = [run(ids, Sampling(max_new_tokens=2, temperature=t, seed=i)) for i in range(n)]
    first = Counter(tr.output_ids[0] for tr in traces).most_common(1)[0][0]
    second = [tr.output_ids[1] for tr in traces if tr.output_ids[0] == first]
    with torch.no_grad():
        logits = lm.hf(torch.tensor([[*ids, first]], device=lm.device)).logits[0, -1].float().cpu()
    p = target_probs(logits, Sampling(temperature=t)).double()
    top = p.argsort(descending=True)[:6].tolist()
    observed = [sum(x == k for x in second) for k in top] + [sum(x not in top for x in second)]
    expected = [float(p[k]) * len(second) for k in top] + [float(1 - p[top].sum()) * len(second)]
    assert len(second) > 300 and chisquare(observed, expected).pvalue > 1e-3
    biased = observed[:]
    biased[0] += len(second) // 5
    assert chisquare(biased, [e * sum(biased) / sum(expected) for e in expected]).pvalue < 1e-3
