"""A batched generation as plain data, and its numbers in specviz.core.measure's terms.

Each request of the batch reads as a trace of its own (`BatchTrace.row`): the prefill, then every step it
took part in, with the tokens it committed there. So measure.generation_s of a row is that request's
end-to-end latency (from the start of the shared prefill to its last token), and measure.mean_accepted
its A; the batch's own generation time is the prefill plus every step, and its throughput the new tokens
of all requests over that time.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

from specviz.core import measure


@dataclass(frozen=True)
class BatchStep:
    """One iteration of the batch: the requests in it, what each committed, and the forward it ran."""

    wall_s: float
    rows: list[int]  # request indices (positions in the batch's prompt list)
    committed: list[list[int]]  # the tokens each of them committed
    forward: list[int]  # slots of each in the target forward; 0 = it committed its last root without one
    width: int  # slots per row of the forward (the widest row's); 0 = no forward ran
    slots: int  # the shared slot axis of the target cache after the step (held or masked)


@dataclass(frozen=True)
class RowStep:
    """One step as one request saw it (what specviz.core.measure reads)."""

    committed: list[int]
    forward_tokens: int
    wall_s: float


@dataclass(frozen=True)
class RowTrace:
    """One request of a batch, as a trace: satisfies measure.TraceLike."""

    output_ids: list[int]
    prefill_s: float
    steps: list[RowStep]
    stopped: str

    @property
    def total_s(self) -> float:
        return measure.generation_s(self)


@dataclass(frozen=True)
class BatchTrace:
    """A batch decoded together: every request's output, and every step of the shared loop."""

    method: str
    model: str
    device: str
    config: dict
    max_new_tokens: int
    prompt_ids: list[list[int]]
    outputs: list[list[int]]
    stopped: list[str]
    prefill_s: float
    steps: list[BatchStep] = field(default_factory=list)

    @property
    def batch(self) -> int:
        return len(self.prompt_ids)

    def row(self, i: int) -> RowTrace:
        """Request i's own view: the shared prefill and every step until its last token.

        A step it only waited through (another request's last root, committed without a forward) counts
        for its time and commits nothing, so measure.generation_s of the view is its latency on the batch's
        clock, and measure's A (forward steps only) is untouched by it.
        """
        mine: list[RowStep] = []
        for s in self.steps:
            j = s.rows.index(i) if i in s.rows else -1
            if j < 0 and s.width > 0:
                break  # a forward without it: it has left the batch
            mine.append(RowStep(s.committed[j], s.forward[j], s.wall_s) if j >= 0 else RowStep([], 0, s.wall_s))
        while mine and not mine[-1].committed:  # nothing it waited for after its own last token
            mine.pop()
        return RowTrace(self.outputs[i], self.prefill_s, mine, self.stopped[i])

    def rows(self) -> list[RowTrace]:
        return [self.row(i) for i in range(self.batch)]

    @property
    def generation_s(self) -> float:
        """The batch's end-to-end generation time: the prefill and every step."""
        return self.prefill_s + sum(s.wall_s for s in self.steps)

    @property
    def new_tokens(self) -> int:
        return sum(len(o) for o in self.outputs)

    @property
    def tokens_per_s(self) -> float:
        """Throughput: every request's new tokens over the batch's generation time."""
        return self.new_tokens / max(self.generation_s, 1e-12)

    @property
    def forwards(self) -> int:
        """Target forward passes after the prefill (each runs every row still in the batch)."""
        return sum(1 for s in self.steps if s.width > 0)

    @property
    def step_s(self) -> float:
        """Mean wall time of a step that ran a forward (r's numerator or denominator)."""
        walls = [s.wall_s for s in self.steps if s.width > 0]
        return sum(walls) / max(1, len(walls))

    @property
    def mean_accepted(self) -> float:
        """A over the batch: tokens committed by rows' forward steps over those row-steps (pooled)."""
        return measure.pooled_accepted(self.rows())

    def latencies(self) -> list[float]:
        """Per request, its end-to-end latency (measure.generation_s of its row)."""
        return [measure.generation_s(r) for r in self.rows()]

    def to_json(self) -> str:
        return json.dumps(asdict(self))
