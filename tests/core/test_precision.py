"""fp32 on every device unless asked; a reduced precision, when asked for, is labelled; the label names the GPU."""

from __future__ import annotations

import argparse
from dataclasses import replace

import pytest
import torch

from specviz import __main__ as cli
from specviz.core.model import pick_dtype


@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_fp32_is_the_default_on_every_device(device):
    assert pick_dtype(torch.device(device)) == torch.float32
    assert pick_dtype(torch.device(device), "auto") == torch.float32
    assert pick_dtype(torch.device(device), "bf16") == torch.bfloat16  # only when asked


def test_a_reduced_precision_is_labelled_and_the_default_is_not(tiny_lm):
    assert tiny_lm.precision_note() == "" and replace(tiny_lm, dtype=torch.float32).precision_note() == ""
    note = replace(tiny_lm, dtype=torch.bfloat16).precision_note()
    assert "bf16" in note and "plain decoding" in note
    assert "fp16" in replace(tiny_lm, dtype=torch.float16).precision_note()


def test_the_cli_says_so_when_it_loads_a_reduced_precision(tiny_lm, monkeypatch, capsys):
    import specviz.core.model as model

    monkeypatch.setattr(model, "load_model", lambda *_a, **_kw: replace(tiny_lm, dtype=torch.bfloat16))
    args = argparse.Namespace(model="default", device="cpu", dtype="bf16", kernels="auto")
    cli._load(args)
    assert "bf16, as asked" in capsys.readouterr().err
    monkeypatch.setattr(model, "load_model", lambda *_a, **_kw: tiny_lm)
    cli._load(args)
    assert capsys.readouterr().err == ""


def test_the_device_label_names_the_gpu(tiny_lm, monkeypatch):
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=0: f"NVIDIA H200 #{index}")
    on_gpu = replace(tiny_lm, device=torch.device("cuda", 0), dtype=torch.float32)
    assert on_gpu.describe() == "tiny-random · cuda:0 · NVIDIA H200 #0 · float32"
    assert tiny_lm.describe() == "tiny-random · cpu · float64"
