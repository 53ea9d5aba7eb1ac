"""The one way the course runs code that may hang or fail (course.deadline): the checks and the doctor use it."""

from __future__ import annotations

import threading
import time

import pytest

from course.deadline import Late, first_line, within


def test_the_value_comes_back_and_an_error_is_raised_again_here():
    assert within(lambda a, b=0: a + b, 1, b=2, limit_s=5) == 3
    with pytest.raises(KeyError, match="pixel_values"):
        within(lambda: {}["pixel_values"], limit_s=5)
    with pytest.raises(SystemExit):  # learner code that calls sys.exit() does not end the caller
        within(lambda: exit(3), limit_s=5)


def test_code_still_running_at_the_deadline_is_late_and_left_as_a_daemon():
    release = threading.Event()
    start = time.monotonic()
    with pytest.raises(Late, match="still running after 0 s"):
        within(release.wait, 30, limit_s=0.3)
    assert time.monotonic() - start < 20  # not the 30 s of the wait itself (generous: a busy machine is slow)
    assert any(t.name == "within-wait" and t.daemon for t in threading.enumerate())
    release.set()


def test_interrupt_stops_a_loop_that_never_ends_even_one_that_catches_exception():
    stopped = threading.Event()

    def spins() -> None:
        try:
            while True:
                try:
                    time.sleep(0.01)
                except Exception:  # noqa: BLE001, S110  (a learner's catch-all does not swallow the deadline)
                    pass
        finally:
            stopped.set()

    with pytest.raises(Late):
        within(spins, limit_s=0.3, interrupt=True)
    assert stopped.wait(60), "the loop went on after its deadline"


def test_an_error_in_one_line():
    assert first_line(KeyError("pixel_values")) == "KeyError: 'pixel_values'"
    assert first_line(ValueError("first\nsecond")) == "ValueError: first"
    assert first_line(RuntimeError()) == "RuntimeError"
    assert first_line(ValueError("x" * 300), 10) == "ValueError: " + "x" * 10
