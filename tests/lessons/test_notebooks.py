"""Every notebook runs top to bottom on the local cluster at the tests' size (executed.TEST_SIZE: the smoke size
unless COURSE_TEST_SIZE=course), records its headline figure (above its floor, at the course size), and shows a
readable output: few lines, none printed twice in a row, no warnings, nothing on stderr that the notebook does not
explain (as JupyterLab shows it: the kernel runs without pytest's marker).

Where the browser test can run (tests/browser/test_browser.py), it runs 00 to 05 and 07 in JupyterLab and checks their
saved copies the same way; here they run only where it cannot. tests/lessons/test_rerun.py then runs 02 a second time.
Notebook 06 runs in tests/lessons/test_serve.py, which also checks its service from outside while it runs."""

from __future__ import annotations

import pytest
from executed import BROWSER_READY, IN_THE_BROWSER, NOTEBOOKS, SERVE, headline_problem, problems, run

from course import results

IN_JUPYTERLAB = pytest.mark.skip(
    reason="run in JupyterLab by tests/browser/test_browser.py, and checked there the same way"
)


@pytest.mark.notebook
@pytest.mark.parametrize(
    "path",
    [
        pytest.param(p, marks=[IN_JUPYTERLAB] if BROWSER_READY and p.stem in IN_THE_BROWSER else [])
        for p in NOTEBOOKS
        if p.stem != SERVE
    ],
    ids=lambda p: p.stem,
)
def test_notebook_runs_learns_and_reads_well(path):
    results.metrics_path(path.stem).unlink(missing_ok=True)
    outcome = run(path)
    assert outcome.ok, f"{path.name}: {outcome.status} (executed copy in results/executed/)"
    wrong = headline_problem(results.read(path.stem))
    assert not wrong, f"{path.name}: {wrong}"
    found = problems(path)
    assert not found, f"{path.name}: " + "; ".join(found)
