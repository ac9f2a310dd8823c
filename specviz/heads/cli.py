"""`python -m specviz train|calibrate <head> …`: build distillation data, train heads, measure rank accuracy."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from specviz.paths import cache_root

HEADS = ("medusa", "eagle")


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so bad input becomes one line and exit code 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise ValueError(message)


def _fail(message: str) -> int:
    print(f"specviz: error: {message}", file=sys.stderr)
    return 2


def train(head: str, argv: list[str]) -> int:
    """Dispatch `train <head>`; returns an exit code."""
    if head == "eagle":
        from specviz.heads import eagle_train

        return eagle_train.main(argv)
    if head != "medusa":
        return _fail(f"Unknown head {head!r}; choose from {', '.join(HEADS)}.")
    return _guard(train_medusa, argv)


def calibrate(head: str, argv: list[str]) -> int:
    """Dispatch `calibrate <head>`; returns an exit code."""
    if head == "eagle":
        from specviz.heads import eagle_replay

        return _guard(sweep_eagle if "--live" in argv else eagle_replay.calibrate_main, argv)
    if head != "medusa":
        return _fail(f"Unknown head {head!r}; choose from {', '.join(HEADS)}.")
    return _guard(sweep_medusa if "--sweep" in argv else calibrate_medusa, argv)


def _guard(fn, argv: list[str]) -> int:
    """Run a command; known failures become one line on stderr and exit code 2."""
    from specviz.heads.distill import DataError
    from specviz.model import ModelError

    try:
        return fn(argv)
    except (ValueError, DataError, ModelError, OSError) as exc:
        return _fail(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)


def _medusa_parser(prog: str) -> _Parser:
    ap = _Parser(prog=prog)
    ap.add_argument("--data-dir", type=Path, default=None, help="distillation shards (default: cache)")
    ap.add_argument("--out", type=Path, default=None, help="heads folder (default: models/medusa)")
    ap.add_argument("--ranks", type=int, default=10, help="ranks per head in the calibration table")
    return ap


def _train_medusa_args(argv: list[str]) -> argparse.Namespace:
    """`train medusa`'s options, checked (ValueError with one sentence when unusable)."""
    from specviz.heads import medusa_train

    ap = _medusa_parser("python -m specviz train medusa")
    ap.add_argument("--prompts", type=int, default=1280, help="ShareGPT prompts to distil")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=32, help="prompts per generation batch")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--draft-vocab", type=int, default=8192)
    ap.add_argument("--layers", type=int, default=2, help="ResBlocks per head")
    ap.add_argument("--epochs", type=float, default=1.5)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument(
        "--soft",
        type=float,
        default=medusa_train.TrainConfig.soft,
        help="weight of the model's own distribution as the target, against its greedy token (0-1)",
    )
    ap.add_argument("--minutes", type=float, default=0.0, help="stop training after this long (0 = no limit)")
    ap.add_argument("--checkpoint", type=Path, default=None, help="resumable checkpoint folder")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (1 is faster on a busy machine)")
    a = ap.parse_args(argv)
    if a.threads < 1:
        raise ValueError(f"--threads must be at least 1, got {a.threads}.")
    if a.heads < 1 or a.draft_vocab < 16 or a.prompts < 1 or a.epochs <= 0:
        raise ValueError("heads, prompts and epochs must be positive and draft-vocab at least 16.")
    if not 0 <= a.soft <= 1:
        raise ValueError(f"--soft must be between 0 and 1, got {a.soft}.")
    return a


def train_medusa(argv: list[str]) -> int:
    """Build (or extend) the distillation set, train Medusa-1 heads, then calibrate them."""
    from tqdm import tqdm

    from specviz.heads import distill, medusa, medusa_train
    from specviz.model import load_model

    a = _train_medusa_args(argv)
    import torch

    torch.set_num_threads(a.threads)
    lm = load_model("default", device="cpu", dtype="fp32")
    bar = tqdm(total=(a.prompts + a.batch_size - 1) // a.batch_size, unit="shard", desc="distil")

    def shard_done(done: int, _total: int, _note: str) -> None:
        bar.update(done - bar.n)

    data = distill.build_dataset(lm, a.prompts, a.max_new_tokens, a.batch_size, a.data_dir, shard_done)
    bar.close()
    cfg = medusa.HeadsConfig(
        num_heads=a.heads,
        hidden_size=int(lm.hf.config.hidden_size),
        layers=a.layers,
        draft_vocab=a.draft_vocab,
        model=lm.name,
    )
    tc = medusa_train.TrainConfig(epochs=a.epochs, lr=a.lr, minutes=a.minutes, soft=a.soft)
    ckpt = a.checkpoint or (cache_root() / "medusa-checkpoint")
    tbar = tqdm(unit="step", desc="train")

    def tick(step: int, total: int, loss: float) -> None:
        tbar.total = total
        tbar.n = step
        if step % 10 == 0 or step == total:
            tbar.set_postfix(loss=f"{loss:.3f}")
            tbar.refresh()

    t0 = time.monotonic()
    heads = medusa_train.train_heads(lm, distill.load_dataset(data, "train"), cfg, tc, ckpt, tick)
    tbar.close()
    out = a.out or medusa.models_dir()
    run = json.loads((ckpt / "progress.json").read_text())  # positions, steps, batch, lr of this run
    kept = ("positions", "total_steps", "batch", "lr", "soft")
    medusa.save_heads(
        heads,
        out,
        {
            "train_minutes": round((time.monotonic() - t0) / 60, 1),
            "epochs": a.epochs,
            **{k: run[k] for k in kept if k in run},
        },
        dtype=torch.bfloat16,
    )
    print(f"saved heads to {out} ({(out / medusa.WEIGHTS_FILE).stat().st_size / 1e6:.1f} MB)")
    return calibrate_medusa([*_passthrough(a), "--heads-dir", str(out)])


def _passthrough(a: argparse.Namespace) -> list[str]:
    return (["--data-dir", str(a.data_dir)] if a.data_dir else []) + ["--ranks", str(a.ranks)]


def calibrate_medusa(argv: list[str]) -> int:
    """Measure a_k^(i) on the held-out shards and write calibration.json beside the heads."""
    from specviz.heads import distill, medusa, medusa_train
    from specviz.model import load_model

    ap = _medusa_parser("python -m specviz calibrate medusa")
    ap.add_argument("--heads-dir", type=Path, default=None, help="heads to calibrate (default: models/medusa)")
    a = ap.parse_args(argv)
    if not 1 <= a.ranks <= 64:
        raise ValueError(f"--ranks must be between 1 and 64, got {a.ranks}.")
    lm = load_model("default", device="cpu", dtype="fp32")
    folder = a.heads_dir or a.out or medusa.models_dir()
    heads = medusa.load_heads(lm, folder)
    acc, n = medusa_train.rank_accuracy(heads, distill.load_dataset(a.data_dir, "heldout"), a.ranks)
    path = medusa_train.write_calibration(folder, acc, n, "held-out self-distilled ShareGPT continuations")
    print(f"wrote {path} from {n} held-out positions")
    for k, row in enumerate(acc, start=1):
        print(f"head {k}: " + "  ".join(f"r{i + 1} {v:.3f}" for i, v in enumerate(row[:5])))
    return 0


SWEEP_BUDGETS = [0, 2, 4, 6, 8, 10, 12, 16, 24, 32, 48, 64]


def sweep_medusa(argv: list[str]) -> int:
    """Measure A, draft and verify cost against the budget on unseen ShareGPT prompts → sweep.json."""
    import statistics

    from specviz.heads import distill, medusa
    from specviz.measure import provenance
    from specviz.methods import autoregressive
    from specviz.methods import medusa as method
    from specviz.model import load_model
    from specviz.sampling import Sampling

    ap = _Parser(prog="python -m specviz calibrate medusa --sweep")
    ap.add_argument("--sweep", action="store_true")
    ap.add_argument("--heads-dir", type=Path, default=None)
    ap.add_argument("--prompts", type=int, default=4, help="unseen ShareGPT prompts to decode")
    ap.add_argument("--max-new-tokens", type=int, default=48)
    ap.add_argument("--budgets", default=",".join(map(str, SWEEP_BUDGETS)))
    a = ap.parse_args(argv)
    budgets = [int(b) for b in a.budgets.split(",")]
    folder = a.heads_dir or medusa.models_dir()
    lm = load_model("default", device="cpu", dtype="fp32")
    prompts = distill.training_prompts(8000)[-a.prompts :]  # far beyond any distilled prompt
    s = Sampling(max_new_tokens=a.max_new_tokens)
    rows: dict[int, list[dict]] = {b: [] for b in budgets}
    ar_ms: list[float] = []
    for p in prompts:
        ids = lm.encode_prompt(p)
        for b in budgets:  # interleave a plain run before every Medusa run: ratios, not absolute times
            ar = autoregressive.generate(lm, ids, s)
            tr = method.generate(lm, ids, s, method.Config(budget=b, heads_dir=str(folder)))
            ar_ms.append(1000 * ar.decode_s / max(1, len(ar.steps)))
            steps = [x for x in tr.steps if x.forward_tokens]
            rows[b].append(
                {
                    "A": tr.mean_accepted,
                    "speedup": ar.decode_s / max(tr.decode_s, 1e-9),
                    "draft": statistics.median(1000 * x.draft_s for x in steps),
                    "verify": statistics.median(1000 * x.verify_s for x in steps),
                }
            )
        print(f"prompt {len(rows[budgets[0]])}/{len(prompts)} done", flush=True)
    acc = medusa.load_calibration(folder)

    def med(b: int, key: str) -> float:
        return round(statistics.median(r[key] for r in rows[b]), 3)

    k = method.Config().heads
    out = {
        "budgets": budgets,
        "predicted": [round(1 + method.build_tree(acc, k, b)[1], 3) for b in budgets],
        "measured": [med(b, "A") for b in budgets],
        "speedup": [med(b, "speedup") for b in budgets],
        "draft_ms": [med(b, "draft") for b in budgets],
        "verify_ms": [med(b, "verify") for b in budgets],
        "ar_ms": round(statistics.median(ar_ms), 2),
        "prompts": len(prompts),
        "max_new_tokens": a.max_new_tokens,
        "head_ms": projection_costs(lm, folder),
        "note": f"Measured on {len(prompts)} unseen ShareGPT prompts × {a.max_new_tokens} tokens at T = 0, "
        f"{lm.describe()}; medians, each Medusa run interleaved with a plain run.",
        "provenance": provenance(lm.describe()).to_dict(),
    }
    (folder / "sweep.json").write_text(json.dumps(out, indent=1))
    print(json.dumps({k: out[k] for k in ("budgets", "measured", "speedup")}))
    return 0


def sweep_eagle(argv: list[str]) -> int:
    """Measure A, speedup and draft / verify cost of EAGLE tree shapes live → models/eagle/live_sweep.json."""
    from specviz import sweep
    from specviz.methods import eagle

    ap = _Parser(prog="python -m specviz calibrate eagle --live")
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
    a = ap.parse_args(argv)
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


def projection_costs(lm, folder: Path, repeats: int = 30) -> dict[str, float]:
    """Median ms of one drafting call for all heads: draft-vocabulary slice vs the full LM head."""
    import statistics

    import torch

    from specviz.heads import medusa

    sliced = medusa.load_heads(lm, folder)
    full = medusa.MedusaHeads(sliced.cfg, torch.arange(lm.lm_head.weight.shape[0]), lm.lm_head.weight.float())
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
