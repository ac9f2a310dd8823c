"""Plain-data traces: one StepTrace per target forward pass, a Trace per generation, JSON round-trip."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, TypeVar

from specviz.core import measure
from specviz.core.details import Detail, DetailError, detail_for
from specviz.core.schema import MAX_TRACE_IDS as MAX_TRACE_IDS  # a trace's ids: prompt, output, steps
from specviz.core.schema import SchemaError, check_object, check_size, trace_schema

D = TypeVar("D", bound=Detail)

TRACE_FORMAT = "specviz-trace/2"  # 2: typed step phases and per-method detail dataclasses
OLDER_FORMATS = ("specviz-trace/1",)
OLD_CONFIG_KEYS = ("max_new_tokens", "temperature", "top_p", "seed")  # config's top level, before "sampling" held them
MAX_TRACE_BYTES = 8 << 20  # a file of traces: every method's 512 tokens in one bundle take about 8 MB


class TraceError(ValueError):
    """A trace file that is corrupt, foreign, or from an incompatible version."""


@dataclass(frozen=True)
class Alt:
    """One alternative token of a distribution."""

    id: int
    text: str
    prob: float


@dataclass(frozen=True)
class StepTrace:
    """One method step: propose → verify (one target forward) → accept → commit.

    The phases are typed fields named as methods.base.PHASES; `detail` is the method's own record (a
    `specviz.core.details` dataclass, chosen by its method), or None for a step without a forward pass.
    """

    index: int
    committed: list[int]  # token ids committed this step: the root plus the accepted drafts
    texts: list[str]  # their decoded text
    forward_tokens: int  # tokens verified by this step's one target forward pass (0: none ran)
    propose_s: float  # wall time spent proposing (next to nothing for plain decoding, which drafts nothing)
    verify_s: float  # wall time of the target forward pass
    wall_s: float  # the whole step, root pick included; records and figure data are built after it
    prob: float  # target probability of the first committed token
    entropy: float  # entropy (nats) of the target distribution at the first committed position
    proposed: int = 0  # draft tokens proposed after the root (0 for plain decoding)
    accept_s: float = 0.0  # wall time judging the drafts against the target (the acceptance rule)
    commit_s: float = 0.0  # wall time fixing the KV cache(s) after acceptance
    root_from: str = "target"  # where the root came from: target (pending logits), residual or bonus
    top: list[Alt] = field(default_factory=list)  # top-5 of that distribution
    detail: Detail | None = None

    @property
    def accepted(self) -> int:
        """Tokens committed by this step (A for one step; the root counts)."""
        return len(self.committed)

    @property
    def drafts_accepted(self) -> int:
        """Proposed tokens that were accepted (the root excluded)."""
        return len(self.committed) - 1

    def detail_as(self, kind: type[D]) -> D:
        """This step's detail as a `kind`; TypeError when it has none or is another method's."""
        if not isinstance(self.detail, kind):
            raise TypeError(f"Step {self.index} has no {kind.__name__} detail (it has {type(self.detail).__name__}).")
        return self.detail


@dataclass(frozen=True)
class Trace:
    """A whole generation by one method on one prompt."""

    method: str
    model: str
    device: str
    prompt: str
    prompt_ids: list[int]
    config: dict[str, Any]  # sampling settings plus the method's own settings
    steps: list[StepTrace]
    output_ids: list[int]
    text: str
    total_s: float
    prefill_s: float  # the prompt's forward pass (time to first token = prefill_s + first step)
    stopped: str  # "eos" or "length"
    format: str = TRACE_FORMAT

    @property
    def new_tokens(self) -> int:
        return len(self.output_ids)

    @property
    def drafted_steps(self) -> list[StepTrace]:
        """The steps that recorded a detail (drafted and verified something): the ones a step figure can draw."""
        return [s for s in self.steps if s.detail is not None]

    def detailed(self, kind: type[D]) -> list[tuple[StepTrace, D]]:
        """(step, its detail) for every step whose detail is a `kind`, in order (steps without one skipped)."""
        return [(s, s.detail) for s in self.steps if isinstance(s.detail, kind)]

    @property
    def mean_accepted(self) -> float:
        """A: new tokens per target forward pass after the prefill (specviz.core.measure.mean_accepted)."""
        return measure.mean_accepted(self)

    @property
    def forward_steps(self) -> int:
        """Target forward passes after the prefill (a final step that runs none does not count)."""
        return measure.forward_steps(self)

    @property
    def decode_s(self) -> float:
        """Wall time of the decoding steps, prefill excluded (specviz.core.measure.decode_s)."""
        return measure.decode_s(self)

    @property
    def generation_s(self) -> float:
        """End-to-end generation time, the prefill and every step: what a speedup divides."""
        return measure.generation_s(self)

    @property
    def s_per_token(self) -> float:
        """Decoding wall seconds per new token."""
        return self.decode_s / max(1, self.new_tokens)

    @property
    def mean_step_s(self) -> float:
        """Mean wall time of one target step (specviz.core.measure.step_s): the r of a method over plain decoding's."""
        return measure.step_s(self)

    @property
    def tokens_per_s(self) -> float:
        """New tokens per second of generation time (prefill and steps)."""
        g = self.generation_s
        return self.new_tokens / g if g > 0 else 0.0

    @property
    def ttft_s(self) -> float:
        """Time to first token: prefill plus the first step (specviz.core.measure.ttft_s)."""
        return measure.ttft_s(self)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent, ensure_ascii=False, allow_nan=False)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(self.to_json(), encoding="utf-8")

    @classmethod
    def from_dict(cls, data: Any, vocab: int | None = None) -> Trace:
        """Validate and rebuild a trace (token ids below `vocab` when given); TraceError with one sentence."""
        if not isinstance(data, dict):
            raise TraceError("This is not a specviz trace: the top level is not a JSON object.")
        fmt = data.get("format")
        if fmt != TRACE_FORMAT and not (isinstance(fmt, str) and fmt in OLDER_FORMATS):
            shown = fmt if isinstance(fmt, str) and len(fmt) < 40 else type(fmt).__name__
            raise TraceError(f"This is not a specviz trace (format {shown!r}, expected {TRACE_FORMAT!r}).")
        try:
            check_size(data, "The trace")
            if why := _older(data):
                raise TraceError(
                    f"This trace comes from an older version of specviz ({why}; this version reads "
                    f"{TRACE_FORMAT!r} as it is saved today): run it again to replay it."
                )
            check_object(data, trace_schema(vocab), "The trace")
        except SchemaError as exc:
            raise TraceError(str(exc)) from None
        detail = detail_for(data["method"])
        steps = [_step_from_dict(s, detail) for s in data["steps"]]
        kw = {f.name: data[f.name] for f in fields(cls) if f.name != "steps"}
        trace = cls(steps=steps, **kw)
        _check_trace(trace)
        return trace

    @classmethod
    def from_json(cls, text: str | bytes, vocab: int | None = None) -> Trace:
        return cls.from_dict(_parse(text, "The trace"), vocab)

    @classmethod
    def load(cls, path: str | Path) -> Trace:
        return cls.from_json(read_file(path))


def _older(data: dict) -> str | None:
    """How a trace saved by an earlier specviz differs from today's layout (read no more: the committed traces were
    migrated once), or None: the format 1, a step's propose time as draft_s, the sampling keys outside config's."""
    if data.get("format") in OLDER_FORMATS:
        return f"format {data['format']!r}"
    steps, config = data.get("steps"), data.get("config")
    if isinstance(steps, list) and any(isinstance(s, dict) and "draft_s" in s for s in steps):
        return "its steps time the propose phase as draft_s"
    if isinstance(config, dict) and "sampling" not in config and set(config) & set(OLD_CONFIG_KEYS):
        return "its config holds the sampling settings beside the method's, not under 'sampling'"
    return None


def _step_from_dict(d: dict, detail: type[Detail] | None) -> StepTrace:
    top = [Alt(a["id"], a["text"], a["prob"]) for a in d.get("top", [])]
    names = {f.name for f in fields(StepTrace)} - {"top", "detail"}
    raw = d.get("detail")
    if raw is not None and detail is None:
        raise TraceError("A step of the trace has a detail, but its method records none.")
    try:
        rebuilt = None if raw is None or detail is None else detail.from_json(raw)
    except DetailError as exc:
        raise TraceError(f"Step {d['index']} of the trace: {exc}") from None
    return StepTrace(top=top, detail=rebuilt, **{k: d[k] for k in names if k in d})


def _check_trace(t: Trace) -> None:
    """Cheap consistency checks, so a hand-edited file fails here rather than in a chart."""
    committed = [tok for s in t.steps for tok in s.committed]
    if committed != list(t.output_ids):
        raise TraceError("The trace is inconsistent: its steps do not add up to its output tokens.")
    if not all(math.isfinite(v) and v >= 0 for v in (t.total_s, t.prefill_s)):
        raise TraceError(f"The trace has an invalid number of seconds ({t.total_s!r}, {t.prefill_s!r}).")
    before = 0
    for i, s in enumerate(t.steps):
        why = "its index is not its position" if s.index != i else _placed(s, before)
        if why:
            raise TraceError(f"Step {i} of the trace is inconsistent: {why}.")
        before += len(s.committed)
        phases = (s.propose_s, s.verify_s, s.accept_s, s.commit_s)
        for v in (*phases, s.wall_s, s.prob, s.entropy, *(a.prob for a in s.top)):
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
                raise TraceError(f"Step {s.index} of the trace has an invalid number ({v!r}).")


def _placed(s: StepTrace, before: int) -> str | None:
    """Why a step does not fit where it stands (after `before` output tokens), or None."""
    if len(s.texts) != len(s.committed):
        return "it has a text for each of a different number of tokens"
    return s.detail.placed(before) if s.detail is not None else None


BUNDLE_FORMAT = "specviz-bundle/1"
MAX_BUNDLE = 64  # traces in one bundle (a page's runs: every method, a few repeats)


def bundle_json(traces: list[Trace]) -> str:
    """Several traces (e.g. every method on one prompt) in one JSON file."""
    return json.dumps(
        {"format": BUNDLE_FORMAT, "traces": [t.to_dict() for t in traces]}, ensure_ascii=False, allow_nan=False
    )


def load_traces(text: str | bytes, vocab: int | None = None) -> list[Trace]:
    """Traces from a file holding either one trace or a bundle; TraceError when it is neither."""
    data = _parse(text, "The file")
    if isinstance(data, dict) and data.get("format") == BUNDLE_FORMAT:
        items = data.get("traces")
        if not isinstance(items, list) or not items:
            raise TraceError("The bundle holds no traces.")
        if len(items) > MAX_BUNDLE:
            raise TraceError(f"The bundle holds {len(items)} traces; at most {MAX_BUNDLE} are read.")
        return [Trace.from_dict(d, vocab) for d in items]
    return [Trace.from_dict(data, vocab)]


def read_file(path: str | Path) -> bytes:
    """A trace file's bytes, its size checked before it is read; TraceError with one sentence."""
    try:
        if Path(path).stat().st_size > MAX_TRACE_BYTES:
            raise TraceError(f"Trace {path} is larger than {MAX_TRACE_BYTES >> 20} MB.")
        return Path(path).read_bytes()
    except OSError as exc:
        raise TraceError(f"Cannot read trace {path}: {exc.strerror}.") from None


def _parse(text: str | bytes, what: str) -> Any:
    """JSON of at most MAX_TRACE_BYTES; TraceError with one sentence otherwise."""
    if len(text) > MAX_TRACE_BYTES:
        raise TraceError(f"{what} is larger than {MAX_TRACE_BYTES >> 20} MB, the most a trace file may be.")
    try:
        return json.loads(text)
    except RecursionError:
        raise TraceError(f"{what} nests too deep to be a trace.") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an integer of too many digits
        raise TraceError(f"{what} is not valid JSON ({str(exc).splitlines()[0][:120]}).") from None
