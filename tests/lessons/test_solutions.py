"""The exercises: every lesson ends with one to three, and solutions/ solves them all, checked by the same checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from executed import NOTEBOOKS, ROOT, empty_displays, exercise_checks, run

from course import config
from course.exercises import checking

SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
LESSONS = [path for path in NOTEBOOKS if (ROOT / "solutions" / path.name).exists()]
EXECUTED = config.RESULTS_DIR / "executed-solutions"


def test_every_lesson_ends_with_one_to_three_exercises_and_has_its_solutions():
    assert [p.stem for p in LESSONS] == [p.stem for p in NOTEBOOKS]
    assert [p.name for p in SOLUTIONS] == [p.name for p in LESSONS]
    for lesson in LESSONS:
        assert 1 <= len(exercise_checks(lesson)) <= 3, lesson.name
        assert exercise_checks(ROOT / "solutions" / lesson.name) == exercise_checks(lesson), (
            f"{lesson.name}: the same checks, in order"
        )


@pytest.mark.notebook
@pytest.mark.course_size  # every solutions notebook whole: weekly; the checks themselves, in tests/exercises
@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_the_solutions_pass_every_check(path: Path, tmp_path: Path, monkeypatch):
    number = path.stem.split("_")[0]
    # the kernel keeps its results, the verdicts among them, in a folder of its own: results/exercises/ holds the
    # lessons' "not done yet" verdicts of the run before, which these must not be mixed with
    monkeypatch.setenv(config.RESULTS_DIR_ENV, str(tmp_path))
    outcome = run(path, EXECUTED, cell_timeout=600)
    assert outcome.ok, f"{path.name}: {outcome.status}"
    verdicts = checking.read(number, tmp_path)
    assert len(verdicts) == len(exercise_checks(path)), verdicts
    wrong = {k: v["message"] for k, v in verdicts.items() if v["state"] != checking.DONE}
    assert not wrong, wrong
    # a check that runs an experiment of its own (07.2) leaves the learner's cell as it was, with no empty box
    assert not empty_displays(json.loads((EXECUTED / path.name).read_text()))
