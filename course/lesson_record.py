"""What the course knows about one lesson: the :class:`Lesson` record. ``course.lessons.LESSONS`` holds one per
notebook, in the course's order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from course.claims import Claim
from course.gpu_memory import GpuWork


@dataclass(frozen=True)
class Lesson:
    """One lesson: its notebook, what it shows, what it must reach, and what it reads."""

    notebook: str  # the notebook's name without .ipynb, in notebooks/ and solutions/: "03_ray_data"
    title: str  # what it teaches, in a few words
    headline: str  # the one figure it records (results.record), by name
    floor: float  # the least that figure may be: below it the model did not learn enough
    exercises: tuple[str, ...]  # its exercises' ids, in order: ("03.1", "03.2")
    budget: str  # the section of course.budget.Budget that holds its knobs ("dogs": budget.dogs)
    reads: tuple[str, ...] = ()  # other lessons' sections it reads too (07 starts from 04's choices: "cifar")
    shared: tuple[str, ...] = ()  # the fields every lesson shares that it reads too (course.budget.Budget.shared)
    sources: tuple[str, ...] = ()  # what it reads from course.sources.Sources
    # modules it imports beyond the course's own dependencies (pyproject.toml's extras), checked by require_sources
    packages: tuple[str, ...] = ()
    plan: Callable[[Any, Any], str] = lambda budget, plan: ""  # what it asks Ray for (make doctor), from budget, plan
    # what it runs on each GPU of a plan with GPUs, from the budget and the plan: course.gpu_memory's GpuWork, whose
    # memory and time make doctor estimates for the cluster's GPU (gpu_memory.gpu_estimates)
    gpu_work: Callable[[Any, Any], list[GpuWork]] = lambda budget, plan: []
    reference_seconds: int = 60  # a fresh clone's `make run` of it on the reference machine (2 cores; make doctor)
    runs_in_browser: bool = True  # run by the browser test (notebook 06 has its own: tests/lessons/test_serve.py)
    # the floor with COURSE_SOURCES=real (None: the same), argued from the model and the real data, not measured here:
    # the rehearsal's content is drawn and its weights random (docs/instructors.md)
    real_floor: float | None = None
    # with COURSE_SOURCES=real, the cpu budget's run of it at the real model's and images' sizes (the real-sources
    # rehearsal on the reference machine: tests/support/real_sources_rehearsal.py prints it; None: as reference_seconds)
    real_reference_seconds: int | None = None
    claims: tuple[Claim, ...] = ()  # what its measurements show, each held by a test on the figures it records

    def floor_for(self, sources: str) -> float:
        """The floor with ``sources`` (``"standin"`` or ``"real"``)."""
        return self.real_floor if sources == "real" and self.real_floor is not None else self.floor

    def reference_seconds_for(self, sources: str) -> int:
        """Its time on the reference machine with the cpu budget and ``sources`` (``"standin"`` or ``"real"``)."""
        real = sources == "real" and self.real_reference_seconds is not None
        return self.real_reference_seconds if real else self.reference_seconds

    @property
    def number(self) -> str:
        """``"03"`` for ``03_ray_data``: the prefix of its exercises' ids."""
        return self.notebook.split("_", 1)[0]

    @property
    def exercises_module(self) -> str:
        """The module of its exercise checks: ``course.exercises.ray_data`` for ``03_ray_data``."""
        return f"course.exercises.{self.notebook.split('_', 1)[1]}"
