"""scripts/ab_eagle.py at toy scale: every arm trains through `train eagle` with its own flags, a second seed runs
exactly where an arm and its parent are close, the record holds every curve where *What data buys* reads them,
each labelled apart, and a rerun trains nothing again."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from specviz.corpus import distill
from specviz.corpus.shards import pack
from specviz.training import cli
from specviz.tuning.learning import curves
from tests.conftest import make_tiny

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ab_eagle.py"


def script():
    spec = importlib.util.spec_from_file_location("ab_eagle", SCRIPT)
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


@pytest.mark.full  # twelve toy trainings at most: ~5 s
def test_the_ab_runs_every_arm_and_records_every_curve(tokenizer, tmp_path, capsys):
    lm = make_tiny(tokenizer, seed=3)
    lm.hf.float()
    lm.dtype = torch.float32
    seqs = distill.distill_batch(lm, ["Hello there", "What is a cat?", "Tell me a joke"], 12)
    data = tmp_path / "data"
    data.mkdir()
    save_file(pack(seqs), str(data / "shard_00000.safetensors"))
    save_file(pack(seqs[:2]), str(data / "shard_00009.safetensors"))  # every tenth shard is held out
    ab, record = script(), tmp_path / "docs" / "experiments" / "ab.json"
    extra = f"--heldout {data} --heldout-sequences 2 --draft-vocab 512 --batch-tokens 64 --threads 1"
    argv = ["--data", str(data), "--positions", "40", "--eval-every", "20", "--work", str(tmp_path / "work")]
    argv += ["--record", str(record), "--extra", extra]
    calls: list[list[str]] = []

    def runner(args: list[str]) -> int:
        calls.append(args)
        return cli.train("eagle", args, lm=lm)

    assert ab.main(argv, runner) == 0, capsys.readouterr().err
    rec = json.loads(record.read_text())
    rows = {(r["arm"], r["seed"]): r for r in rec["table"]}
    arms = ab.DEFAULT_ARMS.split(",")
    assert {arm for arm, seed in rows if seed == 0} == set(arms) and len(calls) == len(rows) == len(rec["curves"])
    close = {
        (a, p) for a in arms if (p := ab.ARMS[a][0]) and abs(rows[a, 0]["mean_1_3"] - rows[p, 0]["mean_1_3"]) < 0.015
    }
    assert {arm for arm, seed in rows if seed == 1} == {x for pair in close for x in pair}
    griffin = next(c for c in rec["curves"] if c["variant"].startswith("A/B CE only, TTT 4, GRIFFIN top-3, seed 0"))
    assert griffin["trainer"] | {"feature_weight": 0.0, "unroll": 4, "align_top": 3, "noise": 0.2} == griffin["trainer"]
    drawn = curves(tmp_path / "models", record.parent)  # as the What data buys page reads them
    assert len(drawn) == len(rows) and len({c.label for c in drawn}) == len(rows)
    assert ab.main(argv, lambda args: pytest.fail("a finished run trained again")) == 0
    # a later invocation of one arm keeps every earlier run in the record (it once kept only its own arms)
    assert ab.main([*argv, "--arms", "griffin"], lambda args: pytest.fail("a finished run trained again")) == 0
    assert len(json.loads(record.read_text())["table"]) == len(rows)
