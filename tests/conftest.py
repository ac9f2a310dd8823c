"""Shared fixtures: a tiny random Llama with the real tokenizer, and the real default model."""

from __future__ import annotations

import pytest
import torch

from specviz.model import LoadedModel, convert_default, load_model


@pytest.fixture(scope="session")
def tokenizer():
    """The real SmolLM2 tokenizer (from the converted cache; converts once if needed)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(convert_default(progress=lambda _m: None))


def make_tiny(tokenizer, seed: int = 0, layers: int = 2) -> LoadedModel:
    """A 2-layer random Llama over the real vocabulary, in float64 so argmax ties cannot flip."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                      num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                      max_position_embeddings=1024, tie_word_embeddings=True, initializer_range=0.2,
                      bos_token_id=1, eos_token_id=2, pad_token_id=2)
    torch.manual_seed(seed)
    hf = LlamaForCausalLM(cfg).to(torch.float64).eval()
    hf.requires_grad_(False)
    hf.config._attn_implementation = "sdpa"
    return LoadedModel(hf=hf, tokenizer=tokenizer, name="tiny-random", device=torch.device("cpu"),
                       dtype=torch.float64)


@pytest.fixture(scope="session")
def tiny_lm(tokenizer) -> LoadedModel:
    return make_tiny(tokenizer)


@pytest.fixture(scope="session")
def real_lm() -> LoadedModel:
    """The built-in SmolLM2-135M-Instruct on the CPU in fp32."""
    return load_model("default", device="cpu", dtype="fp32", progress=lambda _m: None)


PROMPTS = [
    "Write a short poem about autumn leaves.",
    "Explain what a hash table is in two sentences.",
    "List three tips for learning a new language.",
]
