"""Text a visitor types (Config fields, sampling settings, prompts, CLI flags) is bounded before any work is done."""

from __future__ import annotations

import tracemalloc

import pytest

from specviz import methods
from specviz.core.drafting import parse_layers
from specviz.core.prompts import MAX_PROMPT_CHARS, PromptError, prepare
from specviz.core.sampling import ConfigError, Sampling
from specviz.methods import ar, sps


@pytest.mark.parametrize("spec", ["0-1000000", "0-9999999999", "5-99999999999999999999", "0,1,2,3000000"])
def test_parse_layers_bounds_before_building(spec):
    """'0-3000000' built a 3M-entry set (546 MB) before its check; '0-9999999999' took the process down."""
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match="no valid layer"):
            parse_layers(spec, None)
        with pytest.raises(ConfigError, match="the model has 30"):
            parse_layers(spec, 30)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1 << 20, f"{peak} bytes to refuse {spec!r}"


def test_parse_layers_keeps_valid_specs():
    assert parse_layers("0-3", None) == [0, 1, 2, 3]
    assert parse_layers("0,1,2,29", 30) == [0, 1, 2, 29]
    assert parse_layers(" 2 - 3 , 0 ", 4) == [0, 2, 3]
    with pytest.raises(ConfigError, match="short string"):
        parse_layers("0," * 5000, None)


def test_sps_layers_option_is_bounded_in_the_cli_path():
    with pytest.raises(ConfigError, match="no valid layer"):
        methods.make_config("sps", {"layers": "0-9999999999"})
    with pytest.raises(ConfigError, match="no valid layer"):
        sps.Config(layers="0-9999999999")


@pytest.mark.parametrize(
    "kw, reason",
    [
        ({"temperature": 1e-300}, "temperature"),
        ({"temperature": 0.001}, "temperature"),
        ({"seed": 2**64}, "seed"),
        ({"seed": -1}, "seed"),
        ({"max_new_tokens": 10**9}, "max_new_tokens"),
        ({"max_new_tokens": True}, "max_new_tokens"),
    ],
)
def test_sampling_is_bounded(kw, reason):
    with pytest.raises(ConfigError, match=reason):
        Sampling(**kw)


def test_sampling_keeps_valid_settings():
    s = Sampling(max_new_tokens=512, temperature=0.05, top_p=0.9, seed=2**31 - 1)
    assert (s.max_new_tokens, s.temperature, s.seed) == (512, 0.05, 2**31 - 1) and not s.greedy
    assert Sampling(temperature=0).greedy and Sampling(seed=2**63 - 1).seed == 2**63 - 1


def test_prompt_is_bounded_by_characters_before_tokenising(tiny_lm, monkeypatch):
    calls = []
    monkeypatch.setattr(type(tiny_lm), "encode_prompt", lambda self, text, chat=True: calls.append(text) or [1])
    with pytest.raises(PromptError, match="characters long"):
        prepare(tiny_lm, "word " * MAX_PROMPT_CHARS)
    assert not calls
    assert prepare(tiny_lm, "a" * MAX_PROMPT_CHARS) == [1]


def test_max_new_tokens_is_bounded_by_the_models_context(tiny_lm):
    n = tiny_lm.hf.config.max_position_embeddings  # 1024 for the tiny model
    ids = tiny_lm.encode_prompt("Hi")
    with pytest.raises(ConfigError, match=f"context of {n} tokens"):
        ar.generate(tiny_lm, ids, Sampling(max_new_tokens=n))
    assert ar.generate(tiny_lm, ids, Sampling(max_new_tokens=2)).new_tokens == 2


@pytest.mark.parametrize(
    "args, reason",
    [
        (["--temperature", "1e-300"], "temperature"),
        (["--seed", str(2**64)], "seed"),
        (["--max-new-tokens", "1000"], "context of 1024 tokens"),
        (["--max-new-tokens", str(10**12)], "max_new_tokens"),
        (["--method", "sps", "--opt", "layers=0-9999999999"], "no valid layer"),
        (["--method", "eagle", "--opt", "head=" + "a" * 2000], "folder name"),
        (["--prompt", "x" * (MAX_PROMPT_CHARS + 1)], "characters long"),
    ],
)
def test_cli_refuses_in_one_line(args, reason, capsys, monkeypatch, tiny_lm):
    """Each was a traceback (or a hang, or the process killed); now one line on stderr and exit status 2."""
    import specviz.__main__ as cli_main

    monkeypatch.setattr(cli_main, "_load", lambda a: tiny_lm)
    argv = ["generate", *(["--prompt", "Hi"] if "--prompt" not in args else []), *args]
    code = cli_main.main(argv)
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and len(lines) == 1 and reason in lines[0] and "Traceback" not in err, err[:300]
