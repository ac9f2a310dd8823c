"""What a stop runs: its methods' Configs and its temperature, as the stop's page declares them for its settings."""

from __future__ import annotations

from typing import Any

from specviz.output.lesson.model import Stop
from specviz.output.lesson.pages import PAGES


def configs(stop: Stop) -> tuple[dict[str, Any], float | None]:
    """{method: Config} the stop's figure needs, as its page declares them, and the temperature its page sets."""
    return PAGES[stop.page].configs(stop.widget_values(), stop.figure, stop.methods)
