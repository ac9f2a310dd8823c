"""specviz: accelerated decoding taught with a real model (the library; the app is app.py, ui/ and views/).

The package face wires the one link that runs upward, at run time only: a trace names its method, and a method's
step record may live in the method's own file (Hydra's, EAGLE-3's), so the trace loader (core.details.detail_for)
may ask the method registry to import the methods before it gives up on a name.
"""

from specviz.core import details as _details


def _import_methods(_method: str) -> None:
    from specviz import methods  # importing a method module defines (and registers) its step record

    methods.available()


_details.FINDERS.append(_import_methods)
