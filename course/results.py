"""Where a notebook leaves its headline figure, so that `make run` can print one table of them.

Each notebook records one *headline*: the figure its record names (``beans val accuracy``, in
course.lessons), and any other figures worth keeping. Recording checks the record's floor for the sources in
use (``floor``, or ``real_floor`` with ``COURSE_SOURCES=real``): a figure below it is an error that says so, never a
quiet row in a table. ``COURSE_FLOORS=report`` prints the floor instead (a rehearsal whose weights are random), and
so does the smoke size (``COURSE_SMOKE=1``: too few steps to learn, every code path still taken).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from course.budget import get_budget
from course.config import FLOORS_ENV, REPO_ROOT, RESULTS_DIR, SMOKE_ENV, floors, smoke, sources_kind
from course.lessons import Lesson, lesson_named


class BelowFloor(AssertionError):
    """A notebook's headline figure did not reach its floor: the model did not learn enough."""


def held_to_floors() -> bool:
    """Whether headlines must reach their floors: yes, unless ``COURSE_FLOORS=report`` or the smoke size."""
    return floors() == "enforce" and not smoke()


def not_held() -> str:
    """Why a floor is not held, in words: the setting that says so."""
    return f"{SMOKE_ENV}=1, the smoke size" if smoke() else f"{FLOORS_ENV}=report"


def run_facts() -> dict[str, str | int | None]:
    """What the site says of the run behind a record (scripts/build_site.py): the checkout's commit (None outside a
    git checkout; ``+`` when tracked files were changed), the machine's CPU cores and the cluster's GPUs, the sources
    and the size."""
    commit = None
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10
        )
        if head.returncode == 0:
            commit = head.stdout.strip()
        # The commit is known even where this times out: a status may pass every notebook through nbstripout (the
        # clean filter) when git cannot trust the files' times; `make setup` refreshes the index once for that
        changed = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=10,
        )
        if commit and changed.stdout.strip():
            commit += "+"
    except (OSError, subprocess.SubprocessError):
        pass
    return {"commit": commit, "cpu_cores": os.cpu_count(), **_setup()}


def _setup() -> dict[str, str | int | None]:
    """What makes two lessons' figures comparable (no git, no I/O): the cluster's GPUs, the budget, the Ray Train
    workers of the course's plan on this cluster (``plan_workers``), the sources and the size.

    ``plan_workers`` is ``course.resources.plan_resources(ray.cluster_resources(), budget).num_workers``, the count
    that 02 and 02b train on: with another count each worker sees other images, and the run ends elsewhere. It is
    None where no lesson has planned its workers in this process (``course.resources`` not imported: nothing here
    imports it, nor torch with it) or Ray is not started."""
    ray = sys.modules.get("ray")  # a lesson has started Ray before it records; nothing here imports it
    started = ray is not None and ray.is_initialized()
    cluster = ray.cluster_resources() if started else {}
    gpus = int(cluster.get("GPU", 0)) if started else None
    budget = get_budget(gpus or 0)
    resources = sys.modules.get("course.resources")  # imported by a lesson that planned its workers
    plan_workers = resources.plan_resources(cluster, budget).num_workers if started and resources else None
    size = "course" if not smoke() else "smoke"
    return {"gpus": gpus, "budget": budget.kind, "plan_workers": plan_workers, "sources": sources_kind(), "size": size}


SETUP_WORDS = {  # each fact of _setup, as setup_difference names it
    "gpus": "GPUs in the cluster",
    "budget": "budget",
    "plan_workers": "Ray Train workers",
    "sources": "sources",
    "size": "size",
}


def metrics_path(notebook: str, results_dir: Path | None = None) -> Path:
    """The JSON file that holds a notebook's headline and other figures."""
    return (results_dir or RESULTS_DIR) / "metrics" / f"{notebook}.json"


def record(
    notebook: str,
    value: float,
    results_dir: Path | None = None,
    lesson: Lesson | None = None,
    **figures: float | None,
) -> None:
    """Check ``value`` against the floor of ``notebook``'s record for the sources in use (course.lessons;
    ``lesson``, if given, instead), then save it as its headline with ``figures``.

    A figure given as None (a step that did not run, such as TensorFlow's where it is not installed) is left out.
    Raises :class:`BelowFloor` (and saves nothing) when ``value`` is below the floor.
    """
    lesson = lesson or lesson_named(notebook)
    kind = sources_kind()
    headline, floor = lesson.headline, lesson.floor_for(kind)
    value = float(value)
    enforced = held_to_floors()
    if enforced and not value >= floor:  # also catches NaN
        raise BelowFloor(f"{headline} is {value:.3f}, below its floor of {floor}: the model did not learn enough")
    path = metrics_path(notebook, results_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    content = {
        "headline": headline,
        "value": value,
        "floor": floor,
        "figures": {k: float(v) for k, v in figures.items() if v is not None},
    }
    content |= {"enforced": enforced, "run": run_facts()}
    path.write_text(json.dumps(content, indent=2, sort_keys=True))
    if enforced:
        print(f"{headline}: {value:.3f} ≥ {floor} ✓")
    else:
        print(f"{headline}: {value:.3f} (its floor with the {kind} sources, {floor}, not enforced: {not_held()})")


def require_floor(notebook: str, value: float, what: str, lesson: Lesson | None = None) -> None:
    """A check on the way to the headline: ``value`` (``what``, such as "validation accuracy") must reach the floor
    of ``notebook``'s record for the sources in use; with ``COURSE_FLOORS=report`` it is printed instead."""
    floor, value = (lesson or lesson_named(notebook)).floor_for(sources_kind()), float(value)
    if not held_to_floors():
        print(f"{what}: {value:.3f} (floor {floor} not enforced: {not_held()})")
    elif not value >= floor:  # also catches NaN
        raise BelowFloor(f"{what} is {value:.3f}, below the floor of {floor}: the model did not learn enough")


def require(holds: bool, claim: str) -> None:
    """A claim about what the model learned, on the way to the headline (the search did not lose to a fixed choice):
    an error when it fails, unless floors are not held (:func:`held_to_floors`); then it is printed either way."""
    if not held_to_floors():
        print(f"{'holds' if holds else 'does not hold'}: {claim} (not enforced: {not_held()})")
    elif not holds:
        raise BelowFloor(f"does not hold: {claim}")


def setup_difference(record: dict) -> str | None:
    """How another lesson's ``record`` (what :func:`read` gives) ran otherwise than this run, in words ("Ray Train
    workers: 2 there, 1 here"), or None where it ran with this run's GPUs, budget, Ray Train workers, sources and size:
    only then are its figures this run's to compare with."""
    if not record:
        return "it has no record: it has not run here, or its results are in another folder"
    theirs = record.get("run", {})
    differ = [
        f"{SETUP_WORDS[key]}: {theirs.get(key)} there, {value} here"
        for key, value in _setup().items()
        if theirs.get(key) != value
    ]
    return "; ".join(differ) or None


def same_setup(record: dict) -> bool:
    """Whether another lesson's ``record`` ran with this run's setup (:func:`setup_difference` says how not)."""
    return setup_difference(record) is None


def read(notebook: str, results_dir: Path | None = None) -> dict:
    """What a notebook recorded (``headline``, ``value``, ``floor``, ``figures``), or an empty dict."""
    path = metrics_path(notebook, results_dir)
    return json.loads(path.read_text()) if path.exists() else {}
