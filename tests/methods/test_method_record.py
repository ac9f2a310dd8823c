"""A method is its file and declares itself once: every registered method module writes its four phases, its card
is whole and unique, the tables of methods are its cards', and a method added from outside (the run-on fixture,
tests/fixture_method.py) keeps the identity contract through the same record."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
import textwrap
from dataclasses import fields
from types import ModuleType

import pytest

from specviz import methods
from specviz.core.details import detail_for
from specviz.methods.base import PHASES, settled
from specviz.methods.speculator import Speculator
from tests import fixture_method
from tests.methods import test_contract as contract
from tests.project.test_layers import ROOT, contracts


@pytest.fixture
def runon():
    """The fixture method, registered through its card for one test."""
    methods.register("tests.fixture_method")
    yield fixture_method.CARD.name
    methods.unregister(fixture_method.CARD.name)


def phases_in(module) -> list[str]:
    """The phases a module's source times (`….phase("name")`), in the order they are written; for a method whose
    step is a shared speculator's (the tree methods': methods.speculator.TreeSpeculator.step), that step's."""
    sources = [inspect.getsource(module)]
    for obj in vars(module).values():
        ours = isinstance(obj, type) and obj.__module__ == module.__name__ and issubclass(obj, Speculator)
        if ours and inspect.getmodule(obj.step) is not module:
            sources.append(textwrap.dedent(inspect.getsource(obj.step)))
    return [name for source in sources for name in _timed(source)]


def _timed(source: str) -> list[str]:
    calls = [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
    named = [
        (c.lineno, str(c.args[0].value))
        for c in calls
        if isinstance(c.func, ast.Attribute) and c.func.attr == "phase" and c.args
        if isinstance(c.args[0], ast.Constant)
    ]
    return [name for _, name in sorted(named)]


def test_every_registered_method_module_writes_its_four_phases_in_order(runon):
    for name in methods.available():
        written = phases_in(methods.get(name))
        assert set(written) == set(PHASES), (name, written)
        first = [written.index(p) for p in PHASES]
        assert first == sorted(first), f"{name}'s phases are written out of order: {written}"


def test_every_card_is_whole_and_its_own(runon):
    cards = methods.cards()
    assert [c.name for c in cards] == methods.available() and cards[0].name == "ar"
    for field in ("name", "label", "colour", "order"):
        values = [getattr(c, field) for c in cards]
        assert len(set(values)) == len(values), f"two methods share a {field}: {values}"
    for c in cards:
        assert methods.get(c.name).CARD is c  # the card is the one record of its names
        module = methods.get(c.name).__name__
        assert module == f"specviz.methods.{c.name}" or c.name == runon, f"{c.name} lives in {module}"  # one name
        assert c.name == "ar" or detail_for(c.name) is not None, f"{c.name} records no step detail"
        assert not c.head or (c.models is not None and c.head_label), c
        assert not c.held_out or c.head, c


def test_the_tables_of_methods_are_the_cards():
    from specviz.output.viz import theme
    from specviz.training.kinds import TRAINERS
    from specviz.tuning.learning import KIND_NAMES

    cards = methods.cards()
    assert [theme.method_color(c.name) for c in cards] == [c.colour for c in cards]
    heads = {c.head for c in cards if c.head}
    assert set(KIND_NAMES) == heads and heads <= set(TRAINERS), (heads, set(TRAINERS))  # every head has a trainer
    assert {n: methods.get(n).__name__ for n in methods.available()} == methods.MODULES
    # no method imports another sideways: a composition sits a layer above the methods it composes, a method that
    # extends another's file a layer above the one it extends; each layer's methods are kept apart ("|")
    composed = {c.name for c in cards if c.composes}
    builders = {c.name for c in cards if c.builds_on}
    single = set(methods.available()) - composed - builders
    assert composed and all(set(c.composes) <= single for c in cards)
    assert builders and all(c.builds_on in single for c in cards if c.builds_on)
    inside = next(c["layers"] for c in contracts() if c.get("containers") == ["specviz.methods"])
    short = {n: methods.MODULES[n].rpartition(".")[2] for n in methods.available()}
    for layer, names in zip(inside[1:4], (composed, builders, single), strict=True):
        assert sorted(layer.replace("|", ":").replace(" ", "").split(":")) == sorted(short[n] for n in names)


def test_the_cards_fields_name_real_settings():
    """What a card declares for the tables derived from it holds: its preset fields are its Config's (and the Config
    says how many tokens a forward verifies), its batched step is one batched decoding has, and a confidence table
    belongs to a trained EAGLE-family head."""
    from specviz.methods.eagle import Config as EagleConfig

    for c in methods.cards():
        cfg = methods.get(c.name).Config()
        assert set(c.preset_fields) <= {f.name for f in fields(cfg)}, c
        assert not c.preset_fields or settled(cfg).forward_tokens > 1, c
        assert c.batched in ("", "chain", "eagle"), c
        assert not c.confidence or (isinstance(cfg, EagleConfig) and c.head), c


def test_every_step_record_lives_in_core_details():
    """A trace finds its method's record without importing any method: every record is defined in core.details
    (plain decoding records none), and loading one in a fresh interpreter leaves specviz.methods unimported."""
    recorded = {name: detail_for(name) for name in methods.available() if name != "ar"}
    assert all(t is not None and t.__module__ == "specviz.core.details" for t in recorded.values()), recorded
    assert detail_for("no-such-method") is None
    probe = "import sys; from specviz.core.details import detail_for as f; "
    probe += "assert [f(m).__name__ for m in ('hydra', 'eagle3', 'hybrid')] == ['HydraDetail', 'Eagle3Detail', "
    probe += "'HybridDetail'] and 'specviz.methods' not in sys.modules"
    subprocess.run([sys.executable, "-c", probe], check=True, cwd=ROOT)


def test_the_fixture_method_is_registered_through_its_card_alone(runon):
    assert runon in methods.available() and methods.card(runon) is fixture_method.CARD
    assert methods.available()[-1] == runon  # its order puts it last
    from specviz.output.viz import theme

    assert theme.method_colors()[runon] == fixture_method.CARD.colour
    with pytest.raises(ValueError, match="registered already"):
        methods.register(_copy_of_the_fixture())


def _copy_of_the_fixture() -> ModuleType:
    """Another module whose card claims the fixture's name."""
    module = ModuleType("runon_copy")
    module.CARD = fixture_method.CARD  # type: ignore[attr-defined]
    return module


def test_the_fixture_method_keeps_the_identity_contract(runon, sticky, sticky_prompt):
    """tests/methods/test_contract.py's checks, on the method registered from outside the package: greedy identity with
    drafts accepted, a trace that round-trips and adds up, its figures."""
    plain = contract._ar(sticky, sticky_prompt, contract.GREEDY)
    runs = {"ar": plain, runon: contract.run(sticky, sticky_prompt, runon)}
    contract.test_greedy_equals_plain_decoding_with_drafts_accepted(runs, runon)
    contract.test_trace_round_trips_and_its_steps_add_up(runs, runon)
    contract.test_figures_build_from_the_trace(runs, runon)


def test_the_contract_bites_on_the_fixture_method_too(runon, sticky, sticky_prompt, monkeypatch):
    """The contract's seeded repeat and its two mutations, on the fixture method."""
    contract.test_seeded_sampling_repeats_exactly(sticky, sticky_prompt, runon)
    want = contract._ar(sticky, sticky_prompt, contract.GREEDY).output_ids
    with monkeypatch.context() as m:  # mutation: a cache that keeps rejected drafts
        contract.keep_rejected_drafts(m)
        assert contract._differs(sticky, sticky_prompt, runon, want)
    contract.shift_drafts_one_position(monkeypatch)  # mutation: drafts verified one position too far
    assert contract._differs(sticky, sticky_prompt, runon, want)


def test_a_method_that_fails_to_import_stops_the_scan_loudly(monkeypatch):
    """A broken method module is never left out without a word (it was kept aside in a BROKEN table): the registry's
    scan stops on it, naming the module and why, so the app's start, the CLI and the tests fail on it."""
    real = methods.importlib.import_module

    def import_module(name: str, *args, **kw):
        if name == "specviz.methods.jacobi":
            raise SyntaxError("invalid syntax (jacobi.py, line 1)")
        return real(name, *args, **kw)

    monkeypatch.setattr(methods.importlib, "import_module", import_module)
    monkeypatch.setattr(methods, "_FOUND", {})
    with pytest.raises(methods.BrokenMethod, match=r"specviz\.methods\.jacobi fails to import: invalid syntax"):
        methods.available()
