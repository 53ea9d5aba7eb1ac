"""The rules every check of a "Your turn" exercise follows (each lesson's checks are in a module of their own).

A check runs what the learner wrote (a function, a class) on a small input of its own and prints one
verdict: ``✓`` and what is right; ``✗`` with what is wrong and a hint toward the fix; or ``…`` "not done
yet" while the exercise still raises ``NotImplementedError``. A check never raises and never hangs: it
runs in a thread of its own with a time limit (``_check``), so any answer, of any shape, gets a verdict
within that limit and a notebook with untouched exercises runs to its end. The checks that run the
learner's function on Ray Train workers also watch every worker (``train_runs._run_watched``): a worker that waits
at ``ray.train.report`` for a worker that has reported fewer times and ended (or has not come for
``train_runs.BARRIER_WAIT_S``), or that runs past its own limit, is stopped, and the verdict names the rule it
broke. Every verdict is also saved in ``results/exercises/<notebook>.json`` (the tests of ``solutions/``
read it). The first message of a wrong answer points at the mistake; it does not print the answer.
"""

from __future__ import annotations

import inspect
import json
import logging
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from course.config import RESULTS_DIR

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


class _NotDone(Exception):
    """The learner's code still raises NotImplementedError."""


class _Raised(Exception):
    """The learner's code raised something else: the message says what."""


def attempt(function: Callable, *args: Any, **kwargs: Any) -> Any:
    """Call the learner's ``function``; its NotImplementedError means "not done yet", another error is a finding."""
    try:
        return function(*args, **kwargs)
    except NotImplementedError:
        raise _NotDone from None
    except Exception as error:
        raise _Raised(f"it raised {type(error).__name__}: {str(error).splitlines()[0][:160]}") from None


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


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0][:160]}" if text else type(error).__name__


def _check(
    exercise: str,
    run: Callable[[], str],
    limit_s: float = 60,
    late: str = "",
    ray_first: Callable[[], bool] | None = None,
) -> Verdict:
    """Run one check body in a thread of its own, for at most ``limit_s`` seconds: the body returns the success
    message or raises AssertionError with the finding. Whatever else happens is a verdict too: an exception of the
    check itself (an answer of a shape it did not expect) or a body still running at the limit (``late`` says
    what to look for). The verdict is printed here, in the caller's thread.

    When ``ray_first()`` says so (an answer worth running on Ray), Ray is attached here first, in the caller's
    thread: ``ray.init`` sets its signal handlers only in the main thread, and says so on stderr elsewhere."""
    outcome: list[Verdict] = []
    try:
        if ray_first is not None and ray_first():
            _attached()
    except Exception as error:  # noqa: BLE001  (the body says what it finds; Ray is attached there again)
        logging.getLogger(__name__).debug("attaching Ray first: %s", error)

    def body() -> None:
        try:
            outcome.append(Verdict(exercise, DONE, run()))
        except _NotDone:
            outcome.append(
                Verdict(exercise, NOT_DONE, "replace `raise NotImplementedError` with your code, then run again")
            )
        except (_Raised, AssertionError) as finding:
            outcome.append(Verdict(exercise, WRONG, str(finding)))
        except BaseException as error:  # noqa: BLE001  (a check never raises: SystemExit from learner code included)
            outcome.append(
                Verdict(
                    exercise,
                    WRONG,
                    f"the check could not use what your code gave it ({_first_line(error)}): compare what your code "
                    "returns (its type, its shape) with what the exercise asks for",
                )
            )

    thread = threading.Thread(target=body, name=f"check-{exercise}", daemon=True)
    thread.start()
    thread.join(limit_s)
    if thread.is_alive() or not outcome:
        return record(
            Verdict(
                exercise,
                WRONG,
                f"no verdict within the check's time limit of {limit_s:.0f} s: your code was still running. "
                + (late or "Look for a loop that never ends, or a wait for something that never comes"),
            )
        )
    return record(outcome[0])


def _attached() -> None:
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
    except (OSError, TypeError, SyntaxError):
        return False
    if not tree.body or not isinstance(tree.body[0], ast.FunctionDef):
        return False
    body = [s for s in tree.body[0].body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0])


def _failure(error: Exception) -> str:
    """What the learner's code raised (``KeyError: 'pixel_values'``), out of Ray's report of a failed run or task:
    the last ``Type: message`` line before Ray's own exceptions that wrap it (Ray Data's retry advice, for one)."""
    text = str(error).split("The above exception was the direct cause of the following exception")[0]
    for line in reversed(text.splitlines()):
        if line.strip() and not line.startswith((" ", "Traceback", "\x1b")) and ":" in line:
            return line.strip()[:200]
    return text.strip().splitlines()[0][:200] if text.strip() else type(error).__name__
