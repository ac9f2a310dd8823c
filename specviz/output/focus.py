"""The step a figure puts in focus, chosen by a rule a stop names, never by an index."""

from __future__ import annotations

from collections.abc import Sequence

from specviz.core.trace import StepTrace

STEP_RULES = ("longest", "longest_rejected", "uncertain", "first")  # the default first: the longest accepted path
UNCERTAIN = 1.0  # nats: "uncertain" picks among steps whose target entropy at their first token is at least this


def focus_step(steps: Sequence[StepTrace], rule: str = "longest") -> StepTrace | None:
    """The step to show among `steps` (those a figure can draw): `longest`, the most drafts accepted (the earliest
    of equals); `longest_rejected`, the same among steps where some draft was rejected; `uncertain`, the same among
    steps where the target was unsure of their first token (entropy at least UNCERTAIN); `first`, the first one.
    A rule no step meets falls back to `longest`."""
    if not steps:
        return None
    if rule == "first":
        return steps[0]
    pool = list(steps)
    if rule == "longest_rejected":
        pool = [s for s in steps if s.proposed > s.drafts_accepted]
    elif rule == "uncertain":
        pool = [s for s in steps if s.entropy >= UNCERTAIN]
    return max(pool or steps, key=lambda s: (s.drafts_accepted, -s.index))


def focus_index(steps: Sequence[StepTrace], rule: str = "longest") -> int:
    """The position in `steps` of the step in focus (0 when there is none): where a page's step slider opens."""
    chosen = focus_step(steps, rule)
    return next((i for i, s in enumerate(steps) if s is chosen), 0)


def telling(steps: Sequence[StepTrace]) -> list[StepTrace]:
    """Lookahead's steps that show its branches at work, as viz.lookahead.telling_step ranks them: both its window
    harvesting and its verification branch running, else either; other methods' steps (neither) as they are."""

    def has(s: StepTrace, name: str) -> bool:
        return bool(getattr(s.detail, name, None))

    for want in (lambda s: has(s, "candidates") and has(s, "harvested"), lambda s: has(s, "harvested")):
        if found := [s for s in steps if want(s)]:
            return found
    return list(steps)
