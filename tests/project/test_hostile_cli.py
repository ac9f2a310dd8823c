"""Operator commands: a bad number at any option is one line and a non-zero exit before any work (no model loads,
no run starts), and a head whose weights are not finite is refused (issue 41's CLI findings)."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import save_file

from specviz.core.sampling import ConfigError


def no_model(monkeypatch) -> None:
    """Fail the test if anything loads a model: the check must come before any work."""
    import specviz.core.model as model
    import specviz.corpus.cli as corpus_cli
    import specviz.training.cli as cli

    def refuse(*_a, **_k):
        raise AssertionError("a model was loaded before the options were checked")

    monkeypatch.setattr(model, "load_model", refuse)
    monkeypatch.setattr(cli, "load_model", refuse)
    monkeypatch.setattr(corpus_cli, "load_model", refuse)


def one_error_line(capsys) -> str:
    out = capsys.readouterr()
    text = (out.err or out.out).strip()
    assert text.count("\n") == 0 and "Traceback" not in text and "error" in text, text
    return text


@pytest.mark.parametrize(
    "argv, says",
    [
        (["train", "medusa", "--lr", "inf"], "--lr"),  # trained and saved a NaN head
        (["train", "eagle", "--clip", "nan"], "--clip"),  # nan < 0 is false: passed every check
        (["train", "draft", "--minutes", "nan"], "--minutes"),
        (["generate", "--prompt", "hi", "--temperature", "nan"], "temperature"),
        (["bench", "--prompts", "x.jsonl", "--repeats", "0"], "--repeats"),
        (["export", "--out", "o", "--max-new-tokens", "-3"], "max_new_tokens"),
        (["corpus", "distill", "--prompts", "0"], "--prompts"),
        (["corpus", "features", "--source", "corpus", "--split", "heldout"], "held-out"),
        (["corpus", "features", "--answers", "greedy"], "--answers"),
        (["corpus", "features", "--max-len", "nan"], "--max-len"),
    ],
)
def test_a_bad_number_is_one_line_before_any_work(argv, says, monkeypatch, capsys):
    from specviz.__main__ import main

    no_model(monkeypatch)
    assert main(argv) == 2
    assert says in one_error_line(capsys)


@pytest.mark.parametrize("argv, says", [(["--shards", "²"], "shard"), (["--batch", "0"], "--batch")])
def test_corpus_options_are_checked_first(argv, says, monkeypatch, capsys):
    """`corpus answer --shards ²` was a traceback (int('²') after '²'.isdigit()); `--batch 0` was unchecked."""
    from specviz.__main__ import main
    from specviz.corpus import answers

    monkeypatch.setattr(answers, "generate", lambda *a, **k: pytest.fail("the corpus run started"))
    assert main(["corpus", "answer", *argv]) == 2
    assert says in one_error_line(capsys)


def test_doctor_refuses_zero_repeats_before_its_runs(monkeypatch, capsys):
    """`doctor --repeats 0` failed only after its identity runs and latency curve."""
    from specviz.tuning import doctor

    monkeypatch.setattr(doctor, "run", lambda *a, **k: pytest.fail("the doctor ran"))
    assert doctor.main(["--repeats", "0"]) == 2
    assert "--repeats" in one_error_line(capsys)


def test_medusa_heads_dir_random_is_refused():
    """EAGLE's head='random' is an untrained head; Medusa's heads_dir='random' read ./random."""
    from specviz import methods

    with pytest.raises(ConfigError, match="random"):
        methods.make_config("medusa", {"heads_dir": "random"})
    with pytest.raises(ConfigError, match="random"):
        methods.make_config("hydra", {"heads_dir": "random"})


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_heads_whose_weights_are_not_finite_are_refused(tmp_path, bad):
    """Head loading had no finiteness check: a NaN head (trained with --lr inf) loaded and drafted token 0."""
    from specviz.heads.eagle import KIND, HeadError
    from specviz.heads.files import read_weights

    weights = {"fc.weight": torch.ones(4, 4), "layer.bias": torch.tensor([0.0, bad])}
    save_file(weights, str(tmp_path / "w.safetensors"))
    with pytest.raises(HeadError, match="not finite") as err:
        read_weights(tmp_path / "w.safetensors", KIND)
    assert "\n" not in str(err.value)
    save_file({"fc.weight": torch.ones(4, 4)}, str(tmp_path / "ok.safetensors"))
    assert read_weights(tmp_path / "ok.safetensors", KIND)["fc.weight"].sum() == 16
