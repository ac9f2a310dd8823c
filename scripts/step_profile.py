"""Where a method's step goes, deterministically: cProfile over a few generations, per forward step.

Prints, for the functions with the most cumulative time (or calls), the calls per step and the share of the decode
time; the call counts do not depend on the machine's load, the shares do (read them as rough).

    .venv/bin/python scripts/step_profile.py --method eagle --prompts ../shared/data/spec_bench_question.jsonl
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats

import torch

from specviz import methods
from specviz.core.model import load_model
from specviz.core.prompts import prepare, read_prompts, select
from specviz.core.sampling import Sampling
from specviz.tuning import probe


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--method", default="eagle")
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--limit", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--sort", default="cumulative", choices=("cumulative", "tottime", "ncalls"))
    ap.add_argument("--filter", default="", help="only functions whose file path contains this")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    lm = load_model()
    mod = methods.get(args.method)
    cfg = probe.prepare(lm, {}, [args.method])[args.method]
    items = select(read_prompts(args.prompts), args.limit, 1)
    encoded = [prepare(lm, it.text) for it in items]
    sampling = Sampling(max_new_tokens=args.max_new_tokens)
    mod.generate(lm, encoded[0], Sampling(max_new_tokens=8), cfg)  # warm-up
    prof = cProfile.Profile()
    steps, decode = 0, 0.0
    for ids in encoded:
        prof.enable()
        trace = mod.generate(lm, ids, sampling, cfg)
        prof.disable()
        steps += sum(1 for s in trace.steps if s.forward_tokens > 0)
        decode += sum(s.wall_s for s in trace.steps)
    stats = pstats.Stats(prof)
    print(f"{args.method}: {steps} steps, {1e3 * decode / steps:.1f} ms/step, load {os.getloadavg()[0]:.2f}")
    rows = []
    for (file, line, fn), (_cc, nc, tt, ct, _) in stats.stats.items():  # type: ignore[attr-defined]
        if args.filter and args.filter not in file:
            continue
        rows.append((f"{file.split('site-packages/')[-1].split('/work/main/')[-1]}:{line}({fn})", nc, tt, ct))
    key = {"cumulative": 3, "tottime": 2, "ncalls": 1}[args.sort]
    rows.sort(key=lambda r: -r[key])
    print(f"{'calls/step':>10} {'own ms/step':>11} {'cum ms/step':>11}  function")
    for name, nc, tt, ct in rows[: args.top]:
        print(f"{nc / steps:>10.1f} {1e3 * tt / steps:>11.3f} {1e3 * ct / steps:>11.3f}  {name[:120]}")


if __name__ == "__main__":
    main()
