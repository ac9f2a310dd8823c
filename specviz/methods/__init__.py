"""The decoding methods. Each module has NAME, LABEL, SUMMARY, a frozen `Config` and `generate()`.

`generate` builds a `base.Run` and hands its `step(run, root) -> Outcome` to `Run.decode`, the one loop.
A module may also offer `tiny_resources(lm)`: generate keyword arguments (untrained heads, a config that
fits a model of any depth) under which the method runs on a tiny random model, as the contract test does, and
`accepting_resources(lm)`: the same with drafts that are all right on a model whose next token does not depend
on its input (heads that hand the target's own prediction on), for the contract test's acceptance check.
No method module imports another; what two share lives below them, in specviz.trees (tree, walk,
draft_tree, ngram_pool, …) or specviz.core (acceptance, drafting, …), or in base.
"""

from __future__ import annotations

import importlib
import importlib.util
from dataclasses import MISSING, Field, fields
from types import ModuleType

from specviz.core.sampling import ConfigError

# name -> module; modules are imported on first use so one broken method cannot break the rest
MODULES: dict[str, str] = {
    "ar": "specviz.methods.autoregressive",
    "sps": "specviz.methods.speculative",
    "pld": "specviz.methods.prompt_lookup",
    "medusa": "specviz.methods.medusa",
    "hydra": "specviz.methods.hydra",
    "eagle": "specviz.methods.eagle",
    "jacobi": "specviz.methods.jacobi",
    "lookahead": "specviz.methods.lookahead",
    "hybrid": "specviz.methods.hybrid",
    "eagle3": "specviz.methods.eagle3",
}


class UnknownMethod(ValueError):
    """A method name that specviz does not have."""


def available() -> list[str]:
    """Names of the methods whose modules exist in this checkout."""
    return [name for name, mod in MODULES.items() if importlib.util.find_spec(mod) is not None]


def get(name: str) -> ModuleType:
    """The module implementing method `name`."""
    if name not in available():
        raise UnknownMethod(f"Unknown method {name!r}; choose from {', '.join(available())}.")
    return importlib.import_module(MODULES[name])


def settings(cls: type) -> list[Field]:
    """A Config's fields a person sets, without those holding evidence the caller measured (core.drafting.measured)."""
    return [f for f in fields(cls) if not f.metadata.get("measured")]


def make_config(name: str, overrides: dict[str, str] | None = None):
    """The method's Config with `key=value` strings applied, coerced to each field's default type."""
    cls = get(name).Config
    known = {f.name: f for f in settings(cls)}
    values = {}
    old_names: dict[str, tuple] = getattr(cls, "RENAMED", {})  # core.sampling.renamed: old option names still work
    for given, raw in (overrides or {}).items():
        key = old_names[given][0] if given in old_names else given
        if key not in known:
            choices = ", ".join(known) or "none"
            raise ConfigError(f"Method {name!r} has no option {given!r} (options: {choices}).")
        default = known[key].default if known[key].default is not MISSING else None
        values[given] = _coerce(given, raw, type(default))  # an old name is converted by the Config itself
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
