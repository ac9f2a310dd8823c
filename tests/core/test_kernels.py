"""oneDNN-prepacked linears: same numbers as nn.Linear, same greedy tokens, on by default on a CPU."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from specviz.core.kernels import PackedLinear, can_pack, pack_linears
from specviz.core.lean import LeanLlama
from specviz.core.model import LoadedModel
from specviz.core.sampling import Sampling
from specviz.methods import ar

pytestmark = pytest.mark.skipif(
    not can_pack(torch.device("cpu"), torch.float32), reason="this torch build has no oneDNN linear"
)


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
        return ar.generate(lm, ids, Sampling(max_new_tokens=24)).output_ids

    plain = make_tiny(tokenizer, seed=3)
    plain.hf.to(torch.float32)
    packed = make_tiny(tokenizer, seed=3)
    packed.hf.to(torch.float32)
    packed.lean = LeanLlama(packed.hf, pack=True)  # as load_model: the forward reads the weights before packing
    pack_linears(packed.hf)
    assert run(packed) == run(plain)


@pytest.mark.real_model
def test_real_model_uses_onednn_by_default(real_lm):
    assert real_lm.kernels == "onednn"
    assert real_lm.describe().endswith("· onednn")


@pytest.mark.real_model  # loads the real model twice
def test_environment_picks_kernels_unless_the_caller_does(monkeypatch):
    from specviz.core.model import load_model

    monkeypatch.setenv("SPECVIZ_KERNELS", "aten")
    assert load_model("default", device="cpu", dtype="fp32", progress=lambda _m: None).kernels == "aten"
    explicit = load_model("default", device="cpu", dtype="fp32", progress=lambda _m: None, kernels="onednn")
    assert explicit.kernels == "onednn"


def test_medusa_topk_through_the_packed_projection_matches_the_plain_product(tokenizer):
    """The heads' inference path (prepacked draft-vocab projection) ranks and scores as the plain matmul."""
    from specviz.heads.medusa import HeadsConfig, MedusaHeads
    from tests.conftest import make_tiny

    lm = make_tiny(tokenizer)
    lm.hf.to(torch.float32)
    vocab = torch.arange(0, lm.hf.config.vocab_size, 3)
    heads = MedusaHeads(
        HeadsConfig(num_heads=3, hidden_size=lm.hf.config.hidden_size, layers=1), vocab, lm.lm_head.weight.float()
    ).eval()
    torch.manual_seed(0)
    for blk in heads.blocks:
        torch.nn.init.normal_(blk[0].linear.weight, std=0.2)
    h = torch.randn(lm.hf.config.hidden_size)
    ids, probs = heads.topk(h, 5)
    assert isinstance(heads._packed, PackedLinear)
    with torch.inference_mode():
        want = torch.softmax(heads(h), dim=-1).topk(5, dim=-1)
    torch.testing.assert_close(probs, want.values, rtol=1e-5, atol=1e-6)
    assert torch.equal(ids, vocab[want.indices])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_eagle_fast_head_is_a_packed_copy_that_drafts_the_same(tokenizer, dtype):
    """The drafter's packed copy gives the head's own outputs; the trained head is left untouched."""
    from specviz.heads.eagle import EagleHead, new_head
    from specviz.heads.eagle_drafter import fast_head
    from tests.conftest import make_tiny

    if not can_pack(torch.device("cpu"), dtype):
        pytest.skip("no oneDNN kernels for this dtype on this CPU")
    lm = make_tiny(tokenizer)
    lm.hf.to(torch.float32)
    head = new_head(lm.hf.config, "tiny").eval()
    fast, project = fast_head(head, lm.lm_head, dtype)
    assert fast is not head and isinstance(fast.fc, PackedLinear) and isinstance(project, PackedLinear)
    assert type(head.fc) is nn.Linear and head.fc.weight.dtype == torch.float32
    assert fast_head(head, lm.lm_head, dtype)[0] is fast  # made once per head and dtype
    h = lm.hf.config.hidden_size
    feats, embeds = torch.randn(1, 3, h), torch.randn(1, 3, h)
    pos = torch.arange(3)[None]
    mask = torch.zeros(1, 1, 3, 3).masked_fill_(~torch.ones(3, 3, dtype=torch.bool).tril(), float("-inf"))
    with torch.inference_mode():
        want = EagleHead.forward(head, feats, embeds, pos, None, mask)
        got = fast(feats.to(dtype), embeds.to(dtype), pos, None, mask.to(dtype)).float()
        logits = project(got.to(dtype)).float()
    tol = 1e-4 if dtype == torch.float32 else 6e-2
    torch.testing.assert_close(got, want, rtol=tol, atol=tol)
    torch.testing.assert_close(logits, got.to(dtype).float() @ lm.lm_head.weight.float().T, rtol=tol, atol=tol)


def test_eagle_fast_head_without_onednn_leaves_the_shared_head_as_it_is(tokenizer, monkeypatch):
    """Where nothing can be packed (float64 here; a GPU alike) a head in the draft dtype drafts as it is; any other
    gets a fresh copy in that dtype (never cached stale), and the head every session shares is never cast."""
    import specviz.heads.eagle_drafter as drafter
    from specviz.heads.eagle import new_head
    from specviz.heads.eagle_drafter import fast_head
    from tests.conftest import make_tiny

    lm = make_tiny(tokenizer)
    lm.hf.to(torch.float64)
    head = new_head(lm.hf.config, "tiny").eval()
    fast, project = fast_head(head, lm.lm_head, torch.float64)
    assert fast is not head and fast.fc.weight.dtype == torch.float64 and head.fc.weight.dtype == torch.float32
    assert fast_head(head, lm.lm_head, torch.float64)[0] is not fast  # a fresh copy each time: never stale
    assert type(project) is nn.Linear and project.weight.dtype == torch.float64
    assert project.weight.shape == lm.lm_head.weight.shape
    assert fast_head(fast, lm.lm_head, torch.float64)[0] is fast  # already in the draft dtype: the head itself
    monkeypatch.setattr(drafter, "can_pack", lambda *_a: False)  # a GPU: bf16 drafting from a shared fp32 head
    bf16, _ = fast_head(head, lm.lm_head.to(torch.float32), torch.bfloat16)
    assert bf16.fc.weight.dtype == torch.bfloat16 and head.fc.weight.dtype == torch.float32


def test_casting_the_eagle_head_keeps_rope_frequencies_in_fp32(tokenizer):
    """bf16 would round RoPE's inv_freq (up to 2.8 rad of angle at distance 2048); every cast keeps it fp32."""
    from specviz.heads.eagle import new_head
    from specviz.heads.eagle3 import new_head as new_head3
    from tests.conftest import make_tiny

    lm = make_tiny(tokenizer)
    for head in (new_head(lm.hf.config, "tiny"), new_head3(lm.hf.config, "tiny", layers=(0, 1))):
        exact = head.rotary.inv_freq.clone()
        assert exact.dtype == torch.float32
        for cast in (lambda h: h.to(torch.bfloat16), lambda h: h.half(), lambda h: h.to("cpu", torch.float64)):
            cast(head)
            assert head.rotary.inv_freq.dtype == torch.float32 and torch.equal(head.rotary.inv_freq, exact)
            assert head.rotary.original_inv_freq.dtype == torch.float32
        assert head.fc.weight.dtype == torch.float64  # the weights did follow the last cast
