"""Every measurement makes its point: each lesson's claims (course.claims.Claim) hold on the figures that its run in
this session recorded (results/metrics/, written by the browser test, tests/lessons/test_notebooks.py or
tests/lessons/test_serve.py before this module runs). No notebook runs again here: the tests read the records.

Only at the course size (COURSE_TEST_SIZE=course: the weekly workflow; `make run` checks the same claims as it ends):
the smoke size's measurements are too small to show their point."""

from __future__ import annotations

import pytest

from course import results
from course.lessons import LESSONS

CLAIMS = [(lesson.notebook, claim) for lesson in LESSONS for claim in lesson.claims]
pytestmark = [pytest.mark.notebook, pytest.mark.course_size]  # the smoke size's figures are too small to show much


@pytest.mark.parametrize("notebook, claim", CLAIMS, ids=[f"{n}: {c.says}" for n, c in CLAIMS])
def test_the_measurement_shows_what_its_lesson_says(notebook, claim):
    record = results.read(notebook)
    assert record, f"no record of {notebook}: run it first (make run, or the tests above in make test)"
    run = record.get("run", {})
    if run.get("size") != "course":
        pytest.skip(f"{notebook} last ran at the {run.get('size')} size: its measurements are too small to show much")
    why = claim.problem(record["figures"])  # what make run's claims report says too (scripts/run_course.py)
    assert not why, f"{notebook}: {claim} does not hold: {why}"
