"""`python -m specviz.tuning.doctor`: one short pass that says whether this device decodes correctly, and how fast.

It runs, on the chosen device: greedy identity of every method against plain decoding on the real model
(3 prompts × 64 tokens), the latency probe, the fit of every tree and window method's shape to this device
(tuning.fit, printed), and a 6-prompt interleaved bench of every method at those shapes, and writes
one JSON report with the machine's provenance. It checks the dtype the app and the CLI run in, fp32 on every
device, unless `--dtype` asks for another (bf16 or fp16: then the report says, as measured, which methods stayed
identical to plain decoding; reduced precision does not promise it).
`scripts/gpu-check.sh` is the same command with `--device cuda`.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import torch

from specviz import methods
from specviz.core.cli_args import Parser, count
from specviz.core.measure import provenance
from specviz.core.model import LoadedModel, ModelError, load_model
from specviz.core.sampling import Sampling
from specviz.tuning import fit

IDENTITY_PROMPTS = (
    "Explain why the sky is blue in three sentences.",
    "Write a Python function that returns the n-th Fibonacci number.",
    "Copy this list and number it: apples, pears, plums, cherries, figs.",
)
BENCH_PROMPTS = (
    ("chat", "What are three good habits for learning a new language?"),
    ("code", 'def merge_sorted(a: list[int], b: list[int]) -> list[int]:\n    """Merge two sorted lists."""'),
    (
        "extraction",
        "From this sentence, list every city: 'We flew from Paris to Rome, then took the train to "
        "Milan and Zurich before flying home to Paris.'",
    ),
    (
        "summary",
        "Summarise in two sentences: The mitochondrion is an organelle found in most cells. It "
        "produces most of the cell's supply of ATP, used as a source of chemical energy.",
    ),
    ("maths", "A train travels 120 km in 1.5 hours. What is its average speed? Show the steps."),
    ("translation", "Translate into French: The weather is nice today, so we will walk to the market."),
)


def identity(lm: LoadedModel, names: list[str], max_new_tokens: int = 64) -> dict[str, dict[str, int]]:
    """Per method: on how many identity prompts its greedy output equals plain decoding's."""
    s = Sampling(max_new_tokens=max_new_tokens)
    out = {n: {"identical": 0, "total": 0} for n in names if n != "ar"}
    configs = fit.prepare(lm, {}, list(out))  # each as the app runs it: its shape fitted to this device
    for prompt in IDENTITY_PROMPTS:
        ids = lm.encode_prompt(prompt)
        ref = methods.get("ar").generate(lm, ids, s).output_ids
        for name in out:
            got = methods.get(name).generate(lm, ids, s, configs[name]).output_ids
            out[name]["total"] += 1
            out[name]["identical"] += int(got == ref)
    return out


def check_dtype(device: str, dtype: str, names: list[str]) -> tuple[LoadedModel, dict]:
    """The model in `dtype` (auto: fp32, the default everywhere) and its greedy identity, reported as measured."""
    lm = load_model("default", device=device, dtype=dtype, progress=lambda _m: None)
    short = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(lm.dtype, str(lm.dtype))
    out: dict = {"chosen": short, "identity": {short: identity(lm, names)}}
    if note := lm.precision_note():
        out["note"] = note
    return lm, out


def bench(lm: LoadedModel, names: list[str], max_new_tokens: int, repeats: int) -> dict:
    """The six bench prompts, every method interleaved with plain decoding."""
    from specviz.core.prompts import PromptItem
    from specviz.tuning.bench import run_bench

    items = [PromptItem(text=p, category=c) for c, p in BENCH_PROMPTS]
    res = run_bench(lm, names, items, Sampling(max_new_tokens=max_new_tokens), repeats=repeats)
    return res.to_dict()


def run(device: str, names: list[str], max_new_tokens: int = 64, repeats: int = 1, dtype: str = "auto") -> dict:
    """The whole check; returns the report."""
    from specviz.tuning.probe import probe_latency

    t0 = time.perf_counter()
    lm, checked = check_dtype(device, dtype, names)
    curve = probe_latency(lm)
    report = {
        "provenance": provenance(lm.describe()).to_dict(),
        "dtype": checked,
        "probe": asdict(curve),
        "fit": {
            n: {**f.best.fields, "A": round(f.best.A, 3), "r": round(f.best.r, 3)} for n, f in fit.fits(lm).items()
        },
        "bench": bench(lm, names, max_new_tokens, repeats),
    }
    report["seconds"] = round(time.perf_counter() - t0, 1)
    report["passed"] = all(v["identical"] == v["total"] for v in checked["identity"][checked["chosen"]].values())
    return report


def overhead(device: str, dtype: str, names: list[str], max_new_tokens: int, out: Path | None) -> int:
    """Print (and write, with `out`) the overhead table; 1 when a method breaks the host budget."""
    from specviz.tuning.overhead import over_budget, report, table

    lm = load_model("default", device=device, dtype=dtype, progress=lambda _m: None)
    rows = table(lm, names, IDENTITY_PROMPTS[0], max_new_tokens)
    where = provenance(lm.describe()).to_dict()
    print(report(rows, f"{lm.describe()}, {max_new_tokens} tokens, greedy"))
    problems = over_budget(rows, lm.hf.config.num_hidden_layers)
    for p in problems:
        print(f"over budget: {p}")
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        body = {"provenance": where, "prompt": IDENTITY_PROMPTS[0], "max_new_tokens": max_new_tokens}
        out.write_text(json.dumps({**body, "rows": [asdict(r) for r in rows], "problems": problems}, indent=1) + "\n")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    """Check greedy identity, the latency curve and a short bench on one device; write a JSON report."""
    ap = Parser(prog="python -m specviz.tuning.doctor", description=main.__doc__)
    ap.add_argument("--device", default="auto", help="auto, cpu or cuda")
    ap.add_argument("--dtype", default="auto", help="auto (fp32 on every device), fp32, bf16 or fp16")
    ap.add_argument("--methods", default=",".join(methods.available()))
    ap.add_argument("--max-new-tokens", type=count(1, 4096), default=64)
    ap.add_argument("--repeats", type=count(1, 100), default=1)
    ap.add_argument("--out", type=Path, default=None, help="report path (default: print only)")
    ap.add_argument(
        "--overhead",
        action="store_true",
        help="instead: count torch calls and host reads per step and per target forward for every method",
    )
    try:  # every option checked before any run: a bad one is one line
        a = ap.parse_args(argv)
        names = ["ar", *[n for n in a.methods.split(",") if n and n != "ar"]]
        for n in names:
            methods.get(n)
        if a.overhead:
            return overhead(a.device, a.dtype, names, min(a.max_new_tokens, 64), a.out)
        report = run(a.device, names, a.max_new_tokens, a.repeats, a.dtype)
    except (ModelError, ValueError, OSError) as exc:
        print(f"specviz doctor: error: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}", file=sys.stderr)
        return 2
    text = json.dumps(report, indent=1)
    if a.out is not None:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text + "\n")
    bench_rows = report["bench"]["methods"]
    fitted = report.get("fit", {})
    print("fit: " + "; ".join(f"{k} " + " ".join(f"{f}={v}" for f, v in s.items()) for k, s in fitted.items()))
    print(
        f"dtype {report['dtype']['chosen']}; identity "
        + ", ".join(
            f"{k} {v['identical']}/{v['total']}"
            for k, v in report["dtype"]["identity"][report["dtype"]["chosen"]].items()
        )
    )
    print("bench: " + ", ".join(f"{k} {v['speedup']:.2f}x" for k, v in bench_rows.items()))
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
