"""The confidence budget's two measurements (issue 42, item 3), both live and greedy on unseen ShareGPT prompts,
never the Spec-Bench questions:

- `calibrate eagle --confidence` (or eagle3): a head's confidence table. The method decodes with a wide fixed tree;
  every kept drafted node whose parent lay on the accepted path was judged by the target, so its draft probability
  and whether it was accepted are one sample. Per tenth of draft probability, the share accepted, made
  non-decreasing (pool-adjacent-violators), is written into the head's config.json as `confidence`.
- `calibrate eagle --budget` (or eagle3): the budget's two floors swept against the fixed tree, each setting
  interleaved with plain decoding, into budget_sweep.json beside the head.

The two use disjoint prompts: the table's are the 48th to 17th last of 8000 shuffled ShareGPT first turns, the
sweep's the last 16 (sweep._unseen_prompts' convention: far past any prompt a head was distilled on).
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from specviz import methods
from specviz.core.cli_args import Parser
from specviz.core.details import EagleDetail
from specviz.core.measure import provenance
from specviz.core.model import LoadedModel, load_model
from specviz.core.sampling import Sampling
from specviz.core.trace import Trace
from specviz.corpus.sharegpt import training_prompts
from specviz.heads import store
from specviz.trees.draft_tree import CONFIDENCE_BINS
from specviz.tuning import sweep

FIT_SHAPE = {"depth": 4, "top_k": 4, "total_tokens": 16}  # a wide tree: many judged nodes per step
FLOORS = ((0.1, 0.2), (0.2, 0.3), (0.3, 0.5))  # (node_floor, depth_floor) pairs swept at each min_tokens


def fit_prompts(n: int = 32) -> list[str]:
    """The table's prompts: unseen ShareGPT first turns, disjoint from the sweep's."""
    return training_prompts(8000)[-16 - n : -16]


def sweep_prompts(n: int = 16) -> list[str]:
    """The floors' prompts: the last n of 8000 shuffled ShareGPT first turns."""
    return training_prompts(8000)[-n:]


def judged_nodes(traces: Iterable[Trace]) -> list[tuple[float, bool]]:
    """(draft probability, accepted) of every kept drafted node whose parent the target accepted (greedy traces)."""
    out = []
    for trace in traces:
        for step in trace.steps:
            d = getattr(step, "detail", None)
            if d is None or not getattr(d, "tree", None):
                continue
            t, on_path = d.tree, set(d.path)
            for i in range(1, len(t["tokens"])):
                if t["kept"][i] and t["parents"][i] in on_path:
                    out.append((float(t["conf"][i]), i in on_path))
    return out


def fit_table(samples: list[tuple[float, bool]], bins: int = CONFIDENCE_BINS) -> dict[str, list]:
    """Acceptance per bin of draft probability, non-decreasing (pool-adjacent-violators over the bins that hold
    samples; an empty bin takes its lower neighbour's value, the first ones the first filled bin's)."""
    n, hits = [0] * bins, [0] * bins
    for conf, ok in samples:
        b = min(int(conf * bins), bins - 1)
        n[b] += 1
        hits[b] += ok
    blocks: list[list[float]] = []  # [weight, mean, bins covered]
    for b in range(bins):
        if n[b]:
            blocks.append([n[b], hits[b] / n[b], 1])
            while len(blocks) > 1 and blocks[-2][1] > blocks[-1][1]:
                w2, m2, c2 = blocks.pop()
                w1, m1, c1 = blocks.pop()
                blocks.append([w1 + w2, (w1 * m1 + w2 * m2) / (w1 + w2), c1 + c2])
    filled = [m for _w, m, c in blocks for _ in range(int(c))]
    table, k = [], 0
    for b in range(bins):
        if n[b]:
            table.append(round(filled[k], 4))
            k += 1
        else:
            table.append(table[-1] if table else (round(filled[0], 4) if filled else 0.0))
    raw = [round(h / c, 4) if c else None for h, c in zip(hits, n, strict=True)]
    return {"table": table, "raw": raw, "counts": n}


def _config(kind: str, **kw: Any) -> Any:
    return methods.get(kind).Config(**kw)


def measure_table(lm: LoadedModel, kind: str, head: str, prompts: list[str], max_new_tokens: int) -> dict:
    """Decode the prompts greedily with the wide fixed tree; the fitted table and what it was fitted on."""
    cfg = _config(kind, head=head, **FIT_SHAPE)
    s = Sampling(max_new_tokens=max_new_tokens)
    traces = [methods.get(kind).generate(lm, lm.encode_prompt(p), s, cfg) for p in prompts]
    samples = judged_nodes(traces)
    return {**fit_table(samples), "nodes": len(samples), "shape": FIT_SHAPE, "prompts": len(prompts)}


def head_folder(kind: str, head: str) -> Path:
    """The head's folder: the one given, else its method's models folder (from its card)."""
    if head:
        return Path(head)
    models = methods.card(kind).models
    if models is None:
        raise ValueError(f"{kind} keeps no trained head; give --head.")
    return models


def write_table(folder: Path, fitted: dict, where: dict) -> Path:
    """The table into the head's config.json (its `confidence` field) and the fit's record beside it."""
    path = folder / store.CONFIG
    config = json.loads(path.read_text(encoding="utf-8"))
    store.write_json(path, {**config, "confidence": fitted["table"]})
    return store.write_json(folder / "confidence.json", {**fitted, "provenance": where})


def budget_configs(
    kind: str, head: str, floors: Iterable[tuple[float, float]], shape: dict, min_tokens: Iterable[int]
) -> list[Any]:
    """The fixed default first, then the budget over `shape` at each min_tokens × (node_floor, depth_floor)."""
    fixed = _config(kind, head=head)
    return [fixed] + [
        _config(kind, head=head, min_tokens=m, node_floor=nf, depth_floor=df, **shape)
        for m in min_tokens
        for nf, df in floors
    ]


def _label(c: Any) -> str:
    if not c.min_tokens:
        return f"fixed {c.depth}/{c.top_k}/{c.total_tokens}"
    return f"budget {c.min_tokens}..{c.total_tokens} d≤{c.depth} node≥{c.node_floor} depth≥{c.depth_floor}"


def measure_budget(
    lm: LoadedModel,
    kind: str,
    head: str,
    prompts: list[str],
    shape: dict,
    settings: tuple[Iterable[tuple[float, float]], Iterable[int]] = (FLOORS, (3, 5)),
    max_new_tokens: int = 64,
    repeats: int = 2,
) -> dict:
    """Speedup over plain decoding, A, mean nodes verified and rounds drafted per step, for the fixed default
    and each budget setting (settings: the (node_floor, depth_floor) pairs and the min_tokens values)."""
    cfgs = budget_configs(kind, head, settings[0], shape, settings[1])
    measured, _plain = sweep.interleaved(
        lm, prompts, cfgs, methods.get(kind).generate, max_new_tokens, repeats, print, _label
    )
    rows = []
    for c, m in zip(cfgs, measured, strict=True):
        steps = [s for t in m.traces for s in t.steps if s.forward_tokens]
        rows.append(
            {
                "setting": _label(c),
                "min_tokens": c.min_tokens,
                "node_floor": c.node_floor,
                "depth_floor": c.depth_floor,
                "depth": c.depth,
                "top_k": c.top_k,
                "total_tokens": c.total_tokens,
                "speedup": m.speedup,
                "A": m.A,
                "nodes": round(sum(s.forward_tokens for s in steps) / max(len(steps), 1), 2),
                "rounds": round(
                    sum(max(s.detail_as(EagleDetail).tree["expanded"]) for s in steps) / max(len(steps), 1), 2
                ),
                "identical": m.identical,
                "prompts": len(prompts),
            }
        )
    command = f"python -m specviz calibrate {kind} --budget"
    top = sweep.header(lm, command, "specviz.tuning.confidence.measure_budget", max_new_tokens, repeats, prompts)
    return {**top, "rows": rows, "best": max(rows, key=lambda r: r["speedup"])}


def _args(kind: str, argv: list[str]) -> argparse.Namespace:
    ap = Parser(prog=f"python -m specviz calibrate {kind} --confidence|--budget")
    ap.add_argument("--confidence", action="store_true", help="fit the head's confidence table")
    ap.add_argument("--budget", action="store_true", help="sweep the budget's floors against the fixed tree")
    ap.add_argument("--head", default="", help=f"head folder (default: models/{kind})")
    ap.add_argument("--prompts", type=int, default=0, help="unseen ShareGPT prompts (default: 32 fit, 16 sweep)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--min-tokens", default="3,5", help="the budget's floors of nodes, root included, comma-separated")
    ap.add_argument("--shape", default="4/4/10", help="the budget's ceiling: depth/top_k/total_tokens")
    ap.add_argument("--floors", default="", help="node_floor/depth_floor pairs, comma-separated")
    ap.add_argument("--out", type=Path, default=None, help="the sweep's file (default: budget_sweep.json by the head)")
    a = ap.parse_args(argv)
    if a.confidence == a.budget:
        raise ValueError("Say --confidence (fit the table) or --budget (sweep the floors).")
    if a.prompts < 0 or a.repeats < 1 or a.max_new_tokens < 2:
        raise ValueError("--prompts must be 0 or more, --repeats at least 1, --max-new-tokens at least 2.")
    return a


def _floors(text: str) -> tuple[tuple[float, float], ...]:
    if not text:
        return FLOORS
    try:
        return tuple((float(p.split("/")[0]), float(p.split("/")[1])) for p in text.split(","))
    except (ValueError, IndexError):
        raise ValueError(f"--floors must look like 0.1/0.3,0.2/0.4, got {text[:60]!r}.") from None


def calibrate_budget(kind: str, argv: list[str]) -> int:
    """`calibrate eagle|eagle3 --confidence|--budget`: fit the table into the head, or sweep the floors."""
    a = _args(kind, argv)
    folder = head_folder(kind, a.head)
    lm = load_model("default", device="cpu", dtype="fp32", progress=lambda _m: None)
    where = provenance(lm.describe()).to_dict() | {"load_average_after": [round(x, 2) for x in os.getloadavg()]}
    if a.confidence:
        prompts = fit_prompts(a.prompts or 32)
        fitted = measure_table(lm, kind, a.head, prompts, a.max_new_tokens)
        fitted["command"] = f"python -m specviz calibrate {kind} --confidence" + (f" --head {a.head}" if a.head else "")
        fitted["source"] = f"{len(prompts)} unseen ShareGPT first turns (the 48th to 17th last of 8000 shuffled)"
        path = write_table(folder, fitted, where)
        print(f"{fitted['nodes']} judged nodes; table {fitted['table']}; wrote {path} and the head's config.json")
        return 0
    try:
        d, k, n = (int(x) for x in a.shape.split("/"))
    except ValueError:
        raise ValueError(f"--shape must look like 4/4/10, got {a.shape[:40]!r}.") from None
    shape = {"depth": d, "top_k": k, "total_tokens": n}
    minima = tuple(int(x) for x in a.min_tokens.split(","))
    prompts = sweep_prompts(a.prompts or 16)
    out = measure_budget(lm, kind, a.head, prompts, shape, (_floors(a.floors), minima), a.max_new_tokens, a.repeats)
    out["source"] = f"the last {len(prompts)} of 8000 shuffled ShareGPT first turns (never used in training)"
    path = store.write_json(a.out or folder / "budget_sweep.json", out)
    for r in sorted(out["rows"], key=lambda r: -r["speedup"]):
        print(
            f"{r['setting']:48s} {r['speedup']:.3f}x  A {r['A']:.2f}  nodes {r['nodes']:.2f}  "
            f"rounds {r['rounds']:.2f}  identical {r['identical']}/{r['prompts']}"
        )
    print(f"wrote {path}")
    return 0
