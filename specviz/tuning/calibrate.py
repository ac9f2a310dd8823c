"""`python -m specviz calibrate <head> …`: the held-out tables (tuning.heldout_table), EAGLE's offline
replay (eagle_replay), and the live sweeps `calibrate medusa --sweep` and `calibrate eagle --live`: tree sizes
and shapes measured live against plain decoding on unseen ShareGPT prompts, written beside the heads."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from specviz import methods
from specviz.core.cli_args import Parser, fail, guard
from specviz.core.measure import provenance
from specviz.core.model import LoadedModel, load_model
from specviz.core.sampling import Sampling
from specviz.corpus.sharegpt import training_prompts
from specviz.heads import medusa
from specviz.methods import ar, eagle
from specviz.methods import medusa as method
from specviz.trees.head_tree import build_tree
from specviz.tuning import confidence, draft_sweep, eagle_replay, sweep
from specviz.tuning.heldout_table import HEADS, calibrate_heads

SWEEP_TOTAL_TOKENS = [1, 3, 5, 7, 9, 11, 13, 17, 25, 33, 49, 65]  # tree sizes, root included


def calibrate(head: str, argv: list[str]) -> int:
    """Dispatch `calibrate <kind>`: EAGLE's replay (or --live sweep), the draft's γ sweep, Medusa's --sweep, or the
    held-out rank table of any heads tree (each method whose card says held_out); returns an exit code."""
    tables = {c.head: c.name for c in methods.cards() if c.confidence}  # head kind -> its method
    if head in tables and ("--confidence" in argv or "--budget" in argv):
        return guard(lambda args: confidence.calibrate_budget(tables[head], args), argv)
    if head == "eagle":
        return guard(sweep_eagle if "--live" in argv else eagle_replay.calibrate_main, argv)
    if head == "draft":
        return guard(sweep_draft, argv)
    if head == "medusa" and "--sweep" in argv:
        return guard(sweep_medusa, argv)
    if head in [c.head for c in methods.cards() if c.held_out]:
        return guard(lambda args: calibrate_heads(head, args), argv)
    return fail(f"Unknown head {head!r}; choose from {', '.join(HEADS)}.")


def _sweep_medusa_args(argv: list[str]) -> argparse.Namespace:
    """`calibrate medusa --sweep`'s options."""
    ap = Parser(prog="python -m specviz calibrate medusa --sweep")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--heads-dir", type=Path, default=None)
    ap.add_argument("--prompts", type=int, default=4, help="unseen ShareGPT prompts to decode")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument(
        "--total-tokens",
        default=",".join(map(str, SWEEP_TOTAL_TOKENS)),
        help="tree sizes: tokens verified in one forward, root included, comma-separated",
    )
    return ap.parse_args(argv)


def sweep_sizes(a: argparse.Namespace) -> list[int]:
    """The tree sizes to sweep, as total_tokens (root included)."""
    return [int(n) for n in a.total_tokens.split(",")]


def medusa_runs(
    lm: LoadedModel, prompts: list[str], sizes: list[int], s: Sampling, folder: Path
) -> tuple[dict[int, list[dict]], list[float]]:
    """Per tree size (total_tokens), each prompt's A, speedup and median draft / verify ms; plain runs' ms per token."""
    rows: dict[int, list[dict]] = {n: [] for n in sizes}
    ar_ms: list[float] = []
    for p in prompts:
        ids = lm.encode_prompt(p)
        for n in sizes:  # interleave a plain run before every Medusa run: ratios, not absolute times
            plain = ar.generate(lm, ids, s)
            tr = method.generate(lm, ids, s, method.Config(total_tokens=n, heads_dir=str(folder)))
            ar_ms.append(1000 * plain.decode_s / max(1, len(plain.steps)))
            steps = [x for x in tr.steps if x.forward_tokens]
            rows[n].append(
                {
                    "A": tr.mean_accepted,
                    "speedup": plain.decode_s / max(tr.decode_s, 1e-9),
                    "draft": statistics.median(1000 * x.propose_s for x in steps),
                    "verify": statistics.median(1000 * x.verify_s for x in steps),
                }
            )
        print(f"prompt {len(rows[sizes[0]])}/{len(prompts)} done", flush=True)
    return rows, ar_ms


def sweep_medusa(argv: list[str]) -> int:
    """Measure A, draft and verify cost against the tree size on unseen ShareGPT prompts → sweep.json."""
    a = _sweep_medusa_args(argv)
    sizes = sweep_sizes(a)
    folder = a.heads_dir or medusa.models_dir()
    lm = load_model("default", device="cpu", dtype="fp32")
    prompts = training_prompts(8000)[-a.prompts :]  # far beyond any distilled prompt
    rows, ar_ms = medusa_runs(lm, prompts, sizes, Sampling(max_new_tokens=a.max_new_tokens), folder)
    acc = medusa.load_calibration(folder)

    def med(b: int, key: str) -> float:
        return round(statistics.median(r[key] for r in rows[b]), 3)

    k = method.Config().heads
    out = {
        "total_tokens": sizes,  # root included
        "predicted": [round(1 + build_tree(acc, k, n)[1], 3) for n in sizes],
        "measured": [med(n, "A") for n in sizes],
        "speedup": [med(n, "speedup") for n in sizes],
        "draft_ms": [med(n, "draft") for n in sizes],
        "verify_ms": [med(n, "verify") for n in sizes],
        "ar_ms": round(statistics.median(ar_ms), 2),
        "prompts": len(prompts),
        "max_new_tokens": a.max_new_tokens,
        "head_ms": projection_costs(lm, folder),
        "note": f"Measured on {len(prompts)} unseen ShareGPT prompts × {a.max_new_tokens} tokens at T = 0, "
        f"{lm.describe()}; medians, each Medusa run interleaved with a plain run.",
        "provenance": provenance(lm.describe()).to_dict(),
    }
    (folder / "sweep.json").write_text(json.dumps(out, indent=1))
    print(json.dumps({k: out[k] for k in ("total_tokens", "measured", "speedup")}))
    return 0


def _sweep_eagle_args(argv: list[str]) -> argparse.Namespace:
    """`calibrate eagle --live`'s options."""
    ap = Parser(prog="python -m specviz calibrate eagle --live")
    ap.add_argument("--live", action="store_true")
    ap.add_argument("--head", default="", help="head folder (default: models/eagle)")
    ap.add_argument("--prompts", type=int, default=8, help="unseen ShareGPT prompts to decode")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument(
        "--shapes",
        default=",".join("/".join(map(str, s)) for s in sweep.EAGLE_SHAPES),
        help="depth/top_k/total_tokens, comma-separated",
    )
    ap.add_argument("--out", type=Path, default=None, help="where to write (default: models/eagle/live_sweep.json)")
    return ap.parse_args(argv)


def eagle_shapes(a: argparse.Namespace) -> tuple[tuple[int, int, int], ...]:
    """The --shapes triples, checked with the run's other numbers (ValueError with one sentence)."""
    try:
        shapes = tuple(tuple(int(x) for x in s.split("/")) for s in a.shapes.split(","))
    except ValueError:
        raise ValueError(f"--shapes must look like 2/4/6,3/4/8, got {a.shapes!r}.") from None
    if any(len(s) != 3 for s in shapes) or a.prompts < 1 or a.repeats < 1 or a.max_new_tokens < 2:
        raise ValueError(
            "--shapes needs depth/top_k/total_tokens triples; --prompts and --repeats at least 1, "
            "--max-new-tokens at least 2."
        )
    for d, k, n in shapes:
        eagle.Config(depth=d, top_k=k, total_tokens=n)  # a ConfigError (a ValueError) names a bad shape
    return tuple((d, k, n) for d, k, n in shapes)


def sweep_eagle(argv: list[str]) -> int:
    """Measure A, speedup and draft / verify cost of EAGLE tree shapes live → models/eagle/live_sweep.json."""
    a = _sweep_eagle_args(argv)
    shapes = eagle_shapes(a)
    out = a.out or sweep.EAGLE_PATH
    res = sweep.write_eagle(
        out, a.prompts, shapes=shapes, max_new_tokens=a.max_new_tokens, repeats=a.repeats, head=a.head
    )
    for r in sorted(res["rows"], key=lambda r: -r["speedup"]):
        shape = f"{r['depth']}/{r['top_k']}/{r['total_tokens']}"
        print(
            f"{shape:8s} {r['speedup']:.3f}x  A {r['A']:.2f}  draft {r['draft_ms']:.1f} ms  "
            f"verify {r['verify_ms']:.1f} ms  identical {r['identical']}/{r['prompts']}"
        )
    print(f"wrote {out}")
    return 0


def sweep_draft(argv: list[str]) -> int:
    """`calibrate draft`: the trained draft's γ against plain decoding (and the untrained prefix beside it) on
    held-out prompts → models/draft/gamma_sweep.json."""
    ap = Parser(prog="python -m specviz calibrate draft")
    ap.add_argument("--prompts", type=int, default=8, help="held-out ShareGPT openings to decode")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--gammas", default=",".join(map(str, draft_sweep.SPS_GAMMAS)), help="γ values, comma-separated")
    ap.add_argument("--untrained", default="0-3", help="the layer-prefix draft measured beside it ('' for none)")
    ap.add_argument("--out", type=Path, default=None, help="where to write (default: models/draft/gamma_sweep.json)")
    a = ap.parse_args(argv)
    try:
        gammas = tuple(int(g) for g in a.gammas.split(","))
    except ValueError:
        raise ValueError(f"--gammas must look like 1,2,3,4, got {a.gammas!r}.") from None
    if not gammas or min(gammas) < 1 or max(gammas) > 16 or a.prompts < 1 or a.repeats < 1 or a.max_new_tokens < 2:
        raise ValueError("--gammas between 1 and 16; --prompts and --repeats at least 1, --max-new-tokens at least 2.")
    out = a.out or draft_sweep.SPS_PATH
    res = draft_sweep.write_sps(
        out, a.prompts, gammas=gammas, untrained=a.untrained, max_new_tokens=a.max_new_tokens, repeats=a.repeats
    )
    for r in res["rows"]:
        name = f"{r['draft']} {r['layers']}".strip()
        print(
            f"{name:14s} γ={r['gamma']}  {r['speedup']:.3f}x  A {r['A']:.2f}  kept {r['accept_rate']:.2f}  "
            f"draft {r['draft_ms']:.1f} ms  verify {r['verify_ms']:.1f} ms  identical {r['identical']}/{r['prompts']}"
        )
    print(f"wrote {out}")
    return 0


def projection_costs(lm: LoadedModel, folder: Path, repeats: int = 30) -> dict[str, float]:
    """Median ms of one drafting call for all heads: draft-vocabulary slice vs the full LM head."""
    sliced = medusa.load_heads(lm, folder)
    weight = lm.lm_head.get_parameter("weight")  # [V, H]
    full = medusa.MedusaHeads(sliced.cfg, torch.arange(weight.shape[0]), weight.float())
    full.blocks = sliced.blocks
    h = torch.randn(lm.hf.config.hidden_size)
    out = {}
    for name, heads in (("draft_vocab", sliced), ("full_vocab", full)):
        times = []
        for _ in range(repeats):
            t = time.perf_counter()
            heads.topk(h, 4)
            times.append(1000 * (time.perf_counter() - t))
        out[name] = round(statistics.median(times), 2)
    return out
