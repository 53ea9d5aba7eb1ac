"""The exercises: every lesson ends with one to three, and solutions/ solves them all, checked by the same checks."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest
from executed import NOTEBOOKS, ROOT, run

from helpers.course import config
from helpers.exercises import checking

SOLUTIONS = sorted((ROOT / "solutions").glob("*.ipynb"))
LESSONS = [path for path in NOTEBOOKS if (ROOT / "solutions" / path.name).exists()]
EXECUTED = config.RESULTS_DIR / "executed-solutions"


def checks(path: Path) -> list[str]:
    """The exercise checks a notebook calls (``exercises.check_...``: its lesson's module, imported as ``exercises``),
    in order."""
    found = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "code":
            for node in ast.walk(ast.parse("".join(cell["source"]))):
                name = ast.unparse(node.func) if isinstance(node, ast.Call) else ""
                found += [name] if re.match(r"exercises\.check_", name) else []
    return found


def test_every_lesson_ends_with_one_to_three_exercises_and_has_its_solutions():
    assert [p.stem for p in LESSONS] == [p.stem for p in NOTEBOOKS]
    assert [p.name for p in SOLUTIONS] == [p.name for p in LESSONS]
    for lesson in LESSONS:
        assert 1 <= len(checks(lesson)) <= 3, lesson.name
        assert checks(ROOT / "solutions" / lesson.name) == checks(lesson), f"{lesson.name}: the same checks, in order"


@pytest.mark.notebook
@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_the_solutions_pass_every_check(path: Path):
    number = path.stem.split("_")[0]
    checking.exercises_path(f"{number}.0").unlink(missing_ok=True)  # a lesson's "not done yet" verdicts
    outcome = run(path, EXECUTED, cell_timeout=600)
    assert outcome.ok, f"{path.name}: {outcome.status}"
    verdicts = checking.read(number)
    assert len(verdicts) == len(checks(path)), verdicts
    wrong = {k: v["message"] for k, v in verdicts.items() if v["state"] != checking.DONE}
    assert not wrong, wrong
