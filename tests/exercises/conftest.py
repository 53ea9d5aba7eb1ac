"""The fixture every test of the exercise checks shares (``todo`` and ``expect``: tests/support/exercise_checks)."""

from __future__ import annotations

import pytest
from exercise_checks import leave_ray

from course.exercises import checking


@pytest.fixture(autouse=True)
def results_here(tmp_path, monkeypatch):
    """Every test of this folder keeps its verdicts in its own folder, not in results/exercises/."""
    monkeypatch.setattr(checking, "RESULTS_DIR", tmp_path)


@pytest.fixture(scope="package", autouse=True)
def no_ray_left_attached():
    """The checks attach this process to the tests' cluster (ray.init); the tests after this folder's, in the same
    process, start without it (tests/unit expects no Ray here). What the checks left unfinished (a Ray Data iterator
    whose clean-up needs Ray) is collected first, while Ray is still here to clean up with."""
    yield
    leave_ray()
