"""Running a course notebook the way `make run` does, and reading what a learner sees in its executed copy."""

from __future__ import annotations

import ast
import json
import re
import shutil
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import run_course  # noqa: E402  (scripts/ is not a package)

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9]*.ipynb"))
# Run by tests/test_browser.py in JupyterLab, in this order, where Chromium and Playwright are here
IN_THE_BROWSER = ["01_local_finetune", "02_ray_train_finetune", "03_ray_data"]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
try:
    import playwright.sync_api  # noqa: F401

    BROWSER_READY = CHROMIUM is not None
except ImportError:
    BROWSER_READY = False
EXECUTED = run_course.EXECUTED
MAX_LINES = 120  # text lines of output per notebook: what a reader can follow next to the lesson (and room
# for a crash report of a Ray worker, see README: Ray 2.60 workers sometimes abort on a corrupt mutex)
WARNING = re.compile(r"(Deprecation|Future|UserWarning|RuntimeWarning)|deprecated|will be removed", re.IGNORECASE)
ANSI = re.compile(r"\x1b\[[0-9;]*m")
# "(RayTrainWorker pid=123) ": which Ray process printed it (its name may hold parentheses of its own)
RAY_PREFIX = re.compile(r"^\((?:.*? )?pid=\d+\) ?")
# A Ray 2.60 worker process that crashed (a segmentation fault, an abort on a corrupt mutex): seen in a few runs on
# a 2-core machine, in idle and Ray Data workers; Ray retries the task elsewhere and the results are unaffected.
RAY_WORKER_CRASH = re.compile(r"Fatal Python error|mutex\.cc|SIGABRT received|SIGSEGV received")
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
            tree = ast.parse("".join(cell["source"]))
            found += [n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func) == name]
    return found


def run(path: Path) -> run_course.Outcome:
    """Execute ``path`` as `make run` does: its executed copy lands in results/executed/."""
    return run_course.execute(path, EXECUTED, cell_timeout=900)


def output_lines(path: Path, folder: Path = EXECUTED) -> list[str]:
    """The text lines a reader sees in the executed copy of ``path`` in ``folder``, as a terminal shows them: a
    cell's stream outputs in a row are one text, and a carriage return (a progress line's update) overwrites its
    line; only a newline ends one."""
    notebook = nbformat.read(folder / path.name, as_version=4)
    lines = []
    for cell in notebook.cells:
        texts = []
        for output in cell.get("outputs", []):
            if output.output_type == "stream":
                texts.append(output.text)
            elif output.output_type == "error":
                texts.append("\n" + "\n".join(output.traceback) + "\n")
        pieces = "".join(texts).split("\n")
        if pieces[-1] == "":
            pieces.pop()
        lines += [ANSI.sub("", line.rsplit("\r", 1)[-1]) for line in pieces]
    return lines


def repeats(lines: list[str]) -> list[str]:
    """Lines printed twice in a row (blank lines aside, also a Ray process's blank line under its prefix)."""
    pairs = zip(lines, lines[1:], strict=False)
    return [line for line, after in pairs if RAY_PREFIX.sub("", line).strip() and line == after]


def warnings(lines: list[str]) -> list[str]:
    """Warning lines, except those listed in ``NOT_OURS`` (and the source line Python prints under one)."""
    found = []
    for before, line in zip(["", *lines[:-1]], lines, strict=False):
        if WARNING.search(line) and not any(key in line or key in before for key in NOT_OURS):
            found.append(line)
    return found


def problems(path: Path, folder: Path = EXECUTED) -> list[str]:
    """What makes the executed copy of ``path`` (in ``folder``) hard to read, one sentence each; empty when it
    reads well."""
    lines = output_lines(path, folder)
    found = []
    if len(lines) > MAX_LINES:
        found.append(f"{len(lines)} lines of output (at most {MAX_LINES}); the last ones: {lines[-5:]}")
    if repeats(lines):
        found.append(f"lines printed twice in a row: {repeats(lines)[:5]}")
    if warnings(lines):
        found.append(f"warnings in the output: {warnings(lines)[:5]}")
    return found
