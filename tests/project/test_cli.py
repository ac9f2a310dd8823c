"""The command line: bad input exits non-zero with one line of reason; good input works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "specviz", *args], cwd=ROOT, capture_output=True, text=True, timeout=600
    )


@pytest.mark.parametrize(
    "args, reason",
    [
        (["generate", "--prompt", ""], "prompt is empty"),
        (["generate", "--prompt", "hi", "--max-new-tokens", "-4"], "max_new_tokens"),
        (["generate", "--prompt", "hi", "--method", "nope"], "Unknown method"),
        (["generate", "--prompt", "hi", "--model", "/no/such/folder"], "neither a folder"),
        (["generate", "--prompt", "hi", "--opt", "x=1"], "no option"),
        (["generate", "--prompt", "hi", "--temperature", "-1"], "temperature"),
        (["bench", "--prompts", "/no/such.jsonl"], "does not exist"),
        (["bench", "--prompts", "README.md", "--methods", "ar"], "not valid JSON"),
        (["bench", "--prompts", "README.md", "--methods", "ar,zzz"], "Unknown method"),
        (["train", "medusa", "--threads", "0"], "--threads must be at least 1"),
        (["train", "medusa", "--epochs", "0"], "must be positive"),
        (["train", "medusa", "--soft", "2"], "--soft must be between 0 and 1"),
        (["train", "eagle", "--ce-weight", "-1"], "--ce-weight must be >= 0"),
        (["calibrate", "eagle", "--live", "--shapes", "2/x"], "--shapes must look like"),
        (["calibrate", "eagle", "--live", "--shapes", "2/4/1"], "total_tokens must be between"),
        (["calibrate", "eagle", "--bogus"], "unrecognized arguments"),
        (["calibrate", "draft", "--gammas", "0,2"], "--gammas between 1 and 16"),
        (["calibrate", "draft", "--gammas", "a"], "--gammas must look like"),
        (["doctor", "--methods", "ar,nosuch"], "Unknown method 'nosuch'"),
    ],
)
def test_bad_input_is_one_line(args, reason, capsys, monkeypatch, tiny_lm):
    """In process (a subprocess each would cost seconds of imports): exit status 2 and one line. The built-in
    model is the tiny one here (an empty prompt is found by its tokenizer); other --model values load for real."""
    import specviz.__main__ as cli_main
    from specviz.__main__ import main

    real_load = cli_main._load
    monkeypatch.setattr(cli_main, "_load", lambda a: tiny_lm if a.model == "default" else real_load(a))
    try:
        code = main(list(args))
    except SystemExit as exc:  # argparse's own errors
        code = exc.code
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and reason in lines[0] and "Traceback" not in err


def test_main_runs_from_any_directory(tmp_path, monkeypatch, capsys):
    """In process, from a directory that is not the checkout: models/ is found through specviz.core.paths and the
    command line answers (the `python -m specviz` entry point itself: the full-tier test below)."""
    from specviz.__main__ import main
    from specviz.core import paths

    monkeypatch.chdir(tmp_path)
    assert paths.MEDUSA_DIR.is_dir() and paths.EAGLE_DIR.is_dir(), paths.MODELS
    assert main(["generate", "--prompt", "hi", "--max-new-tokens", "0"]) == 2
    assert "max_new_tokens" in capsys.readouterr().err


@pytest.mark.full
def test_python_dash_m_specviz_runs_from_any_directory(tmp_path):
    """The module entry point itself, as a user runs it, from a directory that is not the checkout.
    Full tier: a fresh Python importing torch costs seconds; the in-process test above covers the arguments."""
    code = (
        "import runpy, sys; from specviz.core import paths; "
        "assert paths.MEDUSA_DIR.is_dir() and paths.EAGLE_DIR.is_dir(), paths.MODELS; "
        "sys.argv = ['specviz', 'generate', '--prompt', '']; runpy.run_module('specviz', run_name='__main__')"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 2 and "prompt is empty" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.real_model
def test_generate_writes_a_trace(tmp_path):
    path = tmp_path / "t.json"
    out = cli("generate", "--prompt", "Name a colour.", "--max-new-tokens", "8", "--json", str(path))
    assert out.returncode == 0, out.stderr
    data = json.loads(path.read_text())
    assert data["method"] == "ar" and 1 <= len(data["output_ids"]) <= 8
    assert out.stdout.strip()


@pytest.mark.real_model
def test_bench_json_schema(tmp_path, real_lm, monkeypatch, capsys):
    """In process on the session's real model (the generate test above is the subprocess smoke)."""
    import specviz.__main__ as cli_main

    monkeypatch.setattr(cli_main, "_load", lambda _a: real_lm)
    prompts = tmp_path / "p.jsonl"
    prompts.write_text('{"prompt": "Say hello."}\n{"turns": ["Name two fruits.", "ignored"], "category": "qa"}\n')
    res = tmp_path / "r.json"
    args = ["bench", "--methods", "ar,hf", "--prompts", str(prompts), "--max-new-tokens", "8", "--json", str(res)]
    assert cli_main.main(args) == 0, capsys.readouterr().err
    data = json.loads(res.read_text())
    assert data["prompts"] == 2 and data["repeats"] == 1 and data["max_new_tokens"] == 8
    for name in ("ar", "hf"):
        row = data["methods"][name]
        spread = {"speedup_low", "speedup_high", "speedup_q1", "speedup_q3"}  # the median's range and quartiles
        assert set(row) == {"speedup", "tokens_per_s", "mean_accepted", "step_cost", "identical", "total", *spread}
        assert row["speedup_low"] <= row["speedup_q1"] <= row["speedup"] <= row["speedup_q3"] <= row["speedup_high"]
        assert row["identical"] == row["total"] == 2
    assert data["methods"]["ar"]["mean_accepted"] == 1.0
