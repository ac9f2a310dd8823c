"""The A/B of EAGLE-3's objective on the EAGLE-2 head (issue 42, item 1), for a quiet machine.

Each arm is `python -m specviz train eagle` on the same teacher-forced features of the corpus's openings (built
first when missing: `features --source corpus --answers opening`), fresh, for the same positions (150k: the 96k
openings, then repeats; the recorded baseline reached 0.302 at depth 1), evaluated on the shared held-out set every
30k. Each arm adds one option to the arm before it, so each lever is read against its parent:

    base      today's recipe (SmoothL1 + 0.1 CE, unrolled to depth 2 at 0.5, noise 0.2 on depth 1)
    ce-only   the feature loss off (--feature-weight 0 --ce-weight 1), as EAGLE-3 trains
    ttt3      + training-time test to depth 3, depth d weighing 0.8^(d-1)
    ttt4      the same to depth 4
    griffin   + GRIFFIN's token-alignment mask (--align-top 3)
    no-noise  griffin without the depth-1 noise
    long      griffin for 3 x the positions, the best evaluation kept (--keep-best); not run unless named
    ft-base   the shipped head fine-tuned on the openings with today's recipe (96k positions, lr 2e-4); on request
    ft-ttt    the same fine-tune, CE only with TTT to depth 4; on request

Every arm runs with seed 0; where an arm and its parent differ by less than 1.5 points (the mean top-1 of depths
1-3), both run again with seed 1. After every run the record (docs/experiments/DATE-eagle-objective.json: a table
and every run's manifest under 'curves', which the *What data buys* page draws, each labelled by its arm and
seed) is rewritten, and a rerun skips the runs already done (an interrupted one resumes from its checkpoint).

    .venv/bin/python scripts/ab_eagle.py --dry-run       # the commands, nothing run
    .venv/bin/python scripts/ab_eagle.py                 # features if missing (~16 min fp32), then the arms
    .venv/bin/python scripts/ab_eagle.py --arms griffin,long
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("SPECVIZ_CACHE", Path.home() / ".cache" / "specviz")).expanduser()  # as core.paths
CE = ["--feature-weight", "0", "--ce-weight", "1"]
TTT = ["--unroll-weight", "0.8", "--unroll-geometric"]
GRIFFIN = [*CE, "--unroll", "4", *TTT, "--align-top", "3"]
# the shipped EAGLE-2 head (0.503 at depth 1) fine-tuned on the openings once (96k positions), as in
# docs/experiments/2026-12-03-opening-positions.md: does the objective lift a head that data alone left flat?
FINE = ["--init", "models/eagle", "--lr", "2e-4", "--warmup", "0.05", "--positions", "96000", "--eval-every", "24000"]
ARMS: dict[str, tuple[str, str, list[str]]] = {  # name -> (parent, what it is, its flags)
    "base": ("", "today's recipe", []),
    "ce-only": ("base", "feature loss off", CE),
    "ttt3": ("ce-only", "CE only, TTT 3 x 0.8^(d-1)", [*CE, "--unroll", "3", *TTT]),
    "ttt4": ("ttt3", "CE only, TTT 4 x 0.8^(d-1)", [*CE, "--unroll", "4", *TTT]),
    "griffin": ("ttt4", "CE only, TTT 4, GRIFFIN top-3", GRIFFIN),
    "no-noise": ("griffin", "CE only, TTT 4, GRIFFIN, no noise", [*GRIFFIN, "--noise", "0"]),
    "long": ("griffin", "CE only, TTT 4, GRIFFIN, 3x, best kept", [*GRIFFIN, "--keep-best"]),
    "ft-base": ("", "the shipped head fine-tuned, today's recipe", FINE),
    "ft-ttt": ("ft-base", "the shipped head fine-tuned, CE only, TTT 4", [*FINE, *CE, "--unroll", "4", *TTT]),
}
DEFAULT_ARMS = "base,ce-only,ttt3,ttt4,griffin,no-noise"
CLOSE = 0.015  # under 1.5 points of the mean top-1 of depths 1-3: run a second seed
Runner = Callable[[list[str]], int]  # `train eagle`'s arguments -> exit code


def options(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arms", default=DEFAULT_ARMS, help=f"of {', '.join(ARMS)}")
    ap.add_argument("--positions", type=int, default=150_000, help="training positions per arm (long: 3x)")
    ap.add_argument("--eval-every", type=int, default=30_000)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--data", default="", help="a feature folder (default: the openings' features, made if missing)")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="of the features (fp32: as the baseline)")
    ap.add_argument("--feature-positions", type=int, default=90_000, help="opening positions to make")
    ap.add_argument("--work", type=Path, default=CACHE / "ab-eagle", help="the runs' heads and checkpoints")
    ap.add_argument("--record", type=Path, default=ROOT / "docs" / "experiments" / f"{time.strftime('%Y-%m-%d')}"
                    "-eagle-objective.json")  # fmt: skip
    ap.add_argument("--extra", default="", help="more `train eagle` flags for every arm (quoted)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands only")
    a = ap.parse_args(argv)
    unknown = [x for x in a.arms.split(",") if x not in ARMS]
    if unknown or min(a.positions, a.eval_every, a.threads, a.feature_positions) < 1:
        ap.error(f"unknown arms {unknown} or a count below 1")
    return a


def features(a: argparse.Namespace, dry: bool) -> str:
    """The feature folder the arms train on: --data, or the openings' features (made or extended first)."""
    if a.data:
        return a.data
    folder = CACHE / "features" / f"train-{a.dtype}-corpus-opening"
    made = json.loads((folder / "manifest.json").read_text()).get("positions", 0) if folder.is_dir() else 0
    if made < a.feature_positions:
        cmd = [sys.executable, "-m", "specviz", "corpus", "features", "--source", "corpus", "--answers", "opening"]
        cmd += ["--max-len", "384", "--positions", str(a.feature_positions), "--threads", str(a.threads)]
        cmd += ["--dtype", a.dtype, "--out", str(folder)]
        print("$ " + shlex.join(cmd), flush=True)
        if not dry:
            subprocess.run(cmd, cwd=ROOT, check=True)
    return str(folder)


def train_args(a: argparse.Namespace, data: str, arm: str, seed: int) -> list[str]:
    """`train eagle`'s arguments for one run: the shared schedule, the arm's flags, its own folders and note."""
    where = a.work / f"{arm}-s{seed}"
    positions = a.positions * (3 if arm == "long" else 1)
    out = ["--data", data, "--positions", str(positions), "--eval-every", str(a.eval_every)]
    out += ["--threads", str(a.threads), "--seed", str(seed), "--out", str(where / "head")]
    out += ["--checkpoint", str(where / "ckpt"), "--resume", "--variant", f"A/B {ARMS[arm][1]}, seed {seed}"]
    return [*out, *ARMS[arm][2], *shlex.split(a.extra)]


def subprocess_runner(args: list[str]) -> int:
    """`python -m specviz train eagle ARGS` from the repository root."""
    cmd = [sys.executable, "-m", "specviz", "train", "eagle", *args]
    print("$ " + shlex.join(cmd), flush=True)
    return subprocess.run(cmd, cwd=ROOT).returncode


def score(manifest: dict) -> float:
    """The mean held-out top-1 of depths 1-3 (as --keep-best ranks evaluations)."""
    return statistics.mean(manifest["heldout_top1_by_depth"][:3])


def run_one(a: argparse.Namespace, data: str, arm: str, seed: int, runner: Runner, done: dict) -> None:
    """Train one arm and seed (skipped when its head is saved already) and keep its manifest in `done`."""
    saved = a.work / f"{arm}-s{seed}" / "head" / "manifest.json"
    if not saved.is_file() and runner(train_args(a, data, arm, seed)) != 0:
        raise SystemExit(f"train eagle failed for {arm}, seed {seed}")
    done[(arm, seed)] = json.loads(saved.read_text())
    write_record(a.record, done)


def saved_runs(work: Path) -> dict:
    """Every run already saved under `work` (an earlier invocation's arms too), so the record keeps them all and an
    arm is read against its parent whichever invocation trained it."""
    done = {}
    for arm in ARMS:
        for manifest in sorted(work.glob(f"{arm}-s*/head/manifest.json")):
            seed = manifest.parent.parent.name.removeprefix(f"{arm}-s")
            if seed.isdigit():
                done[(arm, int(seed))] = json.loads(manifest.read_text())
    return dict(sorted(done.items(), key=lambda kv: (list(ARMS).index(kv[0][0]), kv[0][1])))


def write_record(path: Path, done: dict) -> None:
    """The table and every run's manifest (the curves What data buys draws), rewritten after each run."""
    table = []
    for (arm, seed), m in done.items():
        top1 = [round(x, 4) for x in m["heldout_top1_by_depth"]]
        row = {"arm": arm, "seed": seed, "parent": ARMS[arm][0], "what": ARMS[arm][1], "top1_by_depth": top1}
        table.append(row | {"mean_1_3": round(score(m), 4), "positions": m["positions"], "seconds": m["train_seconds"]})
    what = "EAGLE-3's objective on the EAGLE-2 head, each option against its parent (scripts/ab_eagle.py)"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"what": what, "table": table, "curves": list(done.values())}, indent=1) + "\n")


def main(argv: list[str] | None = None, runner: Runner = subprocess_runner) -> int:
    a = options(argv)
    arms = a.arms.split(",")
    if a.dry_run:
        data = features(a, dry=True)
        for arm in arms:
            print("$ python -m specviz train eagle " + shlex.join(train_args(a, data, arm, 0)))
        return 0
    data, done = features(a, dry=False), saved_runs(a.work)
    for arm in arms:
        run_one(a, data, arm, 0, runner, done)
    for arm in arms:
        parent = ARMS[arm][0]
        if (parent, 0) in done and abs(score(done[(arm, 0)]) - score(done[(parent, 0)])) < CLOSE:
            for name in (parent, arm):
                if (name, 1) not in done:
                    run_one(a, data, name, 1, runner, done)
    for row in json.loads(a.record.read_text())["table"]:
        print(f"{row['arm']:>9} s{row['seed']}  {row['mean_1_3']:.4f}  {row['top1_by_depth'][:4]}  {row['seconds']} s")
    print(f"recorded in {a.record}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
