"""The step a figure puts in focus, chosen by a rule a stop names, never by an index."""

from __future__ import annotations

from collections.abc import Sequence

from specviz.core.trace import StepTrace

STEP_RULES = ("longest", "longest_rejected", "first")  # the default first: the step with the longest accepted path


def focus_step(steps: Sequence[StepTrace], rule: str = "longest") -> StepTrace | None:
    """The step to show among `steps` (those a figure can draw): `longest`, the most drafts accepted (the earliest
    of equals); `longest_rejected`, the same among steps where some draft was rejected; `first`, the first one."""
    if not steps:
        return None
    if rule == "first":
        return steps[0]
    pool = [s for s in steps if s.proposed > s.drafts_accepted] if rule == "longest_rejected" else list(steps)
    return max(pool or steps, key=lambda s: (s.drafts_accepted, -s.index))


def focus_index(steps: Sequence[StepTrace], rule: str = "longest") -> int:
    """The position in `steps` of the step in focus (0 when there is none): where a page's step slider opens."""
    chosen = focus_step(steps, rule)
    return next((i for i, s in enumerate(steps) if s is chosen), 0)


def telling(steps: Sequence[StepTrace]) -> list[StepTrace]:
    """Lookahead's steps whose window harvested n-grams and whose verification branch ran (both branches at work),
    when there are any: the ones its figures explain (only Lookahead's steps record both); else `steps`."""
    both = [s for s in steps if getattr(s.detail, "candidates", None) and getattr(s.detail, "harvested", None)]
    return both or list(steps)
