"""What the tests of the exercise checks share: verdicts saved in a test's own folder, an untouched answer, and
``expect`` (a verdict's state and the phrases its message must hold)."""

from __future__ import annotations

import pytest

from course.exercises import checking


@pytest.fixture(autouse=True)
def results_here(tmp_path, monkeypatch):
    """Imported by a test module, it keeps that module's verdicts in its test's own folder."""
    monkeypatch.setattr(checking, "RESULTS_DIR", tmp_path)


def todo(*args, **kwargs):
    raise NotImplementedError


def expect(verdict: checking.Verdict, state: str, *phrases: str) -> None:
    assert verdict.state == state, verdict
    for phrase in phrases:
        assert phrase in verdict.message, verdict
