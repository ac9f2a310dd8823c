"""The doctor checks every registered method: its default list is the registry, and its report has a row for each."""

from __future__ import annotations

from specviz import methods
from specviz.tuning import doctor


def test_the_doctor_checks_every_registered_method(monkeypatch, capsys):
    seen: dict[str, list[str]] = {}

    def run(_device, names, *_args):
        seen["names"] = names
        rows = {n: {"identical": 3, "total": 3} for n in names if n != "ar"}
        return {"dtype": {"chosen": "fp32", "identity": {"fp32": rows}}, "bench": {"methods": {}}, "passed": True}

    monkeypatch.setattr(doctor, "run", run)
    assert doctor.main([]) == 0
    assert seen["names"] == methods.available()  # plain decoding first, the reference the others are compared with
    printed = capsys.readouterr().out
    assert all(f"{n} 3/3" in printed for n in methods.available() if n != "ar")
