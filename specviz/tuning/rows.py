"""A bench that keeps what it measured: each finished (method, prompt, repeat) row is appended to a JSON-lines file
as it ends, and the summary is rebuilt from whatever rows exist. A run stopped at a time limit (a short GPU lease,
CI's clock) leaves every row it finished, and `summary` reads them as a complete run would.

Plain decoding runs first on each (prompt, repeat), then each method on the same prompt, so every method's row is
paired with a plain-decoding row measured just before it (core.measure's speedup, A and r on the pair).

`python -m specviz.tuning.rows --out rows.jsonl [--methods …] [--prompts file] [--max-new-tokens 64]
[--repeats 2] [--set eagle:depth=5,top_k=10,total_tokens=60 …]`; `--summary rows.jsonl` prints the table. A
variant's fields left unset are fitted to the device (tuning.fit); every row keeps the Config it ran and its step
split (draft, verify, the rest, prefill).
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from specviz import methods
from specviz.core.cli_args import Parser, count
from specviz.core.measure import decode_s, forward_steps, generation_s, mean_accepted, provenance, spread
from specviz.core.model import LoadedModel, ModelError, load_model
from specviz.core.prompts import read_prompts
from specviz.core.sampling import Sampling
from specviz.methods.base import plain_config
from specviz.tuning import fit


def variant(spec: str) -> tuple[str, str, dict[str, str]]:
    """'eagle:depth=5,top_k=10' → ('eagle@depth=5,top_k=10', 'eagle', {'depth': 5, 'top_k': 10}); 'medusa' → plain."""
    name, _, opts = spec.partition(":")
    options: dict[str, str] = {}
    for part in filter(None, opts.split(",")):
        key, _, value = part.partition("=")
        options[key.strip()] = value.strip()
    methods.make_config(name, options)  # an unknown method or option: ConfigError (a ValueError) now
    return (f"{name}@{opts}" if opts else name), name, options


def run_rows(
    lm: LoadedModel,
    specs: list[str],
    prompts: list[str],
    sampling: Sampling,
    repeats: int,
    out: Path,
    deadline: float = float("inf"),
    clock: Callable[[], float] = time.monotonic,
) -> int:
    """Append one JSON line per finished run to `out`; stop before a run would start past `deadline` (a `clock()`
    value). Returns the rows written."""
    parsed = [variant(s) for s in specs if s != "ar"]
    # each as it runs here: the fields a variant leaves unset fitted to this device (tuning.fit.measured)
    configs = {key: fit.measured(lm, methods.make_config(name, opts), name) for key, name, opts in parsed}
    written = 0
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("a", encoding="utf-8") as f:
        f.write(
            json.dumps({"provenance": provenance(lm.describe()).to_dict(), "max_new_tokens": sampling.max_new_tokens})
            + "\n"
        )
        for key, name in [("ar", "ar"), *((k, n) for k, n, _ in parsed)]:  # a warm-up: first calls pay one-off costs
            with lm.lock:
                methods.get(name).generate(
                    lm, lm.encode_prompt(prompts[0]), Sampling(max_new_tokens=4), configs.get(key)
                )
        for rep in range(repeats):
            for i, prompt in enumerate(prompts):
                ids = lm.encode_prompt(prompt)
                plain = None
                for key, name in [("ar", "ar"), *((k, n) for k, n, _ in parsed)]:
                    if clock() > deadline:
                        return written
                    with lm.lock:
                        trace = methods.get(name).generate(lm, ids, sampling, configs.get(key))
                    plain = trace if key == "ar" else plain
                    row = _row(key, i, rep, trace, plain, configs.get(key))
                    f.write(json.dumps(row) + "\n")
                    f.flush()
                    written += 1
    return written


def _row(key: str, prompt: int, rep: int, trace: Any, plain: Any, config: Any) -> dict[str, Any]:
    """One finished run as a row: its times, forwards, A, identity with plain decoding's, step split and Config."""
    return {
        "method": key,
        "prompt": prompt,
        "repeat": rep,
        "tokens": len(trace.output_ids),
        "generation_s": round(generation_s(trace), 6),
        "decode_s": round(decode_s(trace), 6),
        "forwards": forward_steps(trace),
        "A": round(mean_accepted(trace), 4),
        "identical": plain is not None and trace.output_ids == plain.output_ids,
        **step_split(trace),
        "config": plain_config(config),
    }


def step_split(trace: Any) -> dict[str, float]:
    """A run's step split: the mean milliseconds a step spends drafting, in the target's forward, and on the rest
    (acceptance, commit, bookkeeping), over the steps that ran a forward; and its prefill (the head's included)."""
    steps = [s for s in trace.steps if s.forward_tokens > 0]
    n = max(len(steps), 1)
    return {
        "draft_ms": round(sum(s.propose_s for s in steps) / n * 1000, 3),
        "verify_ms": round(sum(s.verify_s for s in steps) / n * 1000, 3),
        "other_ms": round(sum(s.wall_s - s.propose_s - s.verify_s for s in steps) / n * 1000, 3),
        "prefill_ms": round(trace.prefill_s * 1000, 3),
    }


def read_rows(path: Path) -> tuple[dict, list[dict]]:
    """(the first provenance header, every run row) of a rows file; a torn last line (a killed run) is skipped."""
    head: dict = {}
    rows: list[dict] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            item = json.loads(line)
        except json.JSONDecodeError:
            continue
        if "provenance" in item:
            head = head or item
        elif isinstance(item, dict) and "method" in item:
            rows.append(item)
    return head, rows


def summary(rows: list[dict]) -> dict[str, dict[str, Any]]:
    """Per method: the median paired speedup (plain's generation time over the method's, same prompt and repeat)
    with its range, tokens/s, A, r (the method's time a forward over plain's) and how many rows were identical."""
    plain = {(r["prompt"], r["repeat"]): r for r in rows if r["method"] == "ar"}
    out: dict[str, dict[str, Any]] = {}
    for key in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == key and (r["prompt"], r["repeat"]) in plain]
        if not mine:
            continue
        ups = spread([plain[(r["prompt"], r["repeat"])]["generation_s"] / max(r["generation_s"], 1e-9) for r in mine])
        cost = [
            (r["decode_s"] / max(r["forwards"], 1))
            / max(
                plain[(r["prompt"], r["repeat"])]["decode_s"] / max(plain[(r["prompt"], r["repeat"])]["forwards"], 1),
                1e-9,
            )
            for r in mine
        ]
        out[key] = {
            "speedup": round(ups.median, 3),
            "range": [round(ups.low, 3), round(ups.high, 3)],
            "tokens_per_s": round(sum(r["tokens"] for r in mine) / max(sum(r["generation_s"] for r in mine), 1e-9), 1),
            "A": round(statistics.mean(r["A"] for r in mine), 3),
            "r": round(statistics.median(cost), 3),
            "identical": f"{sum(r['identical'] for r in mine)}/{len(mine)}" if key != "ar" else "",
            "runs": len(mine),
            **{k: round(statistics.median(r[k] for r in mine), 2) for k in SPLIT if all(k in r for r in mine)},
        }
    return out


def latest_stored(folder: Path | None = None) -> tuple[dict, dict[str, dict[str, Any]]] | None:
    """(provenance header, summary) of the newest stored GPU run under docs/gpu (its folders' rows.jsonl, by name,
    which starts with the date); None when there is none or it holds no row."""
    from specviz.core.paths import REPO

    root = folder or REPO / "docs" / "gpu"
    for path in sorted(root.glob("*/rows.jsonl"), reverse=True):
        try:
            head, rows = read_rows(path)
        except (OSError, UnicodeDecodeError):
            continue
        summ = summary(rows)
        if summ:
            return head, summ
    return None


def _per_forward(row: dict) -> float:
    """A row's decode seconds per target forward."""
    return row["decode_s"] / max(row["forwards"], 1)


SPLIT = ("draft_ms", "verify_ms", "other_ms", "prefill_ms")


def table(summ: dict[str, dict[str, Any]]) -> str:
    """The summary as a markdown table, with each method's step split (median ms: draft, verify, the rest) and its
    prefill where the rows carry them."""
    split = all(all(k in v for k in SPLIT) for v in summ.values())
    head = ["method", "speedup", "range", "tokens/s", "A", "r", "identical"]
    head += ["draft ms", "verify ms", "other ms", "prefill ms"] if split else []
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for key, v in summ.items():
        lo, hi = v["range"]
        cells = [key, f"{v['speedup']:.2f}x", f"{lo:.2f}-{hi:.2f}", f"{v['tokens_per_s']:.1f}", f"{v['A']:.2f}"]
        cells += [f"{v['r']:.2f}", v["identical"]] + ([f"{v[k]:.1f}" for k in SPLIT] if split else [])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the row bench (or summarise a rows file); one line and exit 2 on a bad option."""
    ap = Parser(prog="python -m specviz.tuning.rows", description=main.__doc__)
    ap.add_argument("--out", type=Path, help="rows file (JSON lines), appended to")
    ap.add_argument("--summary", type=Path, help="instead: print the table of an existing rows file")
    ap.add_argument("--methods", default=",".join(methods.available()))
    ap.add_argument("--set", action="append", default=[], help="an extra variant, e.g. eagle:depth=5,top_k=10")
    ap.add_argument("--prompts", type=Path, help="a text file, one prompt a line (default: the doctor's six)")
    ap.add_argument("--max-new-tokens", type=count(1, 4096), default=64)
    ap.add_argument("--repeats", type=count(1, 100), default=2)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--budget-s", type=float, default=1e9, help="start no run after this many seconds")
    try:
        a = ap.parse_args(argv)
        if a.summary:
            _head, rows = read_rows(a.summary)
            print(table(summary(rows)))
            return 0
        if a.out is None:
            raise ValueError("--out or --summary is needed.")
        specs = [*a.methods.split(","), *a.set]
        for s in specs:
            variant(s)
        if a.prompts and a.prompts.suffix == ".jsonl":  # a prompt set ({"prompt": …} or Spec-Bench's turns)
            prompts = [item.text for item in read_prompts(a.prompts)]
        elif a.prompts:
            prompts = [p for p in a.prompts.read_text(encoding="utf-8").splitlines() if p.strip()]
        else:
            from specviz.tuning.doctor import BENCH_PROMPTS

            prompts = [p for _c, p in BENCH_PROMPTS]
        deadline = time.monotonic() + a.budget_s
        lm = load_model("default", device=a.device, progress=lambda _m: None)
        run_rows(lm, specs, prompts, Sampling(max_new_tokens=a.max_new_tokens), a.repeats, a.out, deadline)
    except (ModelError, ValueError, OSError) as exc:
        print(f"specviz rows: error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 2
    _head, rows = read_rows(a.out)
    print(table(summary(rows)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
