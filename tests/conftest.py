"""Shared fixtures: a tiny random Llama with the real tokenizer, the app patched onto one, and the real model."""

from __future__ import annotations

import os
import threading
from dataclasses import replace

import pytest
import torch
from hypothesis import HealthCheck, settings

from specviz.core.kernels import gqa_attention
from specviz.core.model import LoadedModel, Resources, load_model
from specviz.core.model_files import convert_default

# torch's own choice, for the real model, shared among the xdist workers (two workers on two cores: one each)
THREADS = max(1, torch.get_num_threads() // int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
# hypothesis: few examples in the test tiers, 200 under scripts/soak.sh (SPECVIZ_HYPOTHESIS=soak); property tests
# take their settings from the loaded profile (tests/project/test_fuzz.py: FUZZ)
settings.register_profile("tests", max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("soak", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("soak" if os.environ.get("SPECVIZ_HYPOTHESIS") == "soak" else "tests")


def pytest_addoption(parser):
    parser.addoption("--soak", action="store_true", help="also run the soak checks (scripts/soak.sh passes this)")


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """`soak` checks (long statistics, the whole lesson, the load test) run only under --soak, whatever -m says.
    Every AppTest on the tiny app goes to one xdist worker (--dist loadgroup), so the app's cached runs serve
    them all: a page opened again with the same settings draws without running its methods again; so does every
    AppTest on the real model (its probe measured once, on a worker no other measurement shares), and every browser
    check (one server)."""
    for item in items:
        if "tiny_app" in getattr(item, "fixturenames", ()) or "fresh_app" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("app"))
        elif "real_app" in getattr(item, "fixturenames", ()):  # one worker probes the real model once for them
            item.add_marker(pytest.mark.xdist_group("real_app"))
        elif item.get_closest_marker("browser"):  # one worker serves the app once for every browser check
            item.add_marker(pytest.mark.xdist_group("browser"))
    if config.getoption("--soak"):
        return
    skip = pytest.mark.skip(reason="a soak check: scripts/soak.sh runs it")
    for item in items:
        if item.get_closest_marker("soak"):
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def one_torch_thread_from_the_start():
    """One intra-op thread for the session's fixtures too (they are set up before one_torch_thread runs)."""
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(THREADS)


@pytest.fixture(autouse=True)
def one_torch_thread(request):
    """One intra-op thread, except for tests on the real model. The tiny models' tensors gain nothing from a
    second thread, and on a shared 2-core machine the two spin-wait for each other on every op (at a load
    average of 9 the fast tier took 397 s of CPU with two threads, 137 s with one)."""
    want = THREADS if request.node.get_closest_marker("real_model") else 1
    if torch.get_num_threads() != want:
        torch.set_num_threads(want)


@pytest.fixture(scope="session")
def tokenizer():
    """The real SmolLM2 tokenizer (from the converted cache; converts once if needed)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(convert_default(progress=lambda _m: None))


def make_tiny(
    tokenizer,
    seed: int = 0,
    layers: int = 2,
    hidden: int = 64,
    heads: int = 4,
    kv_heads: int = 2,
    dtype: torch.dtype = torch.float64,
    vocab: int | None = None,
) -> LoadedModel:
    """A random Llama over the real vocabulary or its first `vocab` ids; float64 so argmax ties cannot flip."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=vocab or len(tokenizer),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        max_position_embeddings=1024,
        tie_word_embeddings=True,
        initializer_range=0.2,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=2,
    )
    with torch.random.fork_rng(devices=[]):  # weights from `seed`, the global RNG left as it was
        torch.manual_seed(seed)
        hf = LlamaForCausalLM(cfg).to(dtype).eval()
    hf.requires_grad_(False)
    hf.config._attn_implementation = gqa_attention()  # the attention load_model gives the real model
    return LoadedModel(hf=hf, tokenizer=tokenizer, name="tiny-random", device=torch.device("cpu"), dtype=dtype)


def hf_greedy(lm: LoadedModel, ids: list[int], n: int, whole: bool = False) -> list[int]:
    """transformers' own greedy generate (the reference decoder): up to n tokens, stopping at EOS, or exactly n
    whatever they are (`whole`)."""
    with torch.inference_mode():
        out = lm.hf.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones(1, len(ids), dtype=torch.long),
            max_new_tokens=n,
            min_new_tokens=n if whole else None,
            do_sample=False,
            pad_token_id=0 if whole else 2,
        )
    return out[0, len(ids) :].tolist()


@pytest.fixture(scope="session")
def tiny_lm(tokenizer) -> LoadedModel:
    return make_tiny(tokenizer)


@pytest.fixture(scope="session")
def app_lm(tokenizer) -> LoadedModel:
    """A 4-layer random Llama with SmolLM2's widths (576 wide, 9 query and 3 KV heads), so the committed Medusa
    and EAGLE heads load on it and SpS's default draft (layers 0-3) exists; fp32, as the app runs on a CPU."""
    return make_tiny(tokenizer, seed=3, layers=4, hidden=576, heads=9, kv_heads=3, dtype=torch.float32)


@pytest.fixture(scope="session")
def app_cache(tmp_path_factory, app_lm, worker_id):
    """One cache folder for every AppTest of the session, with app_lm's latency probe (2 repeats instead of 5: a real
    curve, as the pages store it; the pages draw it, not test its precision) and its device cost for the fit (8-token
    runs instead of 32). Under xdist they are measured once for the whole run: the first worker measures them into a
    seed folder under a lock, and each worker copies it into a folder of its own (no two processes write one file)."""
    import shutil

    from filelock import FileLock

    folder = tmp_path_factory.mktemp("specviz-cache")
    if worker_id == "master":
        _measure_app_cache(folder, app_lm)
        return folder
    seed = tmp_path_factory.getbasetemp().parent / "specviz-cache-seed"  # this run's; the workers' basetemps are in it
    with FileLock(f"{seed}.lock"):
        if not (seed / "measured").is_file():
            _measure_app_cache(seed, app_lm)
            (seed / "measured").touch()
    shutil.copytree(seed, folder, dirs_exist_ok=True, ignore=shutil.ignore_patterns("measured"))
    return folder


def _measure_app_cache(folder, lm: LoadedModel) -> None:
    from functools import partial

    from specviz.tuning import fit, probe

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPECVIZ_CACHE", str(folder))
        probe.cached_curve(lm, measure=partial(probe.probe_latency, repeats=2))
        mp.setattr(fit, "TOKENS", 8)
        fit.device_cost(lm)


_APP_MODEL: list[str] = [""]  # which model the app's cached runs came from: "tiny" (app_lm) or "real"


def _app_runs_from(kind: str) -> None:
    """Forget the app's cached runs when the model behind them changes (they are keyed by the spec "default")."""
    import ui.resources as resources

    if _APP_MODEL[0] != kind:
        resources.clear()
        _APP_MODEL[0] = kind


@pytest.fixture(autouse=True)
def real_app_runs_are_the_real_models(request):
    if request.node.get_closest_marker("real_model") and "tiny_app" not in request.fixturenames:
        _app_runs_from("real")


@pytest.fixture(scope="session")
def real_cache(tmp_path_factory, real_lm):
    """A cache folder for the real-model AppTests, its latency probe measured once here (2 repeats)."""
    from functools import partial

    from specviz.tuning import probe

    folder = tmp_path_factory.mktemp("specviz-real-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SPECVIZ_CACHE", str(folder))
        probe.cached_curve(real_lm, measure=partial(probe.probe_latency, repeats=2))
    return folder


@pytest.fixture
def real_app(real_lm, monkeypatch, real_cache):
    """AppTest on the real model: the app's loader patched to the session's one `real_lm` (no reloads), its probe
    cache in real_cache (nothing re-probes during the tests), the app's runs kept between real-model tests."""
    import ui.resources as resources

    monkeypatch.setenv("SPECVIZ_CACHE", str(real_cache))
    monkeypatch.setattr(resources, "load_model", lambda spec="default", **_kw: real_lm)
    _app_runs_from("real")
    resources._model.clear()
    yield real_lm


@pytest.fixture
def tiny_app(app_lm, monkeypatch, app_cache):
    """AppTest with the app's model loader patched to `app_lm` (any model spec), and caches in app_cache. Cached runs
    are kept from test to test (they are keyed by method, settings and prompt, and the model is the same): only the
    model entry is cleared, so a page a test opens again draws without running its methods again."""
    import ui.resources as resources

    monkeypatch.setenv("SPECVIZ_CACHE", str(app_cache))  # the latency probe's cache
    monkeypatch.setattr(resources, "load_model", lambda spec="default", **_kw: app_lm)
    _app_runs_from("tiny")
    resources._model.clear()
    yield app_lm


@pytest.fixture
def fresh_app(tiny_app):
    """tiny_app with every cached run forgotten before and after: for tests that watch what a page runs."""
    import ui.resources as resources

    resources.clear()
    yield tiny_app
    resources.clear()


@pytest.fixture(scope="session")
def real_lm() -> LoadedModel:
    """The built-in SmolLM2-135M-Instruct on the CPU in fp32."""
    return load_model("default", device="cpu", dtype="fp32", progress=lambda _m: None)


PROMPTS = [
    "Write a short poem about autumn leaves.",
    "Explain what a hash table is in two sentences.",
    "List three tips for learning a new language.",
]


@pytest.fixture(scope="session")
def peaked(tiny_lm) -> LoadedModel:
    """The tiny model with its output layer scaled 4×: a few likely tokens, so a chi-square test has power."""
    import copy

    hf = copy.deepcopy(tiny_lm.hf)
    with torch.no_grad():
        hf.get_output_embeddings().weight.mul_(4.0)
    return replace(tiny_lm, hf=hf, lock=threading.Lock(), resources=Resources())


STICKY_WORD = 392  # " we": the one token the sticky model favours a little everywhere


@pytest.fixture(scope="session")
def sticky(tokenizer) -> LoadedModel:
    """A tiny float64 Llama over the first 512 ids whose greedy output depends on the context and whose drafts are
    accepted: every embedding (tied to the LM head) is scaled 6×, so the residual stream leans toward the token
    just read and the model tends to repeat it, while the random layers, reading the whole context through
    attention and RoPE, decide when a run breaks and into what (a greedy answer of 40 tokens holds ~20 distinct
    ones). Drafters that guess "the run goes on" (heads, the draft's first layer, the n-gram pool) are right
    inside runs and wrong where the context breaks them, so a cache that keeps a rejected token or a draft placed
    one position off changes the output (tests/methods/test_contract.py proves both)."""
    lm = make_tiny(tokenizer, seed=0, dtype=torch.float64, vocab=512)
    with torch.no_grad():
        weight = lm.hf.get_input_embeddings().weight
        weight.mul_(6.0)
        weight[STICKY_WORD, 0] += 2.0
    return replace(lm, name="tiny-sticky", lock=threading.Lock(), resources=Resources())


@pytest.fixture(scope="session")
def sticky_prompt(sticky) -> list[int]:
    """Token ids P + (sticky's greedy answer to P) + P: an answer prompt lookup can partly copy from the prompt."""
    from specviz import methods
    from specviz.core.sampling import Sampling

    seed = [int(x) for x in torch.randint(3, 512, (12,), generator=torch.Generator().manual_seed(6))]
    p = [*seed, STICKY_WORD, STICKY_WORD, STICKY_WORD, STICKY_WORD]
    answer = methods.get("ar").generate(sticky, p, Sampling(max_new_tokens=40)).output_ids
    return [*p, *answer, *p]


def method_kwargs(name: str, lm: LoadedModel, options: dict | None = None, accepting: bool = True) -> dict:
    """A method's generate keyword arguments on a tiny model: its `accepting_resources` (drafts that can be right:
    heads handing the target's own prediction on) or its `tiny_resources`, its Config changed by `options`."""
    from specviz import methods

    module = methods.get(name)
    hook = (getattr(module, "accepting_resources", None) if accepting else None) or getattr(
        module, "tiny_resources", None
    )
    kw = hook(lm) if hook else {}
    if options:
        kw["config"] = replace(kw.get("config") or module.Config(), **options)
    return kw
