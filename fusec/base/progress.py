"""What a long compile is doing, on the ``fusec.compile`` logger (never printed unless logging is set up).

A compile's steps (a pass starting, a kernel compiled) are logged at DEBUG while the compile is
young and at INFO once it has run longer than ``SLOW_AFTER_S``, so that a user who turns the
logger up (``logging.getLogger("fusec").setLevel(logging.INFO)``) hears only about slow compiles,
and a developer at DEBUG hears everything.
"""

from __future__ import annotations

import logging
import time

logger = logging.getLogger("fusec.compile")

SLOW_AFTER_S = 2.0


class Progress:
    """``progress.step("pass %s", name)``: one step of the compile of ``what`` (a graph's name)."""

    __slots__ = ("what", "start", "slow_after")

    def __init__(self, what: str, slow_after: float | None = None, start: float | None = None):
        self.what = what
        self.slow_after = SLOW_AFTER_S if slow_after is None else slow_after
        self.start = time.perf_counter() if start is None else start

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def step(self, message: str, *args) -> None:
        elapsed = self.elapsed
        level = logging.INFO if elapsed > self.slow_after else logging.DEBUG
        if logger.isEnabledFor(level):
            logger.log(level, "%s [%.1f s]: " + message, self.what, elapsed, *args)
