"""What the tests of the exercise checks use besides their conftest's fixture: an untouched answer (``todo``) and
``expect`` (a verdict's state and the phrases its message must hold)."""

from __future__ import annotations

from course.exercises import checking


def todo(*args, **kwargs):
    raise NotImplementedError


def expect(verdict: checking.Verdict, state: str, *phrases: str) -> None:
    assert verdict.state == state, verdict
    for phrase in phrases:
        assert phrase in verdict.message, verdict
