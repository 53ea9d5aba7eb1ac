"""The rules every check of a "Your turn" exercise follows, and the interface a lesson's checks are written on.

A check runs what the learner wrote (a function, a class) on a small input of its own and prints one verdict: ``✓``
and what is right; ``✗`` with what is wrong and a hint toward the fix; or ``…`` "not done yet" while the exercise
still raises ``NotImplementedError``. A check never raises and never hangs: any answer, of any shape, gets a verdict
within its time limit, and a notebook with untouched exercises runs to its end. The first message of a wrong answer
points at the mistake; it does not print the answer. Every verdict is also saved in
``results/exercises/<notebook>.json`` (the tests of ``solutions/`` read it).

A lesson's check is a function ``check_<what>(answer) -> Verdict`` in ``course/exercises/<lesson>.py``, written with:

* :func:`check` runs the check's body under a deadline (``course.deadline.within``, the one way the course runs code
  that may hang) and turns whatever happens into the verdict: the body returns the ``✓`` message, or raises
  ``AssertionError`` with the finding; :class:`NotDone` and :class:`Raised` come from :func:`attempt`;
* :func:`attempt` calls the learner's code: its ``NotImplementedError`` is :class:`NotDone`, another error is
  :class:`Raised`, with the error in one line (``course.deadline.first_line``);
* :func:`in_time` gives one part of a check that runs the learner's code a shorter deadline of its own, and a
  finding that says what to look for when it is late;
* :func:`untouched` tells an exercise not yet written, so that a costly check starts nothing;
* :func:`attach_ray` gives a check the notebook's Ray, or attaches as the lessons do;
* :func:`learner_error` finds the learner's error in Ray's report of a failed task or run.

The checks that run the learner's function on Ray Train workers are written on ``course.exercises.train_runs``: it
watches every worker, and stops one that waits at ``ray.train.report`` for a worker that has reported fewer times and
ended (or has not come for ``train_runs.BARRIER_WAIT_S``), or that runs past its own limit; the verdict names the
rule it broke. ``tests/exercises/test_exercises_<lesson>.py`` shows, for each check, the wrong answers a learner
writes refused with a message that teaches, and other right answers accepted.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from course.config import RESULTS_DIR
from course.deadline import Late, first_line, within

DONE, NOT_DONE, WRONG = "done", "not done yet", "not yet right"
MARKS = {DONE: "✓", NOT_DONE: "…", WRONG: "✗"}


@dataclass(frozen=True)
class Verdict:
    """What a check found: ``state`` is ``done``, ``not done yet`` or ``not yet right``."""

    exercise: str  # "02.1": notebook 02, exercise 1
    state: str
    message: str

    @property
    def done(self) -> bool:
        return self.state == DONE

    def __str__(self) -> str:
        return f"{MARKS[self.state]} exercise {self.exercise}: {self.message}"

    def _ipython_display_(self) -> None:
        """As a cell's last value, show nothing more: the check has printed the verdict already."""


class NotDone(Exception):
    """The learner's code still raises NotImplementedError."""


class Raised(Exception):
    """The learner's code raised something else: the message says what; ``error`` is what it raised, where a check
    adds a hint of its own for one kind of error."""

    def __init__(self, message: str, error: BaseException | None = None) -> None:
        super().__init__(message)
        self.error = error


UNKNOWN_NAME = (
    "your code uses a name this notebook does not have. Import it in your cell (`import ray`, say), or run the cell "
    "that defines it"
)


def attempt(function: Callable, *args: Any, **kwargs: Any) -> Any:
    """Call the learner's ``function``; its NotImplementedError means "not done yet", another error is a finding."""
    try:
        return function(*args, **kwargs)
    except NotImplementedError:
        raise NotDone from None
    except NameError as error:  # a name from another cell, never run, or never imported in this notebook
        raise Raised(f"it raised {first_line(error)}: {UNKNOWN_NAME}", error) from None
    except Exception as error:
        raise Raised(f"it raised {first_line(error)}", error) from None


def in_time(function: Callable, *args: Any, limit_s: float, late: str, grace_s: float = 5.0) -> Any:
    """``function(*args)`` under ``deadline.within``, stopped at ``limit_s`` (interrupted, then given ``grace_s`` to
    end): its value, or its exception raised again; past the limit, ``AssertionError(late)``, the finding."""
    try:
        return within(function, *args, limit_s=limit_s, interrupt=True, grace_s=grace_s)
    except Late:
        raise AssertionError(late) from None


def exercises_path(exercise: str, results_dir: Path | None = None) -> Path:
    return (results_dir or RESULTS_DIR) / "exercises" / f"{exercise.split('.')[0]}.json"


def record(verdict: Verdict, results_dir: Path | None = None) -> Verdict:
    """Print ``verdict`` and keep it with the other verdicts of its notebook."""
    path = exercises_path(verdict.exercise, results_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    kept = json.loads(path.read_text()) if path.exists() else {}
    kept[verdict.exercise] = asdict(verdict)
    path.write_text(json.dumps(kept, indent=2, sort_keys=True))
    print(verdict)
    return verdict


def read(notebook: str, results_dir: Path | None = None) -> dict[str, dict]:
    """The verdicts recorded for a notebook's exercises (``"02"``), by exercise."""
    path = exercises_path(f"{notebook}.0", results_dir)
    return json.loads(path.read_text()) if path.exists() else {}


def check(
    exercise: str,
    run: Callable[[], str],
    limit_s: float = 60,
    late: str = "",
    ray_first: Callable[[], bool] | None = None,
    locally: Callable[[], None] | None = None,
) -> Verdict:
    """Run one check body under a deadline (``deadline.within``, at most ``limit_s`` seconds), record its verdict and
    print it: the body returns the success message or raises AssertionError with the finding. Whatever else happens
    is a verdict too: an exception of the check itself (an answer of a shape it did not expect) or a body still
    running at the limit (``late`` says what to look for).

    ``locally()``, where given, runs first, under the same deadline: the part of the check that needs no cluster
    (Ray Train's local mode, ``train_runs.fit_locally``), which raises its finding, or returns when it sees nothing
    wrong; only then is Ray attached and ``run`` started. A fault local mode can show gets its verdict in seconds.

    When ``ray_first()`` says so (an answer worth running on Ray), Ray is attached first, in the caller's thread
    (``ray.init`` sets its signal handlers only in the main thread, and says so on stderr elsewhere); it is asked
    again after ``locally``, so that a check whose local stage needs no Ray attaches only for an answer it passed."""
    try:
        _attach_first(ray_first)
        if locally is not None:
            within(locally, limit_s=limit_s, interrupt=True, grace_s=0)
            _attach_first(ray_first)
        # at the limit, the learner's code is stopped at its next Python line (a loop that never ends would
        # otherwise go on in the kernel); the verdict does not wait for it
        verdict = Verdict(exercise, DONE, within(run, limit_s=limit_s, interrupt=True, grace_s=0))
    except NotDone:
        verdict = Verdict(exercise, NOT_DONE, "replace `raise NotImplementedError` with your code, then run again")
    except (Raised, AssertionError) as finding:
        verdict = Verdict(exercise, WRONG, str(finding))
    except Late:
        verdict = Verdict(
            exercise,
            WRONG,
            f"no verdict within the check's time limit of {limit_s:.0f} s: your code was still running. "
            + (late or "Look for a loop that never ends, or a wait for something that never comes"),
        )
    except KeyboardInterrupt:  # the learner stopped the cell
        raise
    except BaseException as error:  # noqa: BLE001  (a check never raises: SystemExit from learner code included)
        verdict = Verdict(
            exercise,
            WRONG,
            f"the check could not use what your code gave it ({first_line(error)}): compare what your code "
            "returns (its type, its shape) with what the exercise asks for",
        )
    return record(verdict)


def _attach_first(ray_first: Callable[[], bool] | None) -> None:
    """Attach Ray in this thread when ``ray_first()`` says so; a failure here is the body's to find and say."""
    try:
        if ray_first is not None and ray_first():
            attach_ray()
    except Exception as error:  # noqa: BLE001  (the body says what it finds; Ray is attached there again)
        logging.getLogger(__name__).debug("attaching Ray first: %s", error)


def attach_ray() -> None:
    """Ray for a check: the notebook's own (it called ``init_ray``), else attach as the lessons do, so that the check's
    tasks get the job's runtime env (on a cluster, the course's code reaches the other nodes only that way)."""
    import ray

    if not ray.is_initialized():
        from course.cluster import init_ray

        init_ray()


def untouched(function: Callable) -> bool:
    """True while ``function``'s body is only ``raise NotImplementedError``: a costly check then starts nothing."""
    import ast
    import textwrap

    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError, SystemError):  # SystemError: 3.11's parse met a finalizer that parses
        return False  # (tests/support/python_source.py); the check then runs the answer, and judges it as it is
    if not tree.body or not isinstance(tree.body[0], ast.FunctionDef):
        return False
    body = [s for s in tree.body[0].body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0])


def learner_error(error: Exception) -> str:
    """What the learner's code raised (``KeyError: 'pixel_values'``), out of Ray's report of a failed run or task:
    the last ``Type: message`` line before Ray's own exceptions that wrap it (Ray Data's retry advice, for one)."""
    text = str(error).split("The above exception was the direct cause of the following exception")[0]
    for line in reversed(text.splitlines()):
        if line.strip() and not line.startswith((" ", "Traceback", "\x1b")) and ":" in line:
            found = line.strip()[:200]
            return f"{found} ({UNKNOWN_NAME})" if found.startswith("NameError") else found
    return text.strip().splitlines()[0][:200] if text.strip() else type(error).__name__
