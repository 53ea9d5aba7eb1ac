"""The lessons, one record each: everything the course's tools know about a lesson, in one place.

``make run``'s table, ``make doctor``'s plan, ``make bench``, the notebooks' first cells (``config.describe``), their
headline (``results.record``) and the tests all read :data:`LESSONS`. Adding a lesson is a notebook, its solutions,
its exercise checks and one record here (docs/development.md, "Add a lesson"); a notebook without a record, or a
record without a notebook, fails ``tests/test_lessons.py`` with what to add.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Lesson:
    """One lesson: its notebook, what it shows, what it must reach, and what it reads."""

    notebook: str  # the notebook's name without .ipynb, in notebooks/ and solutions/: "03_ray_data"
    title: str  # what it teaches, in a few words
    headline: str  # the one figure it records (results.record), by name
    floor: float  # the least that figure may be: below it the model did not learn enough
    exercises: tuple[str, ...]  # its exercises' ids, in order: ("03.1", "03.2")
    budget: str  # the section of config.Budget that holds its knobs ("dogs": budget.dogs)
    reads: tuple[str, ...] = ()  # other lessons' sections it reads too (07 starts from 04's choices: "cifar")
    shared: tuple[str, ...] = ()  # the fields every lesson shares that it reads too (config.Budget.shared)
    sources: tuple[str, ...] = ()  # what it reads from config.Sources
    plan: Callable[[Any, Any], str] = lambda budget, plan: ""  # what it asks Ray for (make doctor), from budget, plan
    reference_seconds: int = 60  # a fresh clone's `make run` of it on the reference machine (2 cores; make doctor)
    runs_in_browser: bool = True  # run by the browser test (notebook 06 has a test of its own: tests/test_serve.py)

    @property
    def number(self) -> str:
        """``"03"`` for ``03_ray_data``: the prefix of its exercises' ids."""
        return self.notebook.split("_", 1)[0]

    @property
    def exercises_module(self) -> str:
        """The module of its exercise checks: ``helpers.exercises.ray_data`` for ``03_ray_data``."""
        return f"helpers.exercises.{self.notebook.split('_', 1)[1]}"


def _workers(plan: Any) -> str:
    return f"{plan.num_workers} Ray Train worker(s) ({'1 GPU each' if plan.use_gpu else 'CPU'})"


def _beans(budget: Any) -> str:
    return f"beans {budget.beans.train_steps} steps of batch {budget.beans.batch_size}"


LESSONS: tuple[Lesson, ...] = (
    Lesson(
        notebook="00_ray_core",
        title="Ray Core: tasks, actors, resources, the runtime env, failures",
        headline="share of tasks that ran side by side",
        floor=0.5,
        exercises=("00.1", "00.2"),
        budget="core",
        shared=("max_actors",),
        plan=lambda b, p: (
            f"Ray Core, {b.core.tasks} tasks at once, a {b.core.array_mb} MB array in the object store, "
            f"{b.max_actors} actors in a pool (CPU only)"
        ),
        reference_seconds=25,  # timed 2026-11-25 (the others 2026-11-24, with the doctor's probe)
    ),
    Lesson(
        notebook="01_local_finetune",
        title="fine-tune a ViT on one machine (Hugging Face Trainer)",
        headline="beans val accuracy",
        floor=0.80,
        exercises=("01.1", "01.2"),
        budget="beans",
        shared=("eval_batch_size", "max_workers"),
        sources=("beans", "model"),
        plan=lambda b, p: f"one process, {_beans(b)}",
        reference_seconds=33,
    ),
    Lesson(
        notebook="02_ray_train_finetune",
        title="the same fine-tune on Ray Train",
        headline="beans val accuracy",
        floor=0.80,
        exercises=("02.1", "02.2"),
        budget="beans",
        shared=("eval_batch_size", "max_workers"),
        sources=("beans", "model"),
        plan=lambda b, p: f"{_workers(p)}, {_beans(b)}",
        reference_seconds=53,
    ),
    Lesson(
        notebook="02b_fault_tolerance",
        title="a worker dies, training goes on",
        headline="beans val accuracy after a restart",
        floor=0.80,
        exercises=("02b.1",),
        budget="beans",
        shared=("eval_batch_size", "max_workers"),
        sources=("beans", "model"),
        plan=lambda b, p: f"{_workers(p)}, {_beans(b)}, one worker killed on purpose",
        reference_seconds=51,
    ),
    Lesson(
        notebook="03_ray_data",
        title="Ray Data: ingest, featurize, train from shards, batch inference",
        headline="dogs-vs-fish held-out accuracy",
        floor=0.85,
        exercises=("03.1", "03.2"),
        budget="dogs",
        shared=("eval_batch_size", "max_workers", "max_actors"),
        sources=("imagenette", "imagenette_labels", "model"),
        plan=lambda b, p: f"{_workers(p)}, dogs {b.dogs.train_steps} steps; {p.num_actors} inference actor(s)",
        reference_seconds=73,
    ),
    Lesson(
        notebook="04_cifar10_pytorch_to_ray",
        title="CIFAR-10: plain PyTorch, then Ray Train, then Ray Data",
        headline="CIFAR-10 val accuracy (Ray Data)",
        floor=0.50,
        exercises=("04.1", "04.2"),
        budget="cifar",
        shared=("max_workers",),
        sources=("cifar10",),
        plan=lambda b, p: (
            f"{_workers(p)}, ViT {b.cifar.architecture}, {b.cifar.epochs} epochs of "
            f"{b.cifar.train_size or 'all'} images"
        ),
        reference_seconds=83,
    ),
    Lesson(
        notebook="05_data_loading_playbook",
        title="the data-loading playbook: DataConfig, caching, shuffling, other trainers",
        headline="XGBoost val accuracy",
        floor=0.90,
        exercises=("05.1", "05.2"),
        budget="playbook",
        shared=("max_workers",),
        sources=("cifar10",),
        plan=lambda b, p: f"{_workers(p)}, {b.playbook.rows} rows, XGBoost and TensorFlow",
        reference_seconds=114,
    ),
    Lesson(
        notebook="06_ray_serve",
        title="serve the fine-tuned model with Ray Serve",
        headline="dogs-vs-fish accuracy served over HTTP",
        floor=0.85,
        exercises=("06.1", "06.2"),
        budget="serve",
        sources=("imagenette", "imagenette_labels", "model"),
        plan=lambda b, p: (
            f"Ray Serve, up to {b.serve.max_replicas} replica(s) "
            f"({'1 GPU each' if p.gpus_per_actor else 'CPU'}), a load test of {b.serve.load_requests} requests"
        ),
        reference_seconds=83,
        runs_in_browser=False,
    ),
    Lesson(
        notebook="07_ray_tune",
        title="choose the hyperparameters with Ray Tune, over Ray Train",
        headline="CIFAR-10 test accuracy, tuned",
        floor=0.25,
        exercises=("07.1", "07.2"),
        budget="tune",
        reads=("cifar",),
        sources=("cifar10",),
        plan=lambda b, p: (
            f"Ray Tune, {b.tune.samples} trials with ASHA, then {b.tune.train_samples} trials of "
            f"{b.tune.workers} Ray Train worker(s) each"
        ),
        reference_seconds=171,  # timed 2026-11-25
    ),
)


def lesson_named(notebook: str) -> Lesson:
    """The record of ``notebook`` (``"03_ray_data"``, or a path to it); an error that names the fix if none."""
    name = str(notebook).rsplit("/", 1)[-1].removesuffix(".ipynb")
    for lesson in LESSONS:
        if lesson.notebook == name:
            return lesson
    raise KeyError(
        f"no lesson named {name!r} in helpers/course/lessons.py: add a Lesson(notebook={name!r}, ...) record there "
        f"(known: {', '.join(lesson.notebook for lesson in LESSONS)})"
    )
