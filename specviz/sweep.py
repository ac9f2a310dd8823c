"""Tuning sweeps: settings of one method timed against plain decoding, interleaved, as plain data.

The Lookahead and EAGLE defaults come from these sweeps (models/lookahead_sweep.json and
models/eagle/live_sweep.json); the pages draw them. Timings on a shared machine drift, so every
setting runs right after a plain run on the same prompt, and only ratios are kept: per prompt the
median plain time over the median setting time, then the median over prompts.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from specviz.model import LoadedModel
from specviz.sampling import Sampling
from specviz.trace import Trace

Generate = Callable[[LoadedModel, list[int], Sampling, Any], Trace]


@dataclass
class Measured:
    """One setting's result: speedup over plain decoding, A, and its first-repeat traces."""

    speedup: float
    A: float
    identical: int  # prompts whose greedy output equals plain decoding's (first repeat)
    traces: list[Trace] = field(default_factory=list)


def interleaved(lm: LoadedModel, prompts: list[str], configs: list[Any], generate: Generate,
                max_new_tokens: int = 48, repeats: int = 1, progress: Callable[[str], None] = print,
                describe: Callable[[Any], str] = str) -> tuple[list[Measured], list[Trace]]:
    """Time every config against plain decoding on every prompt; return per-config results and the plain traces."""
    from specviz.methods import autoregressive

    s = Sampling(max_new_tokens=max_new_tokens)
    encoded = [lm.encode_prompt(p) for p in prompts]
    secs = [[[] for _ in encoded] for _ in range(len(configs) + 1)]  # [setting][prompt] -> seconds; 0 = plain
    traces: list[list[Trace]] = [[] for _ in range(len(configs) + 1)]
    for rep in range(repeats):
        for p, ids in enumerate(encoded):
            progress(f"repeat {rep + 1}/{repeats}, prompt {p + 1}/{len(encoded)}")
            t = time.perf_counter()
            plain = autoregressive.generate(lm, ids, s)
            secs[0][p].append(time.perf_counter() - t)
            if rep == 0:
                traces[0].append(plain)
            for i, cfg in enumerate(configs):
                t = time.perf_counter()
                trace = generate(lm, ids, s, cfg)
                secs[i + 1][p].append(time.perf_counter() - t)
                if rep == 0:
                    traces[i + 1].append(trace)
                progress(f"  {describe(cfg)}: A={trace.mean_accepted:.2f}, "
                         f"{secs[0][p][-1] / secs[i + 1][p][-1]:.2f}x")
    med = [[statistics.median(x) for x in row] for row in secs]
    out = []
    for i in range(len(configs)):
        runs = traces[i + 1]
        new = sum(t.new_tokens for t in runs)
        steps = sum(len(t.steps) for t in runs)
        out.append(Measured(
            speedup=round(statistics.median(a / b for a, b in zip(med[0], med[i + 1], strict=True)), 4),
            A=round(new / max(1, steps), 4),
            identical=sum(t.output_ids == w.output_ids for t, w in zip(runs, traces[0], strict=True)),
            traces=runs))
    return out, traces[0]


def header(lm: LoadedModel, command: str, function: str, max_new_tokens: int, repeats: int,
           prompts: list[str]) -> dict[str, Any]:
    """What every sweep file records about how and where it was measured."""
    return {"command": command, "function": function, "device": lm.describe(), "threads": torch.get_num_threads(),
            "load_average_after": [round(x, 2) for x in os.getloadavg()],
            "max_new_tokens": max_new_tokens, "repeats": repeats, "prompts": prompts}
