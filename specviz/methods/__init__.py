"""The decoding methods. Each module has NAME, LABEL, SUMMARY, a frozen `Config` and `generate()`."""

from __future__ import annotations

import importlib
from types import ModuleType

# name -> module; modules are imported on first use so one broken method cannot break the rest
MODULES: dict[str, str] = {
    "ar": "specviz.methods.autoregressive",
    "sps": "specviz.methods.speculative",
    "pld": "specviz.methods.prompt_lookup",
    "medusa": "specviz.methods.medusa",
    "eagle": "specviz.methods.eagle",
    "jacobi": "specviz.methods.jacobi",
    "lookahead": "specviz.methods.lookahead",
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
