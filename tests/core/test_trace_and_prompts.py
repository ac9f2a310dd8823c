"""Trace validation and prompt files: corrupt input gives one clear sentence, never a crash."""

from __future__ import annotations

import json

import pytest

from specviz.core.prompts import PromptError, parse_prompt_lines, prepare, read_prompts, select
from specviz.core.sampling import Sampling
from specviz.core.trace import Trace, TraceError
from specviz.methods import ar


@pytest.fixture(scope="module")
def trace(tiny_lm):
    return ar.generate(tiny_lm, tiny_lm.encode_prompt("Hi"), Sampling(max_new_tokens=5))


@pytest.mark.parametrize(
    "text, reason",
    [
        ("not json", "not valid JSON"),
        ("[1, 2]", "not a specviz trace"),
        ('{"format": "other"}', "not a specviz trace"),
        ('{"format": "specviz-trace/2"}', "missing the field"),
        ('{"format": "specviz-trace/1"}', "older version of specviz"),
    ],
)
def test_corrupt_trace_text(text, reason):
    with pytest.raises(TraceError, match=reason):
        Trace.from_json(text)


def test_inconsistent_trace_is_refused(trace):
    data = trace.to_dict()
    data["output_ids"] = data["output_ids"][:-1]
    with pytest.raises(TraceError, match="inconsistent"):
        Trace.from_dict(data)
    data = json.loads(trace.to_json())
    data["steps"][0]["wall_s"] = -1
    with pytest.raises(TraceError, match="invalid number"):
        Trace.from_dict(data)


def test_a_trace_in_an_older_layout_is_refused_with_what_differs(trace):
    """The committed traces were migrated once; an older file is refused in one sentence, not read through a shim."""
    data = json.loads(trace.to_json())
    for step in data["steps"]:
        step["draft_s"] = step.pop("propose_s")  # before the phases had the papers' names
    with pytest.raises(TraceError, match=r"older version of specviz \(its steps time the propose phase as draft_s"):
        Trace.from_dict(data)
    data = json.loads(trace.to_json())
    data["config"] = {**data["config"]["sampling"], **data["config"]["method"]}  # before config held "sampling"
    with pytest.raises(TraceError, match=r"older version of specviz \(its config holds the sampling settings"):
        Trace.from_dict(data)
    data["config"] = {}
    with pytest.raises(TraceError, match="config is missing the field 'sampling'"):
        Trace.from_dict(data)


def test_trace_file_round_trip(trace, tmp_path):
    path = tmp_path / "t.json"
    trace.save(path)
    assert Trace.load(path) == trace
    with pytest.raises(TraceError, match="Cannot read"):
        Trace.load(tmp_path / "missing.json")


def test_prompt_lines_and_selection(tmp_path):
    items = parse_prompt_lines(
        '{"prompt": "a"}\n\n{"turns": ["b", "c"], "category": "x", "question_id": 7}\n'
        '{"turns": ["d"], "category": "x"}\n'
    )
    assert [i.text for i in items] == ["a", "b", "d"]
    assert [i.text for i in select(items, per_category=1)] == ["a", "b"]
    assert [i.text for i in select(items, limit=1)] == ["a"]
    with pytest.raises(PromptError, match="Line 1"):
        parse_prompt_lines('{"nothing": 1}')
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\xff\xfe")
    with pytest.raises(PromptError, match="UTF-8"):
        read_prompts(bad)


def test_prompt_checks(tiny_lm):
    with pytest.raises(PromptError, match="empty"):
        prepare(tiny_lm, "   ")
    with pytest.raises(PromptError, match="limit"):
        prepare(tiny_lm, "word " * 5000)
    assert prepare(tiny_lm, "hello")[-1] != 0


def test_spec_bench_file_reads(tmp_path):
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "shared" / "data" / "spec_bench_question.jsonl"
    if not path.is_file():
        pytest.skip("shared/ is not beside this checkout")
    items = read_prompts(path)
    assert len(items) == 480 and len({i.category for i in items}) == 13
