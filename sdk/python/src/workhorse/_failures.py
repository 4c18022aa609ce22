"""What a handler's raised error becomes: the stored ``{name, message, stack}`` envelope, and the
``fail_v1`` options it asks for (non-retryable, an explicit retry delay, a timeout)."""

from __future__ import annotations

import re
import traceback
from typing import Any

from .types import ErrorEnvelope, RetryPolicy
from .validation import DELAY_MS

#: The most characters (code points) of each envelope part a client sends, the same in every SDK.
#: The stored bound is SQL's (``workhorse.bounded_error``: name 200, message and stack 32,768, a
#: cut part saying so); this cap, far above it, only keeps the request of any error sendable.
ERROR_PART_CAP = 1_048_576

_SURROGATE = re.compile("[\ud800-\udfff]")


def error_envelope(thrown: BaseException) -> ErrorEnvelope:
    """What a handler raised, as the stored ``{name, message, stack}``."""
    stack = "".join(traceback.format_exception(thrown))
    return {"name": _storable(type(thrown).__name__), "message": _storable(_text_of(thrown)), "stack": _storable(stack)}


def _text_of(thrown: BaseException) -> str:
    """``str(thrown)``, or "" when that raises: the failure is recorded all the same."""
    try:
        return str(thrown)
    except Exception:
        return ""


def _storable(text: str) -> str:
    # PostgreSQL stores no NUL and no lone surrogate in jsonb; the text is not ours to refuse, so
    # each becomes U+FFFD (as in every SDK). A str holds no surrogate pairs: any surrogate is lone.
    cleaned = _SURROGATE.sub("\ufffd", text.replace("\x00", "\ufffd"))
    return cleaned[:ERROR_PART_CAP]


def fail_options(thrown: BaseException, outcome: str | None, retry: RetryPolicy | None) -> dict[str, Any]:
    """The ``fail_v1`` options a raised error asks for: ``retryable = False`` fails at once, an
    integer ``retry_delay_ms`` chooses the next attempt's delay."""
    options: dict[str, Any] = {}
    if _read(thrown, "retryable") is False:
        options["nonRetryable"] = True
    delay = _read(thrown, "retry_delay_ms")
    if isinstance(delay, int) and not isinstance(delay, bool) and 0 <= delay <= DELAY_MS:
        options["retryDelayMs"] = delay
    if outcome == "timeout":
        options["attemptOutcome"] = "timeout"
    if retry is not None:
        options["retryPolicy"] = retry
    return options


def _read(thrown: BaseException, name: str) -> object:
    """An attribute of a raised error, or None when reading it raises anything at all (a property
    of the handler's own making): the failure is recorded either way."""
    try:
        return getattr(thrown, name, None)
    except Exception:
        return None
