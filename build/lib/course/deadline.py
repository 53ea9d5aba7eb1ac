"""Running code that may hang or fail, as the exercises' checks and the doctor do: under a deadline, with what it
raised said in one line. Written once here; every check (``exercises.checking``, ``exercises.train_runs``,
``exercises.ray_core``) and ``scripts/doctor.py`` use it."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable
from typing import Any


class Late(Exception):
    """The code was still running at its deadline."""


class TimeUp(BaseException):
    """Raised inside a thread whose deadline passed (``within(..., interrupt=True)``); a BaseException, so that the
    learner's ``except Exception`` does not swallow it."""


def within(
    function: Callable, *args: Any, limit_s: float, interrupt: bool = False, grace_s: float = 5.0, **kwargs: Any
) -> Any:
    """``function(*args, **kwargs)`` in a daemon thread of its own, waited for at most ``limit_s`` seconds: its value,
    or its exception raised again here (any exception, ``SystemExit`` included), or :class:`Late`.

    Python cannot kill a thread. A late thread is left running, as a daemon; with ``interrupt``, :class:`TimeUp` is
    raised inside it first, at its next Python line (a loop that never ends stops; a wait inside a C call, such as
    ``ray.get``, stays until it returns), and it is given ``grace_s`` more seconds to end."""
    outcome: list[tuple[str, Any]] = []

    def target() -> None:
        try:
            outcome.append(("value", function(*args, **kwargs)))
        except BaseException as error:  # noqa: BLE001  (raised again in the caller's thread)
            outcome.append(("error", error))

    thread = threading.Thread(target=target, name=f"within-{getattr(function, '__name__', 'call')}", daemon=True)
    thread.start()
    thread.join(limit_s)
    if thread.is_alive():
        if interrupt:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident), ctypes.py_object(TimeUp))
            thread.join(grace_s)
        raise Late(f"still running after {limit_s:.0f} s")
    kind, value = outcome[0]
    if kind == "error":
        raise value
    return value


def first_line(error: BaseException, width: int = 160) -> str:
    """An error in one line, for a verdict or a report: ``KeyError: 'pixel_values'`` (its type alone if it has no
    message), the message cut at ``width`` characters."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:width]}" if text else type(error).__name__
