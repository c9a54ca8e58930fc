"""How long to wait before the next try: a server's ``Retry-After``, else the backoff."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from email.utils import parsedate_to_datetime

from shopbench.openai_compat.config import ClientConfig


def parse_retry_after(value: str | None, now: Callable[[], float] = time.time) -> float | None:
    """Seconds a ``Retry-After`` header asks for: a number of seconds or an HTTP date.

    A date in the past asks for 0; a missing or unreadable value (or a negative number)
    asks for nothing (None). `now` is the wall clock the date is measured against.
    """
    if not value or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:  # RFC 9110 dates are GMT; a zone-less one is read so too
            return None
        return max(0.0, when.timestamp() - now())
    return seconds if seconds >= 0 else None


class Backoff:
    """The waits between the tries of one request.

    The own wait starts at ``backoff_s`` and doubles after every try; a server's
    ``Retry-After`` replaces it for that try (waited in full, not jittered). Every wait is
    capped at ``max_backoff_s``.
    """

    def __init__(self, config: ClientConfig, rng: random.Random | None = None) -> None:
        self.config = config
        self._rng = rng or random.Random()
        self._delay = config.backoff_s

    def next_wait(self, retry_after: float | None) -> float:
        """The wait before the next try (and the own delay doubles for the one after)."""
        cfg = self.config
        if retry_after is not None:
            wait = retry_after
        else:
            wait = self._delay * (1.0 - cfg.jitter * self._rng.random())
        self._delay *= 2
        return min(wait, cfg.max_backoff_s)
