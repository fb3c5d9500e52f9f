"""The one retry policy of the controller: which API errors are worth retrying, and how long to wait.

Every caller that retries an API call goes through ``call_with_retries`` (a mutation, re-read
and re-checked on each attempt) or uses ``Backoff.delay`` for its own schedule (the status
writer, which retries on its next flush rather than in a loop). Retrying blindly is the defect
this replaces: a 403 or a 422 never heals, and three immediate retries of a 503 only add load to
an API server that is already struggling. So:

* only *transient* failures are retried: 429, 500, 502, 503, 504, and transport errors (connection
  refused or reset, timeouts) that carry no HTTP status; a 409 conflict only where the caller's
  function re-reads the object before writing (``retry_conflicts=True``), since repeating the same
  stale write can never succeed;
* the waits grow exponentially with *full jitter* (a uniform draw in ``[0, min(cap, base·2^n)]``,
  the AWS Architecture Blog's recommendation), so that many controllers or many objects that failed
  together do not retry together;
* the number of attempts is bounded, and ``sleep`` and the random draw are injected so that the
  schedule is unit-tested without waiting.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

__all__ = [
    "RETRYABLE_STATUSES",
    "Backoff",
    "call_with_retries",
    "is_retryable",
    "status_of",
]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: HTTP statuses that say "try again later": throttled, or the server (or a proxy) failed
RETRYABLE_STATUSES = frozenset({429, 500, 502, 503, 504})


def status_of(exc: BaseException) -> int | None:
    """The HTTP status of a kubernetes ``ApiException`` (or anything with an int ``status``)."""
    status = getattr(exc, "status", None)
    return int(status) if isinstance(status, int) and not isinstance(status, bool) else None


def _transport_error(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError | TimeoutError):
        return True
    try:
        import urllib3.exceptions as u3
    except ImportError:  # pragma: no cover - urllib3 comes with the kubernetes client
        return False
    return isinstance(exc, u3.HTTPError) and not isinstance(exc, u3.LocationValueError)


def is_retryable(exc: BaseException, *, retry_conflicts: bool = False) -> bool:
    """Whether ``exc`` is a transient API failure (see the module docstring)."""
    status = status_of(exc)
    if status is None:
        return _transport_error(exc)
    if status == 0:  # the client's "no response" (a transport error wrapped in ApiException)
        return True
    return status in RETRYABLE_STATUSES or (retry_conflicts and status == 409)


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with full jitter: attempt ``n`` (0-based) waits U(0, min(cap, base·2^n))."""

    attempts: int = 4
    base_s: float = 0.25
    cap_s: float = 8.0

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.base_s < 0 or self.cap_s < self.base_s:
            raise ValueError("Backoff needs attempts >= 1 and 0 <= base_s <= cap_s")

    def ceiling(self, attempt: int) -> float:
        """The largest wait after failure number ``attempt`` (0-based)."""
        return min(self.cap_s, self.base_s * 2.0 ** min(max(attempt, 0), 62))

    def delay(self, attempt: int, rng: Callable[[], float] = random.random) -> float:
        return rng() * self.ceiling(attempt)


#: mutations of user objects: up to 4 attempts, about 2 s of waiting at most on average
ACTION_BACKOFF = Backoff(attempts=4, base_s=0.25, cap_s=4.0)


def call_with_retries(
    fn: Callable[[], T],
    *,
    what: str,
    backoff: Backoff = ACTION_BACKOFF,
    retry_conflicts: bool = False,
    sleep: Callable[[float], None] = time.sleep,
    rng: Callable[[], float] = random.random,
    on_retry: Callable[[BaseException, int, float], None] | None = None,
) -> T:
    """``fn()``, retried on transient failures per ``backoff``; the last exception is raised.

    ``fn`` must read what it depends on itself (each attempt sees fresh state); with
    ``retry_conflicts`` a 409 is retried too, which is only sound for such a function."""
    for attempt in range(backoff.attempts):
        try:
            return fn()
        except Exception as exc:
            if attempt + 1 >= backoff.attempts or not is_retryable(exc, retry_conflicts=retry_conflicts):
                raise
            wait = backoff.delay(attempt, rng)
            log.info(
                "%s failed (%s), attempt %d of %d; retrying in %.2fs",
                what,
                status_of(exc) or type(exc).__name__,
                attempt + 1,
                backoff.attempts,
                wait,
            )
            if on_retry is not None:
                on_retry(exc, attempt, wait)
            sleep(wait)
    raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises
