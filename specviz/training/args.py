"""The head commands' argument parser: a bad flag raises ValueError, so the CLI prints one line and exits 2."""

from __future__ import annotations

import argparse
from typing import NoReturn


class Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so bad input becomes one line and exit code 2."""

    def error(self, message: str) -> NoReturn:
        """Raise the message as a ValueError (argparse would print usage and exit)."""
        raise ValueError(message)
