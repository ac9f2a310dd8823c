"""The decoding methods. Each module has a CARD (its record: name, label, colour, head…), a frozen `Config` and
`generate()`; the card is the one record of its names (display name, summary), and its code name is the module's.

`generate` builds a `base.Run` and hands its `step(run, root) -> Outcome` to `Run.decode`, the one loop.
A module may also offer `tiny_resources(lm)`: generate keyword arguments (untrained heads, a config that
fits a model of any depth) under which the method runs on a tiny random model, as the contract test does, and
`accepting_resources(lm)`: the same with drafts that are all right on a model whose next token does not depend
on its input (heads that hand the target's own prediction on), for the contract test's acceptance check.
No method imports another sideways; what two share lives below them, in specviz.trees (tree, walk,
draft_tree, ngram_pool, verifier, …) or specviz.core (acceptance, drafting, …), or in base and speculator. A method
that extends another's algorithm imports that file from a layer above it (its card's `builds_on`: Hydra extends
Medusa, EAGLE-3 and the hybrid EAGLE-2), and a composition the methods it is built from (its card's `composes`:
Medusa + Lookahead), from a layer above those (pyproject.toml's contracts).

The registry is found, not written: every module of this package but base, speculator (and batched) is a method,
known by its card; `register` adds one from elsewhere (a test's fixture method). Every table of methods (MODULES
here, the colours, the learning curves' kinds, the calibration) is derived from the cards, so adding
a method touches its own file (DESIGN.md, "Adding a method"). A module that fails to import stops the scan with
BrokenMethod, naming it: a method never disappears from the app, the CLI or the tests without a word.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import MISSING, Field, fields
from types import ModuleType

from specviz.core.sampling import ConfigError
from specviz.methods.base import Card

NOT_METHODS = ("base", "batched", "speculator")  # the package's modules that are not methods
_FOUND: dict[str, ModuleType] = {}  # name -> module, once the package has been scanned
_ADDED: dict[str, ModuleType] = {}  # name -> module registered from outside the package


class UnknownMethod(ValueError):
    """A method name that specviz does not have."""


class BrokenMethod(ImportError):
    """A module of this package that fails to import: said loudly, with the module and why, where it was left out."""


def _scan() -> dict[str, ModuleType]:
    """name -> module of every method, in the cards' order (the package is scanned once)."""
    if not _FOUND:
        for info in pkgutil.iter_modules(__path__):
            if info.name in NOT_METHODS or info.name.startswith("_"):
                continue
            try:
                module = importlib.import_module(f"{__name__}.{info.name}")
            except Exception as exc:  # never silently: the app, the CLI and the tests stop on it
                raise BrokenMethod(f"The method module {__name__}.{info.name} fails to import: {exc}") from exc
            if module.CARD.name != info.name:  # one name per method: the card's, the module's, the CLI's
                raise BrokenMethod(f"The method module {__name__}.{info.name} names itself {module.CARD.name!r}")
            _FOUND[info.name] = module
    every = {**_FOUND, **_ADDED}
    return dict(sorted(every.items(), key=lambda kv: kv[1].CARD.order))


def register(module: str | ModuleType) -> Card:
    """Add a method defined outside this package (its module, or its dotted name); its card says the rest."""
    mod = importlib.import_module(module) if isinstance(module, str) else module
    card = mod.CARD
    if card.name in _scan() and _scan()[card.name] is not mod:
        raise ValueError(f"A method named {card.name!r} is registered already.")
    _ADDED[card.name] = mod
    return card


def unregister(name: str) -> None:
    """Forget a method added by `register`."""
    _ADDED.pop(name, None)


def available() -> list[str]:
    """Names of the methods this checkout has, plain decoding first."""
    return list(_scan())


def cards() -> list[Card]:
    """Every method's card, in order."""
    return [m.CARD for m in _scan().values()]


def card(name: str) -> Card:
    """Method `name`'s card."""
    return get(name).CARD


def get(name: str) -> ModuleType:
    """The module implementing method `name`."""
    found = _scan()
    if name not in found:
        raise UnknownMethod(f"Unknown method {name!r}; choose from {', '.join(found)}.")
    return found[name]


def __getattr__(attr: str) -> dict[str, str]:
    if attr == "MODULES":  # name -> module path, derived from the cards
        return {name: m.__name__ for name, m in _scan().items()}
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


def settings(cls: type) -> list[Field]:
    """A Config's fields a person sets, without those holding evidence the caller measured (core.drafting.measured)."""
    return [f for f in fields(cls) if not f.metadata.get("measured")]


def make_config(name: str, overrides: dict[str, str] | None = None):
    """The method's Config with `key=value` strings applied, coerced to each field's default type."""
    cls = get(name).Config
    known = {f.name: f for f in settings(cls)}
    values = {}
    for given, raw in (overrides or {}).items():
        if given not in known:
            choices = ", ".join(known) or "none"
            raise ConfigError(f"Method {name!r} has no option {given!r} (options: {choices}).")
        default = known[given].default if known[given].default is not MISSING else None
        values[given] = _coerce(given, raw, type(default))
    try:
        return cls(**values)
    except TypeError as exc:
        raise ConfigError(f"Bad options for {name!r}: {exc}.") from None


def _coerce(key: str, raw: str, kind: type):
    if not isinstance(raw, str):
        return raw
    try:
        if kind is bool:
            if raw.lower() not in ("1", "0", "true", "false", "yes", "no"):
                raise ValueError(raw)
            return raw.lower() in ("1", "true", "yes")
        if kind in (int, float):
            return kind(raw)
    except ValueError:
        raise ConfigError(f"Option {key!r} needs a {kind.__name__}, got {raw[:40]!r}.") from None
    return raw
