"""Command line: python -m specviz {generate, bench, probe, fit, train, calibrate, export, doctor, lesson, corpus}."""

from __future__ import annotations

import argparse
import json
import math
import shlex
import sys
from pathlib import Path

from specviz.core.model import ModelError
from specviz.core.prompts import PromptError
from specviz.core.sampling import ConfigError
from specviz.core.trace import TraceError

KNOWN_ERRORS = (ModelError, PromptError, ConfigError, TraceError, ValueError, OSError)
# the commands that pass the rest of the line to their own parsers, and their help ({kinds}: every method card's
# head; {held_out}: those whose heads have a held-out table)
PASSED_ON = {
    "train": "train through the one loop: {kinds} (train KIND --help); train heldout: saved heads' held-out top-1",
    "calibrate": "held-out tables and live sweeps: {held_out}, eagle, draft (sps's γ)",
    "doctor": "is every method token-identical to plain decoding here? (doctor --help)",
    "corpus": "make training data: answer, distill, features (corpus --help)",
}


def _options(pairs: list[str], scoped: bool = False) -> dict:
    """Parse repeated `key=value` (or `method.key=value` when scoped) options."""
    out: dict = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ConfigError(f"Option {pair!r} should look like {'method.' if scoped else ''}key=value.")
        if scoped:
            method, dot, name = key.partition(".")
            if not dot:
                raise ConfigError(f"Option {pair!r} should name its method, like medusa.total_tokens=17.")
            out.setdefault(method, {})[name] = value
        else:
            out[key] = value
    return out


def _model_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default="default", help="'default' (built-in SmolLM2-135M), a folder or a hub id")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument(
        "--dtype", default="auto", help="auto (fp32 on every device), fp32, or bf16/fp16 (identity not guaranteed)"
    )
    p.add_argument(
        "--kernels", default="auto", help="auto (oneDNN-prepacked fp32 linears on a CPU), onednn or aten (stock)"
    )


def _sampling_args(p: argparse.ArgumentParser, tokens: int) -> None:
    p.add_argument("--max-new-tokens", type=int, default=tokens)
    p.add_argument("--temperature", type=float, default=0.0, help="0 = greedy")
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)


def _sampling(a: argparse.Namespace):
    from specviz.core.sampling import Sampling

    return Sampling(max_new_tokens=a.max_new_tokens, temperature=a.temperature, top_p=a.top_p, seed=a.seed)


def _checked(a: argparse.Namespace) -> argparse.Namespace:
    """Every number option finite, non-negative and in range, and the sampling settings valid, before any work
    (argparse's float() takes "nan" and "inf", and a NaN passes every later comparison)."""
    if hasattr(a, "temperature"):
        _sampling(a)  # its own sentences for the sampling options
    for name, v in vars(a).items():
        if isinstance(v, (int, float)) and not isinstance(v, bool) and not (math.isfinite(v) and v >= 0):
            raise ConfigError(f"--{name.replace('_', '-')} must be a finite number of at least 0, got {v}.")
    if getattr(a, "repeats", 1) < 1 or getattr(a, "per_category", None) == 0:
        raise ConfigError("--repeats and --per-category must be at least 1.")
    return a


def _load(a: argparse.Namespace):
    from specviz.core.model import load_model

    lm = load_model(a.model, a.device, a.dtype, progress=lambda m: print(m, file=sys.stderr), kernels=a.kernels)
    if note := lm.precision_note():
        print(f"specviz: {lm.describe()}: {note}", file=sys.stderr)
    return lm


def cmd_generate(a: argparse.Namespace) -> int:
    from specviz import methods
    from specviz.core.prompts import prepare

    sampling = _sampling(a)
    config = methods.make_config(a.method, _options(a.opt))
    lm = _load(a)
    from specviz.tuning import fit

    config = fit.prepare(lm, {a.method: config})[a.method]  # prompt lookup's draft length: this device's curve
    ids = prepare(lm, a.prompt)
    mod = methods.get(a.method)
    trace = mod.generate(lm, ids, sampling, config, prompt=a.prompt)
    print(trace.text)
    print(
        f"[{trace.method}] {trace.new_tokens} tokens in {len(trace.steps)} steps (A = "
        f"{trace.mean_accepted:.2f}), {trace.tokens_per_s:.1f} tok/s, stopped at {trace.stopped}",
        file=sys.stderr,
    )
    if a.json:
        trace.save(a.json)
        print(f"trace written to {a.json}", file=sys.stderr)
    return 0


def cmd_bench(a: argparse.Namespace) -> int:
    from tqdm import tqdm

    from specviz import methods
    from specviz.core.prompts import read_prompts, select
    from specviz.tuning import bench

    names = [n.strip() for n in a.methods.split(",") if n.strip()]
    for n in names:
        if n not in bench.PEERS:
            methods.get(n)  # fails early, with the list of known methods
    scoped = _options(a.opt, scoped=True)
    configs = {m: methods.make_config(m, kv) for m, kv in scoped.items()}
    if a.limit is not None and a.limit < 1:
        raise ConfigError("--limit must be at least 1.")
    items = select(read_prompts(a.prompts), a.limit, a.per_category)
    sampling = _sampling(a)
    if a.batch or a.context:  # B prompts decoded together: throughput, latency and speedup per batch size
        from specviz.tuning.batched_bench import cli_bench

        return cli_bench(lambda: _load(a), names, configs, items, sampling, a)
    lm = _load(a)
    bar = tqdm(total=len(items) * a.repeats * len(set(names) | {"ar"}), file=sys.stderr, unit="run")

    def tick(done: int, total: int, name: str) -> None:
        bar.set_postfix_str(name)
        bar.update(done - bar.n)

    result = bench.run_bench(lm, names, items, sampling, a.repeats, configs, tick)
    bar.close()
    print(bench.format_table(result))
    if a.json:
        data = result.to_dict() | {"prompt_file": str(a.prompts), "command": a.invoked}
        Path(a.json).write_text(json.dumps(data, indent=1))
        print(f"results written to {a.json}", file=sys.stderr)
    return 0


def cmd_probe(a: argparse.Namespace) -> int:
    from specviz.tuning.probe import cached_curve

    curve = cached_curve(_load(a), refresh=True)
    print(f"forward latency on {curve.device}, prefix {curve.prefix_len} tokens (median of {curve.repeats})")
    for k, ms, rel in zip(curve.ks, curve.ms, curve.relative()):
        print(f"  k={k:>3}  {ms:8.1f} ms   {rel:5.2f}x one token")
    return 0


def cmd_fit(a: argparse.Namespace) -> int:
    """The tree and window shapes fitted to this device, with their predicted speedups and step splits."""
    from specviz.tuning import fit

    lm = _load(a)
    fits = fit.fits(lm, refresh=a.refresh)
    print(fit.report(fits, fit.device_cost(lm)))
    return 0


def _fit_args(ft: argparse.ArgumentParser) -> None:
    ft.add_argument("--refresh", action="store_true", help="measure the latency curve and the heads' steps again")
    _model_args(ft)


def cmd_lesson_deck(a: argparse.Namespace) -> int:
    """export --lesson: every stop of the lesson as a slide, its figure drawn from runs made now."""
    from specviz.output.lesson.deck import write_lesson_deck
    from specviz.output.lesson.model import LessonError, load_lesson

    lesson = load_lesson(a.lesson_file)  # a bad file fails here, before the model loads
    path = Path(a.lesson)
    if path.suffix.lower() != ".pptx":
        raise LessonError(f"--lesson must name a .pptx file, got {path.name!r}.")
    from specviz.output.lesson.cli import recorded_deck

    if recorded_deck(lesson, path):  # the shipped recording of this lesson: no model, the pack's numbers
        return 0
    write_lesson_deck(path, _load(a), lesson, progress=lambda m: print(m, file=sys.stderr))
    print(f"wrote {len(lesson.stops)} slides (the lesson {lesson.source}) to {path}")
    return 0


def cmd_export(a: argparse.Namespace) -> int:
    if a.lesson:
        return cmd_lesson_deck(a)
    from specviz.output import publish

    names = tuple(n.strip() for n in a.methods.split(",") if n.strip())
    req = publish.Request(
        out=Path(a.out) if a.out else None,
        pptx=Path(a.pptx) if a.pptx else None,
        formats=tuple(f.strip() for f in a.formats.split(",") if f.strip()),
        names=names,
        every=a.all,
        prompt=a.prompt or "",
        preset=a.preset or "",
        traces=Path(a.traces) if a.traces else None,
    )
    req.check()
    lm = None
    if req.traces is not None:
        traces, source = publish.load(req), f"saved traces {req.traces}"
    else:
        source = publish.prompt_text(req)[1]
        lm = _load(a)
        traces = publish.run_traces(lm, req, _sampling(a))
    figs = publish.figures(traces, lm, req.every)
    for line in publish.write(req, traces, figs, publish.notes(traces, lm, source)):
        print(line)
    return 0


def cmd_heads(a: argparse.Namespace) -> int:
    try:
        if a.command == "train":
            from specviz.training.cli import train as command
        else:
            from specviz.tuning.calibrate import calibrate as command
    except ImportError:
        raise ConfigError("Head training is not available in this checkout.") from None
    return command(a.head, a.rest)


def _kinds() -> dict[str, str]:
    """The training kinds the methods' cards name, for the help: every head, and those with a held-out table."""
    from specviz import methods

    cards = methods.cards()
    return {
        "kinds": ", ".join(c.head for c in cards if c.head),
        "held_out": ", ".join(c.head for c in cards if c.held_out),
    }


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m specviz", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="decode one prompt with one method and print the text")
    g.add_argument("--method", default="ar")
    g.add_argument("--prompt", required=True)
    g.add_argument("--opt", action="append", default=[], metavar="KEY=VALUE", help="a method option")
    g.add_argument("--json", metavar="TRACE.json", help="write the full trace here")
    _sampling_args(g, 64)
    _model_args(g)
    b = sub.add_parser("bench", help="run methods side by side on a prompt set")
    b.add_argument("--methods", default="ar,hf", help="comma-separated; ar is always included")
    b.add_argument("--prompts", required=True, help="JSONL: {'prompt': …} or {'turns': […]} per line")
    b.add_argument("--repeats", type=int, default=1)
    b.add_argument("--limit", type=int, help="use the first K prompts (after --per-category)")
    b.add_argument("--per-category", type=int, help="use the first K prompts of each category")
    b.add_argument("--opt", action="append", default=[], metavar="METHOD.KEY=VALUE")
    b.add_argument("--json", metavar="OUT.json")
    b.add_argument("--batch", help="batch sizes, e.g. 1,4,16: decode that many prompts together (ar, pld, eagle)")
    b.add_argument("--context", help="context lengths, e.g. 128,2048: long-document prompts of that many tokens")
    _sampling_args(b, 128)
    _model_args(b)
    pr = sub.add_parser("probe", help="measure forward latency against the number of new tokens")
    _model_args(pr)
    _fit_args(sub.add_parser("fit", help="fit each tree and window method's shape to this device (measured once)"))
    e = sub.add_parser("export", help="write slide-ready figures (PNG, SVG, a .pptx deck) for methods on one prompt")
    e.add_argument("--methods", default="ar,medusa,eagle,lookahead")
    e.add_argument("--all", action="store_true", help="every method, and the figures of the stored measurements")
    e.add_argument("--prompt", help="run the methods on this prompt")
    e.add_argument("--preset", help="or on a shipped prompt, by id (specviz/data/prompts.jsonl; default code-hints)")
    e.add_argument("--traces", help="or draw a saved trace / bundle instead of running")
    e.add_argument("--out", help="folder to write the images, traces.json and index.html into")
    e.add_argument("--pptx", metavar="DECK.pptx", help="write the figures as a slide deck, provenance in the notes")
    e.add_argument("--formats", default="png,svg")
    e.add_argument("--lesson", metavar="DECK.pptx", help="write the lesson as a deck: one slide per stop")
    e.add_argument("--lesson-file", help="the lesson to write (default: $SPECVIZ_LESSON or the shipped one)")
    _sampling_args(e, 64)
    _model_args(e)
    whole = ("doctor", "corpus")  # their own parsers read all of the line
    for name, note in PASSED_ON.items():
        t = sub.add_parser(name, help=note.format(**_kinds()), add_help=name not in whole)
        for arg in ["head", "rest"] if name not in whole else ["rest"]:
            t.add_argument(arg, nargs=argparse.REMAINDER if arg == "rest" else None)
    return p


def cmd_doctor(argv: list[str]) -> int:
    from specviz.tuning.doctor import main as doctor

    return doctor(argv)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["doctor"]:  # its own parser reads every option (python -m specviz.tuning.doctor's)
        return cmd_doctor(argv[1:])
    if argv[:1] == ["corpus"]:  # corpus answer / distill / features: its own parser (specviz.corpus.cli)
        from specviz.corpus.cli import main as corpus

        return corpus(argv[1:])
    if argv[:1] == ["lesson"]:  # lesson record / check: its own parser (specviz.output.lesson.cli)
        from specviz.output.lesson.cli import main as lesson

        return lesson(argv[1:], _model_args, _load)
    a = parser().parse_args(argv)
    a.invoked = "python -m specviz " + shlex.join(argv)  # what a stored result says made it (argv, not sys.argv)
    handler = {
        "generate": cmd_generate,
        "bench": cmd_bench,
        "probe": cmd_probe,
        "fit": cmd_fit,
        "export": cmd_export,
        "train": cmd_heads,
        "calibrate": cmd_heads,
    }[a.command]
    try:
        return handler(_checked(a))
    except KNOWN_ERRORS as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print(f"specviz: error: {msg}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("specviz: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
