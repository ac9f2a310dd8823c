"""Offline EAGLE replay: accepted length per tree shape without the target in the loop, and one step's
tree re-grown both ways for the EAGLE page.

`python -m specviz calibrate eagle` replays tree configs over held-out distilled sequences (the head runs
once over the true pairs; each tree's greedy acceptance is its longest kept path matching the stored
continuation), times a verify pass per tree size on this machine, and writes sweep.json beside the head.
"""

from __future__ import annotations

import itertools
import json
import statistics
import time
from pathlib import Path

import torch

from specviz.core.cli_args import Parser  # raises on bad input: the CLI prints one line and exits 2
from specviz.core.model import LoadedModel, crop_to, load_model
from specviz.core.prompts import check_ids
from specviz.core.trace import Trace, TraceError
from specviz.corpus.shards import Sequence, load_dataset
from specviz.heads.eagle import DEFAULT_DIR, EagleHead, load_head
from specviz.heads.eagle_drafter import Drafter, head_dtype
from specviz.methods.eagle import TREES, Config, get_head, grow_tree
from specviz.trees.draft_tree import DraftTree, grow, matched_path, static_paths, tree_detail
from specviz.trees.tree import TreeSpec


@torch.inference_mode()
def replay_sequence(
    head: EagleHead, lm: LoadedModel, s: Sequence, cfgs: list[Config], every: int = 4
) -> dict[str, list[float]]:
    """Offline EAGLE steps on one stored sequence: per config, tokens per step (A) and draft seconds.

    The head runs once over the true pairs; a tree rooted at x_N only sees pairs < N (the mask hides
    the rest), and its greedy acceptance is the longest kept path matching the stored continuation.
    """
    dr = Drafter(head, lm, next(head.parameters()).dtype)
    ids = s.ids.tolist()
    pairs, start = len(ids) - 1, int(s.mask.float().argmax())
    see = torch.ones(pairs, pairs, dtype=torch.bool, device=dr.device).tril()
    pos = torch.arange(pairs, device=dr.device)
    out, logp = dr.run(s.hidden[:-1].float(), ids[1:], pos, see)  # row j: pair (f_j, x_j+1)
    res: dict[str, list[float]] = {}
    for n in range(max(start, 1), pairs, every):
        for cfg in cfgs:
            t = time.perf_counter()
            tree = DraftTree(tokens=[ids[n]])
            tree.feats[0], tree.logps[0] = out[n - 1], logp[n - 1]
            grow(
                dr,
                tree,
                cfg,
                cfg.tree,
                static_paths(head.config.calibration, cfg) if cfg.tree == "static" else [],
                base=n,
            )
            took = time.perf_counter() - t
            dr.rollback(pairs)
            path = matched_path(tree, ids[n + 1 : n + 1 + cfg.depth])
            key = f"{cfg.tree}/{cfg.depth}/{cfg.top_k}/{cfg.total_tokens}"
            res.setdefault(key, []).append(len(path))
            res.setdefault(key + ":s", []).append(took)
    return res


def replay_accepted(
    head: EagleHead, lm: LoadedModel, seqs: list[Sequence], cfgs: list[Config], every: int = 4
) -> dict[str, dict]:
    """Mean offline A and median draft ms per tree config, over stored (held-out) sequences."""
    acc: dict[str, list[float]] = {}
    for s in seqs:
        for k, v in replay_sequence(head, lm, s, cfgs, every).items():
            acc.setdefault(k, []).extend(v)
    return {
        k: {
            "A": round(sum(v) / len(v), 4),
            "draft_ms": round(1000 * statistics.median(acc[k + ":s"]), 2),
            "steps": len(v),
        }
        for k, v in acc.items()
        if not k.endswith(":s")
    }


@torch.inference_mode()
def replay_trees(
    lm: LoadedModel, trace: Trace, step_index: int, config: Config | None = None, head: EagleHead | None = None
) -> dict[str, dict]:
    """Re-grow one step's tree both ways (static and dynamic) from the same context, as plain data.

    The context is the prompt plus the tokens committed before the step; both trees are matched
    against the continuation the run produced (their greedy acceptance at T = 0) under "accepted".
    """
    cfg = config or Config()
    if not 0 <= step_index < len(trace.steps) or not trace.steps[step_index].committed:
        raise TraceError(f"The trace has no step {step_index} that committed a token.")
    done = sum(len(s.committed) for s in trace.steps[:step_index])
    ids = list(trace.prompt_ids) + list(trace.output_ids[:done])
    check_ids(lm, [*ids, *trace.output_ids[done:]], room=cfg.depth + 1)  # before the model runs on any of them
    head = head or get_head(lm, cfg)
    root, cont = trace.output_ids[done], list(trace.output_ids[done + 1 : done + 1 + cfg.depth])
    with lm.lock:  # the model is shared (the app's sessions): one run at a time
        _, hidden = lm.forward(ids, lm.new_cache(), logits_for=slice(-1, None))
        out = {}
        for kind in TREES:
            dr = Drafter(head, lm, head_dtype(lm, cfg.head_dtype))
            dr.reset(ids, hidden)
            tree = DraftTree(tokens=[root])
            tree.feats[0], tree.logps[0] = dr.catch_up(hidden[-1], root)
            grow_tree(dr, tree, cfg, kind, static_paths(head.config.calibration, cfg) if kind == "static" else [])
            out[kind] = {**tree_detail(tree, lm.token_text, kind), "accepted": matched_path(tree, cont)}
    return out


@torch.inference_mode()
def verify_ms(lm: LoadedModel, sizes: list[int], repeats: int = 7, context: int = 160) -> dict[int, float]:
    """Median ms of one target forward over n tree nodes on a `context`-token cache, sizes interleaved."""
    cache = lm.new_cache()
    lm.forward(list(range(1000, 1000 + context)), cache)
    times: dict[int, list[float]] = {n: [] for n in sizes}
    for _ in range(repeats):
        for n in sizes:
            spec = TreeSpec(parents=[-1] + [(i - 1) // 4 for i in range(1, n)])  # a bushy 4-ary tree
            mask = None if n == 1 else spec.mask(lm.neg_inf(), lm.dtype)
            t = time.perf_counter()
            lm.forward(list(range(2000, 2000 + n)), cache, positions=spec.positions(context), mask=mask)
            times[n].append(1000 * (time.perf_counter() - t))
            crop_to(cache, context)
    return {n: round(statistics.median(v), 2) for n, v in times.items()}


def calibrate_main(argv: list[str] | None = None) -> int:
    """python -m specviz calibrate eagle: replay tree configs offline, time the verify pass, write sweep.json."""
    ap = Parser(prog="python -m specviz calibrate eagle", description=calibrate_main.__doc__)
    ap.add_argument("--head", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--sequences", type=int, default=24)
    ap.add_argument("--depths", default="4,5,6")
    ap.add_argument("--top-ks", default="4,8")
    ap.add_argument("--totals", default="8,12,16,24,32,48")
    args = ap.parse_args(argv)
    lm = load_model("default", device="cpu", dtype="fp32")
    head = load_head(args.head, lm.hf.config, torch.bfloat16)
    held = load_dataset(None, "heldout")[: args.sequences]
    ints = [[int(x) for x in a.split(",")] for a in (args.depths, args.top_ks, args.totals)]
    cfgs = [Config(depth=d, top_k=k, total_tokens=n) for d, k, n in itertools.product(*ints)]
    cfgs += [Config(depth=d, top_k=8, total_tokens=n, tree="static") for d, n in itertools.product(ints[0], ints[2])]
    rows = replay_accepted(head, lm, held, cfgs)
    cost = verify_ms(lm, [1, *ints[2]])
    for key, row in rows.items():
        n = int(key.split("/")[-1])
        row["verify_ms"], row["r"] = cost[n], round((cost[n] + row["draft_ms"]) / cost[1], 3)
        row["speedup"] = round(row["A"] / row["r"], 3)
    out = {
        "rows": rows,
        "ar_ms": cost[1],
        "verify_ms": cost,
        "sequences": len(held),
        "note": "A from offline greedy replay on held-out distilled sequences; r = (draft + verify) / one "
        "plain decoding forward, measured on the machine that ran this sweep (medians, interleaved).",
    }
    (args.head / "sweep.json").write_text(json.dumps(out, indent=1))
    for key, row in sorted(rows.items(), key=lambda kv: -kv[1]["speedup"])[:12]:
        print(
            f"{key:22s} A={row['A']:.2f} draft={row['draft_ms']:.1f}ms verify={row['verify_ms']:.0f}ms "
            f"r={row['r']:.2f} → {row['speedup']:.2f}×"
        )
    return 0
