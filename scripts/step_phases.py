"""A step's phases per method, side by side with plain decoding: where r (a step's cost over a plain step) goes.

Each repeat runs every prompt through every method, interleaved, after a warm-up. Per method and repeat it sums the
traces' phase times (propose, verify, accept, commit) and the rest of each step's wall time ("between": choosing
the root, the phases' own bookkeeping, the outcome), over the steps that ran a forward; each is divided by plain
decoding's step time in the same repeat, so the phases of a method add up to its r. The medians over repeats are
reported with their range, the load average beside each repeat, and greedy identity against plain decoding.

    .venv/bin/python scripts/step_phases.py --prompts ../shared/data/spec_bench_question.jsonl --per-category 1 \
        --max-new-tokens 64 --repeats 3 --json out.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from types import SimpleNamespace

import torch

from specviz import methods
from specviz.core import measure
from specviz.core.model import load_model
from specviz.core.prompts import prepare, read_prompts, select
from specviz.core.sampling import Sampling
from specviz.methods import base
from specviz.tuning import probe

PARTS = ("propose", "verify", "accept", "commit", "between")


def step_parts(trace) -> dict[str, float]:
    """Seconds in each part over the steps that ran a forward, and how many such steps."""
    steps = [s for s in trace.steps if s.forward_tokens > 0]
    out: dict[str, float] = {p: sum(getattr(s, f"{p}_s") for s in steps) for p in PARTS[:4]}
    out["between"] = sum(s.wall_s for s in steps) - sum(out.values())
    out["steps"] = float(len(steps))
    return out


def one_repeat(lm, table: dict, encoded: list[list[int]], sampling: Sampling) -> dict:
    """Every prompt through every method, interleaved; per method its summed parts, steps and outputs."""
    sums: dict[str, dict[str, float]] = {n: dict.fromkeys((*PARTS, "steps"), 0.0) for n in table}
    outputs: dict[str, list[list[int]]] = {n: [] for n in table}
    load = [os.getloadavg()[0]]
    for ids in encoded:
        for name, (mod, cfg) in table.items():
            trace = mod.generate(lm, ids, sampling, cfg)
            for k, v in step_parts(trace).items():
                sums[name][k] += v
            outputs[name].append(trace.output_ids)
        load.append(os.getloadavg()[0])
    return {"sums": sums, "outputs": outputs, "load": [round(x, 2) for x in load]}


def ratios(rep: dict) -> dict[str, dict[str, float]]:
    """Each method's parts per step over plain decoding's step time in the same repeat (they add up to r)."""
    ar = rep["sums"]["ar"]
    ar_step = sum(ar[p] for p in PARTS) / max(1.0, ar["steps"])
    out = {}
    for name, s in rep["sums"].items():
        per = {p: s[p] / max(1.0, s["steps"]) / ar_step for p in PARTS}
        out[name] = {**per, "r": sum(per.values()), "ms_per_step": 1e3 * sum(s[p] for p in PARTS) / max(1, s["steps"])}
    return out


def summarise(reps: list[dict]) -> dict:
    """Medians over repeats with their range, per method and part."""
    per = [ratios(r) for r in reps]
    out = {}
    for name in per[0]:
        out[name] = {
            k: {
                "median": round(statistics.median(p[name][k] for p in per), 4),
                "low": round(min(p[name][k] for p in per), 4),
                "high": round(max(p[name][k] for p in per), 4),
            }
            for k in per[0][name]
        }
        out[name]["identical"] = sum(a == b for a, b in zip(reps[0]["outputs"]["ar"], reps[0]["outputs"][name]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--methods", default="pld,medusa,eagle,eagle3,hybrid")
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--per-category", type=int, default=1)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", default="")
    ap.add_argument("--clock", default="wall", choices=("wall", "cpu"), help="cpu: thread CPU time (--threads 1)")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.clock == "cpu":  # every phase and step timed in this thread's CPU time: time descheduled by other
        # work on the machine is left out (with one torch thread, all of a step's work runs on this thread)
        base.time = SimpleNamespace(perf_counter=time.thread_time)  # type: ignore[assignment]
    lm = load_model()
    names = ["ar"] + [n for n in args.methods.split(",") if n and n != "ar"]
    configs = probe.prepare(lm, {}, names)
    table = {n: (methods.get(n), configs.get(n) or methods.make_config(n)) for n in names}
    items = select(read_prompts(args.prompts), args.limit, args.per_category)
    encoded = [prepare(lm, it.text) for it in items]
    sampling = Sampling(max_new_tokens=args.max_new_tokens)
    one_repeat(lm, table, encoded[:1], Sampling(max_new_tokens=8))  # warm-up
    reps = []
    for i in range(args.repeats):
        t = time.perf_counter()
        reps.append(one_repeat(lm, table, encoded, sampling))
        print(f"repeat {i + 1}: {time.perf_counter() - t:.0f} s, load {reps[-1]['load']}", flush=True)
    summary = summarise(reps)
    print(f"{'method':<8}" + "".join(f"{p:>9}" for p in (*PARTS, "r")) + f"{'ms/step':>9}{'same':>6}")
    for name, s in summary.items():
        cells = "".join(f"{s[p]['median']:>9.3f}" for p in (*PARTS, "r"))
        print(f"{name:<8}{cells}{s['ms_per_step']['median']:>9.1f}{s['identical']:>4}/{len(items)}")
    record = {
        "what": "a step's parts over plain decoding's step time, interleaved (scripts/step_phases.py)",
        "prompts": args.prompts,
        "per_category": args.per_category,
        "n_prompts": len(items),
        "max_new_tokens": args.max_new_tokens,
        "repeats": args.repeats,
        "clock": args.clock,
        "threads": torch.get_num_threads(),
        "load": [r["load"] for r in reps],
        "provenance": measure.provenance(lm.describe()).to_dict(),
        "methods": summary,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1))


if __name__ == "__main__":
    main()
