"""Running a course notebook the way `make run` does, and reading what a learner sees in its executed copy."""

from __future__ import annotations

import ast
import json
import math
import re
import shutil
import sys
from pathlib import Path

import nbformat
from ports import SocketWatch
from python_source import parse

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import run_course  # noqa: E402  (scripts/ is not a package)

from course import config, settings  # noqa: E402
from course.lessons import LESSONS  # noqa: E402

NOTEBOOKS = [ROOT / "notebooks" / f"{lesson.notebook}.ipynb" for lesson in LESSONS]  # tests/unit/test_lessons.py: all
# Run by tests/browser/test_browser.py in JupyterLab, in this order, where Chromium and Playwright are here
IN_THE_BROWSER = [lesson.notebook for lesson in LESSONS if lesson.runs_in_browser]
# run by tests/lessons/test_serve.py, which checks its service from outside while it runs
(SERVE,) = (lesson.notebook for lesson in LESSONS if not lesson.runs_in_browser)
# The size the tests execute the notebooks at (COURSE_TEST_SIZE): smoke, every code path in minutes, on every landing;
# course, what learners see (headlines held to their floors, the lessons' claims checked), in the weekly workflow. The
# kernels get it as COURSE_SMOKE; the tests' own process keeps its environment.
TEST_SIZE = settings.read("COURSE_TEST_SIZE")
NOTEBOOK_ENV = {config.SMOKE_ENV: "1" if TEST_SIZE == "smoke" else "0"}
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
try:
    import playwright.sync_api  # noqa: F401

    BROWSER_READY = CHROMIUM is not None
except ImportError:
    BROWSER_READY = False
EXECUTED = run_course.EXECUTED
MAX_LINES = 120  # text lines of output per notebook: what a reader can follow next to the lesson (a Ray worker's
# crash report is not counted: see crash_report)
WARNING = re.compile(r"(Deprecation|Future|UserWarning|RuntimeWarning)|deprecated|will be removed", re.IGNORECASE)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# "(RayTrainWorker pid=123) ": which Ray process printed it (its name may hold parentheses of its own)
RAY_PREFIX = re.compile(r"^\((?:.*? )?pid=\d+\) ?")
# A Ray 2.60 worker process that crashed (a segmentation fault, an abort on a corrupt mutex): seen in a few runs on
# a 2-core machine, in idle and Ray Data workers; Ray retries the task elsewhere and the results are unaffected. Once,
# with seven kernels alive, a Ray Train controller whose run had ended aborted on glibc's robust-mutex assertion.
# Its report may reach the notebook in several stream outputs: a part may hold only the C++ stack's frames
# ("PC: @ 0x...", "    @ 0x... (unknown)"), which count as the same report.
RAY_WORKER_CRASH = re.compile(
    r"Fatal Python error|mutex\.cc|SIGABRT received|SIGSEGV received|pthread_mutex_lock\.c:\d+: .*Assertion"
    r"|PC: @ +0x[0-9a-f]+|\s@ +0x[0-9a-f]+"
)
# A Ray worker that Ray ends on purpose (a trial that Tune's scheduler stopped, notebook 07) and that got the SIGTERM
# while Python ran a clean-up callback: Python prints the SystemExit it could not raise there. Tolerated where the
# notebook's markdown says what it means (it holds STOPPED_PHRASE).
STOPPED_ON_PURPOSE = re.compile(
    r"^.*Exception ignored in: .*\n(?:.*\n)*?.*in sigterm_handler\n(?:.*\n)*?.*SystemExit: 1$\n?", re.MULTILINE
)
STOPPED_PHRASE = "SystemExit: 1"
# What Ray or a library writes to a notebook's stderr though the course cannot switch it off. JupyterLab shows stderr
# on a pink background, as if something went wrong, so the notebook says in a sentence what each such line means: its
# markdown holds the phrase given here. Anything else on stderr is a finding.
EXPLAINED = {
    # Ray, as it starts a runtime of its own (one node, as on Colab): 2.60 turns its token authentication on and says so
    re.compile(r"authentication_token_setup\.py:\d+ -- Token authentication is enabled for this Ray cluster"): (
        "Token authentication is enabled"
    ),
    # Ray Train's local mode (notebook 02): the function runs in the notebook's process, whose logger says so, and
    # logs each report there (a worker's logs would keep them)
    re.compile(r"INFO config\.py:\d+ -- Running in local mode\."): "Running in local mode",
    re.compile(r"INFO train_fn_utils\.py:\d+ -- Reported metrics: "): "Reported metrics:",
    # Ray's core, as a Ray Data actor pool starts: Ray Data restarts crashed actors, and a restart needs the pool's
    # arguments, which Ray keeps in the object store (ray-project/ray#53727)
    re.compile(r"has constructor arguments in the object store and max_restarts > 0"): "arguments in the object store",
    # XGBoost, as each worker joins the others (its C++ code prints it whatever its verbosity)
    re.compile(r"Task \[xgboost\.ray-rank=\d+\]:\w+ got rank \d+$"): "got rank",
    # Ray Tune, as an experiment is interrupted on purpose (notebook 07): it saved its state, and how to resume
    re.compile(r"WARNING tune\.py:\d+ -- Stop signal received \(e\.g\. via SIGINT/Ctrl\+C\)"): "Stop signal received",
    re.compile(r"WARNING tune\.py:\d+ -- Experiment has been interrupted, but the most recent state was saved"): (
        "Experiment has been interrupted, but the most recent state was saved"
    ),
    re.compile(r"^Resume experiment with: Tuner\.restore\(path="): "Resume experiment with: Tuner.restore",
    # Ray Train, as a trial's trainer is stopped with its trial (the interruption above): its workers' CPUs are freed
    re.compile(r"Detected that the Ray Train controller actor \(\w+\) is dead\. Cleaning up placement group"): (
        "Cleaning up placement group"
    ),
    # Ray's core, as notebook 00's task fails on purpose and is tried again (its traceback follows)
    re.compile(r"Task flaky failed\. There are \d+ retries remaining"): "Task flaky failed",
    # Ray's autoscaler, as notebook 00 asks for more CPUs than any node has
    re.compile(r"No available node types can fulfill resource request"): "can fulfill resource request",
    # Ray Data, as a dataset stopped once it had the rows asked for cancels its tasks still running (03)
    re.compile(r"Unhandled error \(suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'\)"): "Unhandled error (suppress with",
    # Ray Train, as a collective waits for ranks that have not come (02c sets the interval low to show a hang): four
    # lines each interval
    re.compile(r"`ray\.train\.report` has not been called by all \d+ workers"): "has not been called by all",
    re.compile(r"The workers have been waiting for [\d.]+ s for the following ranks to join"): (
        "has not been called by all"
    ),
    re.compile(r"Also ensure that workers are not hanging on other operations"): "has not been called by all",
    # the last line of the timeout's error, under its traceback (02c)
    re.compile(r"You can set the timeout with the RAY_TRAIN_COLLECTIVE_TIMEOUT_S environment variable"): (
        "BroadcastCollectiveTimeoutError"
    ),
    re.compile(r"You can set the RAY_TRAIN_COLLECTIVE_WARN_INTERVAL_S environment variable to change the frequency"): (
        "has not been called by all"
    ),
    # Serve's controller, stopped by serve.shutdown() while the notebook's process listened to it (06)
    re.compile(r"Task ServeController\.listen_for_change failed"): "ServeController.listen_for_change failed",
    re.compile(r"Task ServeController\.graceful_shutdown failed"): "ServeController.graceful_shutdown failed",
    # Ray Data, once in each process that runs a dataset whose DataContext turned its progress bars off (03's training
    # data: the notebook's process and each SplitCoordinator)
    re.compile(r"Progress bars disabled\. To enable, set"): "Progress bars disabled",
    # Ray Data, while some workers of a run leave their shard unread (04.2's check, judging an answer where only rank 0
    # reads): the other splits wait for them
    re.compile(r"StreamSplitDataIterator\(epoch=\d+, split=\d+\) blocked waiting on other clients"): (
        "blocked waiting on other clients"
    ),
    # Ray Data, as it stops an actor pool whose actors still had a batch queued (03, once `take_batch` has its rows)
    re.compile(r"Task MapWorker\(.*\)\.submit failed"): "Task MapWorker(...).submit failed",
}
# The lines above that a traceback follows, up to its exception line: one finding or none, not one per line
WITH_TRACEBACK = {
    "Task flaky failed",
    "Unhandled error (suppress with",
    "ServeController.listen_for_change failed",
    "ServeController.graceful_shutdown failed",
    "Task MapWorker(...).submit failed",
}
# Ray Train's worker logs its training function's failure, with the traceback, before Ray Train acts on it
FAILURE = re.compile(r"^Error in training function:$")
FAILURE_PHRASE = "Error in training function"
EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt)\b")  # the last line of a traceback
# what follows an exception line where the traceback goes on: a chained exception's, or the remote traceback that a
# RayTaskError's message holds (its frames indented, under a `ray::Actor.method()` line): 02c's collective timeout
CHAINED = re.compile(r"^(The above exception was the direct cause|During handling of the above exception|\s|ray::)")
FRAME = re.compile(r'^\s*File "')  # a traceback's frame: its path may hold "futures", which is not a warning
RAYLET = "(raylet) "  # how Ray prefixes a line a raylet forwards to the driver (output_lines has removed its colour)
# Lines of Ray's own processes about the cluster, not about the lesson's code, that any lesson attached to Ray may
# receive: each lesson's "Lines you may see" names them (its markdown holds the phrase given here), as for EXPLAINED.
RAYLET_PHRASE = "a line that starts `(raylet)` about a worker process"  # how the lessons name a raylet's own errors
CLUSTERS_OWN = {
    # a raylet, as a burst of tasks, actors or replicas starts many worker processes at once
    re.compile(r"^\(raylet\) WARNING: \d+ PYTHON worker processes have been started"): (
        "PYTHON worker processes have been started"
    ),
    # a raylet's error log line from Ray's C++ code, about a worker process that had already exited ("worker.cc:239:
    # Failed to send wait complete"), or its report of a worker that ended in the middle of a task
    re.compile(r"^\(raylet\) (?:\[[^]]*\] )?\w+\.cc:\d+: "): RAYLET_PHRASE,
    re.compile(r"A worker died or was killed while executing a task by an unexpected system error"): RAYLET_PHRASE,
    # the GCS, stopping an actor whose process had already exited (a pool's actor as Ray Data stops the pool)
    re.compile(r"gcs_actor_scheduler\.cc:\d+: Failed to kill actor"): "Failed to kill actor",
    # a race: Ray's log monitor read a progress bar's update while the Ray Data process was still writing it
    # (ray/_private/log_monitor.py takes a line without its newline as whole): the bar misses one frame (04, CI of
    # 2026-11-29)
    re.compile(r"\[tqdm_ray\] Failed to decode"): "[tqdm_ray] Failed to decode",
}
NAMED = {**EXPLAINED, **CLUSTERS_OWN}  # every line a lesson may print and name, with the phrase that names it
CRASH_PHRASE = "crash report"  # what a lesson's markdown says of a Ray worker's crash report (RAY_WORKER_CRASH)
# Warnings the course's own calls do not cause and cannot avoid, with the reason.
NOT_OURS = {
    "ExecutionOptions.exclude_resources": "Ray Train 2.60 reads the deprecated option itself in every run with "
    "datasets (ray.train.v2 state export calls DataConfig.default_ingest_options), whatever the course passes",
}


def calls(path: Path, name: str) -> list[ast.Call]:
    """The calls to ``name`` (as written: ``"results.record"``) in the code cells of the notebook at ``path``."""
    found = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "code":
            tree = parse("".join(cell["source"]))
            found += [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == name]
    return found


def exercise_checks(path: Path) -> list[str]:
    """The exercise checks the notebook at ``path`` calls (``exercises.check_...``: its lesson's module, imported as
    ``exercises``), in order."""
    found = []
    for cell in json.loads(path.read_text())["cells"]:
        if cell["cell_type"] == "code":
            for node in ast.walk(parse("".join(cell["source"]))):
                name = ast.unparse(node.func) if isinstance(node, ast.Call) else ""
                found += [name] if name.startswith("exercises.check_") else []
    return found


def run(path: Path, folder: Path = EXECUTED, **options) -> run_course.Outcome:
    """Execute ``path`` as `make run` does (its executed copy lands in ``folder``), while a :class:`ports.SocketWatch`
    samples the listening sockets: a process of the course listening beyond 127.0.0.1 at any time makes the outcome a
    failure that names the notebook and the process."""
    options.setdefault("cell_timeout", 900)
    options.setdefault("env", NOTEBOOK_ENV)
    with SocketWatch(path.stem) as watch:
        outcome = run_course.execute(path, folder, **options)
    wide = watch.problems()
    if wide:
        outcome.status = "; ".join(([] if outcome.ok else [outcome.status]) + wide)
    return outcome


def headline_problem(recorded: dict) -> str | None:
    """What is wrong with a notebook's record of its headline (course.results.record) at the tests' size, or None:
    recorded in a run of that size; at the course size at or above its floor; at the smoke size (held to no floor) a
    number."""
    if not recorded:
        return "no headline recorded (course.results.record)"
    size = recorded.get("run", {}).get("size")
    if size != TEST_SIZE:
        return f"its headline comes from a run at the {size} size, not at the tests' {TEST_SIZE} size"
    value, floor = recorded["value"], recorded["floor"]
    if not math.isfinite(value):
        return f"{recorded['headline']} is {value}"
    if TEST_SIZE == "course" and not value >= floor:
        return f"{recorded['headline']} is {value:.3f}, below its floor {floor}"
    return None


def crash_report(text: str) -> bool:
    """Whether a stream output is only a Ray worker's crash report (:data:`RAY_WORKER_CRASH`, every line under a Ray
    process's prefix): Ray runs the task again, and the report (tens of lines of C++ stack) is not the lesson's
    output, so it counts neither as a line a reader follows nor as unexplained stderr; it is printed."""
    text = ANSI.sub("", text)
    lines = [line for line in text.splitlines() if RAY_PREFIX.sub("", line).strip()]
    return bool(RAY_WORKER_CRASH.search(text)) and all(RAY_PREFIX.match(line) for line in lines)


def output_lines(path: Path, folder: Path = EXECUTED) -> list[str]:
    """The text lines a reader sees in the executed copy of ``path`` in ``folder``, as a terminal shows them: a
    cell's stream outputs in a row are one text, and a carriage return (a progress line's update) overwrites its
    line; only a newline ends one."""
    notebook = nbformat.read(folder / path.name, as_version=4)
    lines = []
    for cell in notebook.cells:
        texts = []
        for output in cell.get("outputs", []):
            if output.output_type == "stream" and not crash_report(output.text):  # Ray's, not the lesson's
                texts.append(output.text)
            elif output.output_type == "error":
                texts.append("\n" + "\n".join(output.traceback) + "\n")
        pieces = "".join(texts).split("\n")
        if pieces[-1] == "":
            pieces.pop()
        lines += [ANSI.sub("", line.rsplit("\r", 1)[-1]) for line in pieces]
    return lines


def repeats(lines: list[str]) -> list[str]:
    """Lines printed twice in a row (blank lines aside, also a Ray process's blank line under its prefix). A raylet
    writes one line per task or actor, so two actors of a pool stopped at once give the same line twice: not a
    repeat of the notebook's (the real-sources rehearsal of 03, a76f0f9)."""
    pairs = zip(lines, lines[1:], strict=False)
    return [
        line
        for line, after in pairs
        if RAY_PREFIX.sub("", line).strip() and line == after and not line.startswith(RAYLET)
    ]


def warnings(lines: list[str]) -> list[str]:
    """Warning lines, except those listed in ``NOT_OURS`` (and the source line Python prints under one)."""
    found = []
    for before, line in zip(["", *lines[:-1]], lines, strict=False):
        if FRAME.match(RAY_PREFIX.sub("", line)):
            continue
        if WARNING.search(line) and not any(key in line or key in before for key in NOT_OURS):
            found.append(line)
    return found


def problems(path: Path, folder: Path = EXECUTED) -> list[str]:
    """What makes the executed copy of ``path`` (in ``folder``) hard to read, one sentence each, stderr that it does
    not explain included (:func:`stderr_problems`); empty when it reads well."""
    lines = output_lines(path, folder)
    found = []
    if len(lines) > MAX_LINES:
        found.append(f"{len(lines)} lines of output (at most {MAX_LINES}); the last ones: {lines[-5:]}")
    if repeats(lines):
        found.append(f"lines printed twice in a row: {repeats(lines)[:5]}")
    if warnings(lines):
        found.append(f"warnings in the output: {warnings(lines)[:5]}")
    notebook = json.loads((folder / path.name).read_text())
    return found + stderr_problems(notebook) + empty_displays(notebook)


def empty_displays(notebook: dict) -> list[str]:
    """The rich outputs of a notebook (as JSON) that show nothing: an empty HTML block, say. A library that draws in
    place leaves one; Ray Tune's notebook reporter, at ``verbose=0``, also clears what the cell printed before its
    experiment started (``clear_output``), and the learner sees an empty box instead (notebook 07 passes
    ``progress_reporter=tune.CLIReporter()``, which at ``verbose=0`` draws nothing and clears nothing)."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        for output in cell.get("outputs", []):
            shown = {kind: data for kind, data in output.get("data", {}).items() if kind != "text/plain"}
            if output["output_type"] in ("display_data", "execute_result") and shown:
                if not any("".join(data) if isinstance(data, list) else data for data in shown.values()):
                    found.append(
                        f"cell {index} shows an empty {'/'.join(shown)} output, and anything printed before it in "
                        "the cell may have been cleared (a Tune experiment at verbose=0 without "
                        "progress_reporter=tune.CLIReporter()?)"
                    )
    return found


def stderr_problems(notebook: dict) -> list[str]:
    """What a notebook (as JSON: an executed copy, or saved from JupyterLab) wrote to stderr that it does not explain.

    Tolerated: a line in :data:`EXPLAINED` or a failure of the training function (:data:`FAILURE`, up to its
    exception line) where the notebook's markdown says what it means; so too a line of :data:`CLUSTERS_OWN`, a Ray
    worker's crash report (:data:`RAY_WORKER_CRASH`, :data:`CRASH_PHRASE`; Ray runs the task again) and a worker Ray
    stopped on purpose (:data:`STOPPED_ON_PURPOSE`). Nothing is tolerated that the lesson does not name: each lesson's
    "Lines you may see" lists what it may print. The crash reports are printed."""
    markdown = "\n".join("".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "markdown")
    found = []
    for index, cell in enumerate(notebook["cells"]):
        for output in cell.get("outputs", []):
            if output["output_type"] != "stream" or output["name"] != "stderr":
                continue
            text = ANSI.sub("", "".join(output["text"]))
            if STOPPED_PHRASE in markdown:
                text = STOPPED_ON_PURPOSE.sub("", text)
            if crash_report(text):
                if CRASH_PHRASE not in markdown:
                    found.append(
                        f"cell {index} shows a Ray worker's crash report, and no markdown cell says what it is"
                    )
                print(f"cell {index}: a Ray worker crashed and Ray went on: {text[:160]!r}")
                continue
            in_traceback = ended_one = False
            for line in (line for line in text.splitlines() if RAY_PREFIX.sub("", line).strip()):
                plain = RAY_PREFIX.sub("", line)
                if in_traceback or (ended_one and CHAINED.match(plain)):
                    ended_one = bool(EXCEPTION_LINE.match(plain.removeprefix(RAYLET)))
                    in_traceback = not ended_one
                    continue
                ended_one = False
                if FAILURE.match(plain):
                    in_traceback = True
                    phrase = FAILURE_PHRASE
                else:
                    phrase = next((said for pattern, said in NAMED.items() if pattern.search(plain)), None)
                    in_traceback = phrase in WITH_TRACEBACK
                if phrase is None:
                    found.append(f"cell {index} wrote to stderr: {line[:300]!r}")
                elif phrase not in markdown:
                    found.append(f"cell {index} shows {line[:160]!r}, and no markdown cell says what it means")
    return found
