"""Whose turn the model is: the live runs on one shared model, in the order they asked, each with its predicted cost.

The app's visitors share one model and one core pair: a run waits for the runs ahead of it to finish. A job (one
page's comparison, one race, one run) takes its turn here before its first run; the runs inside it (compare.run_once)
find the turn their thread holds and ask its `stop` between steps. While it waits, `on_wait` is told in words where
it stands ("waiting for one run, about 40 s"), and `stop` is asked too: a visitor who leaves the queue frees it.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from specviz.core.model import LoadedModel
from specviz.methods.base import ShouldStop, Stopped

POLL_S = 0.25  # how often a waiting job asks `stop` and updates its words
FINISHING_S = 5.0  # what a running job that has outrun its prediction is still counted for


@dataclass(frozen=True)
class Request:
    """What a job asks for: its name in words, its predicted model time (tuning.budget), how it is stopped and told
    where it stands; `wait` False rides without queueing (a run whose result the caller expects cached)."""

    what: str = "a run"
    predicted_s: float = 0.0
    stop: ShouldStop | None = None
    on_wait: Callable[[str], None] | None = None
    wait: bool = True


@dataclass(eq=False)
class Job:
    """A request in line: the thread that holds it, and when its turn came (None while it waits)."""

    request: Request
    thread: int = field(default_factory=threading.get_ident)
    started: float | None = None

    def left_s(self, now: float) -> float:
        """Its predicted model time still to run: all of it while it waits, at least FINISHING_S once running."""
        if self.started is None:
            return self.request.predicted_s
        return max(FINISHING_S, self.request.predicted_s - (now - self.started))


def waiting_words(ahead: list[float]) -> str:
    """'waiting for one run, about 40 s' from the seconds each job ahead still needs; '' with none ahead."""
    if not ahead:
        return ""
    runs = "one run" if len(ahead) == 1 else f"{len(ahead)} runs"
    return f"waiting for {runs}, about {duration(sum(ahead))}"


def duration(seconds: float) -> str:
    """'40 s', '2 min 10 s', '3 min': rounded as a person would say it."""
    s = max(1, round(seconds))
    if s < 60:
        return f"{s} s"
    m, rest = divmod(10 * round(s / 10), 60)
    return f"{m} min {rest} s" if rest else f"{m} min"


class Turns:
    """The jobs on one model in arrival order: the first runs, the rest wait (riders, wait=False, stay out of line)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._line: list[Job] = []
        self._riders: list[Job] = []

    def held(self) -> Job | None:
        """The job this thread holds (running or riding), if any."""
        me = threading.get_ident()
        with self._cond:
            return next((j for j in self._line + self._riders if j.thread == me and j.started is not None), None)

    def words(self, job: Job) -> str:
        """Where `job` stands in line, in words ('' once it is first)."""
        now = time.monotonic()
        with self._cond:
            ahead = self._line[: self._line.index(job)] if job in self._line else []
            return waiting_words([j.left_s(now) for j in ahead])

    def busy(self) -> str:
        """What the model is doing for the visitors, in words ('' when nothing is running or waiting)."""
        now = time.monotonic()
        with self._cond:
            return waiting_words([j.left_s(now) for j in self._line]).removeprefix("waiting for ")

    @contextmanager
    def turn(self, request: Request) -> Iterator[Job]:
        """Hold the model's turn for one job: wait in line (asking `stop`, telling `on_wait`), then run; a thread
        already holding a turn runs on in it (a comparison's runs, a race's lanes)."""
        held = self.held()
        if held is not None:
            yield held
            return
        job = Job(request)
        with self._cond:
            (self._line if request.wait else self._riders).append(job)
        try:
            self._wait(job)
            yield job
        finally:
            with self._cond:
                (self._line if job in self._line else self._riders).remove(job)
                self._cond.notify_all()

    def _wait(self, job: Job) -> None:
        """Until `job` is first in line: its words to on_wait when they change; Stopped when stop says so."""
        said, ask = "", job.request
        while True:
            with self._cond:
                if not ask.wait or self._line[0] is job:
                    job.started = time.monotonic()
                    break
            words = self.words(job)
            if ask.on_wait is not None and words != said:
                ask.on_wait(words)
                said = words
            if ask.stop is not None and ask.stop():
                raise Stopped(f"{ask.what} left the queue before its turn")
            with self._cond:
                self._cond.wait(POLL_S)
        if said and ask.on_wait is not None:
            ask.on_wait("")  # its turn: the words go


_TURNS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # lm.lock -> Turns (a model's line lives as it does)
_GUARD = threading.Lock()


def of(lm: LoadedModel) -> Turns:
    """The line of jobs on `lm` (one per loaded model, shared by every session)."""
    with _GUARD:
        got = _TURNS.get(lm.lock)
        if got is None:
            got = _TURNS[lm.lock] = Turns()
        return got


def turn(lm: LoadedModel, request: Request | None = None):
    """`of(lm).turn(request)`: hold `lm`'s turn for one job (a default request when none)."""
    return of(lm).turn(request or Request())


def stop_of(lm: LoadedModel) -> ShouldStop | None:
    """The `stop` of the job this thread holds on `lm`: what its runs ask between steps."""
    job = of(lm).held()
    return job.request.stop if job is not None else None


def occupied(lm: LoadedModel) -> bool:
    """Whether something holds `lm` now (a visitor's run, a measurement): what only reads does not wait for it."""
    return lm.lock.locked()
