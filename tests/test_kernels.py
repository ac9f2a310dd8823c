"""oneDNN-prepacked linears: same numbers as nn.Linear, same greedy tokens, on by default on a CPU."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from specviz.methods import autoregressive
from specviz.model import LoadedModel, PackedLinear, can_pack, pack_linears
from specviz.sampling import Sampling

pytestmark = pytest.mark.skipif(not can_pack(torch.device("cpu"), torch.float32),
                                reason="this torch build has no oneDNN linear")


@pytest.mark.parametrize("rows", [1, 2, 3, 4, 7, 16])
@pytest.mark.parametrize("bias", [False, True])
def test_packed_linear_matches_nn_linear(rows, bias):
    torch.manual_seed(rows)
    lin = nn.Linear(96, 160, bias=bias).eval()
    packed = PackedLinear(lin, keep_weight=False)
    x = torch.randn(1, rows, 96)
    with torch.inference_mode():
        want, got = lin(x), packed(x)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert packed.weight is None  # the dense copy is dropped; only the packed one stays


def test_packed_head_keeps_the_tied_weight_readable(tokenizer):
    from tests.conftest import make_tiny

    lm = make_tiny(tokenizer)
    lm.hf.to(torch.float32)
    n = pack_linears(lm.hf)
    assert n == 2 * 7 + 1  # q k v o gate up down per layer, and the LM head
    head = lm.hf.get_output_embeddings()
    assert isinstance(head, PackedLinear)
    assert head.weight.data_ptr() == lm.hf.model.embed_tokens.weight.data_ptr()


def test_packed_model_decodes_the_same_tokens(tokenizer):
    """Greedy plain decoding on a tiny fp32 model is unchanged by packing its linears."""
    from tests.conftest import make_tiny

    def run(lm: LoadedModel) -> list[int]:
        ids = lm.encode_prompt("Count from one to ten.")
        return autoregressive.generate(lm, ids, Sampling(max_new_tokens=24)).output_ids

    plain = make_tiny(tokenizer, seed=3)
    plain.hf.to(torch.float32)
    packed = make_tiny(tokenizer, seed=3)
    packed.hf.to(torch.float32)
    pack_linears(packed.hf)
    assert run(packed) == run(plain)


def test_real_model_uses_onednn_by_default(real_lm):
    assert real_lm.kernels == "onednn"
    assert real_lm.describe().endswith("· onednn")


def test_environment_picks_kernels_unless_the_caller_does(monkeypatch):
    from specviz.model import load_model

    monkeypatch.setenv("SPECVIZ_KERNELS", "aten")
    assert load_model("default", device="cpu", dtype="fp32", progress=lambda _m: None).kernels == "aten"
    explicit = load_model("default", device="cpu", dtype="fp32", progress=lambda _m: None, kernels="onednn")
    assert explicit.kernels == "onednn"
