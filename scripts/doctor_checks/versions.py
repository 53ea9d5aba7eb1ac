"""The versions of Python, torch, Ray and transformers on the driver and on every node, against the lock; and the
course's package ``helpers``, installed or through the job's runtime env."""

from __future__ import annotations

import re
from pathlib import Path

from doctor_checks import Check, node_label

LOCK = Path(__file__).resolve().parents[2] / "requirements" / "lock.txt"
PACKAGES = ("torch", "ray", "transformers")  # the ones whose versions must match the lock on every node


def locked_versions(lock_text: str) -> dict[str, str]:
    """``name -> version`` of the pinned packages in the lock file's text."""
    pins = dict(re.findall(r"^([a-z0-9_.-]+)==([^\s;]+)", lock_text, re.MULTILINE))
    return {name: pins[name] for name in PACKAGES if name in pins}


def version_differences(found: dict[str, str], locked: dict[str, str], python: str) -> list[str]:
    """What in ``found`` differs from the lock (a local tag like ``+cpu`` does not count) or the driver's Python."""
    wrong = [
        f"{name} {found.get(name)} (lock: {want})"
        for name, want in locked.items()
        if found.get(name, "").split("+")[0] != want
    ]
    if found.get("python") != python:
        wrong.append(f"Python {found.get('python')} (driver: {python})")
    if found.get("helpers") == "missing":
        wrong.append("the course's package `helpers` is not installed")
    return wrong


def check_versions(nodes: list[dict], reports: list, driver: dict[str, str]) -> Check:
    """The row of the versions: ``reports`` are the nodes' (``doctor.versions_here`` on each), ``driver`` this
    process's."""
    locked = locked_versions(LOCK.read_text())
    problems = [f"driver: {w}" for w in version_differences(driver, locked, driver["python"])]
    for index, (node, report) in enumerate(zip(nodes, reports, strict=True)):
        if isinstance(report, Exception):
            problems.append(f"{node_label(node, index)}: no answer ({report})")
            continue
        problems += [f"{node_label(node, index)}: {w}" for w in version_differences(report, locked, driver["python"])]
    summary = f"Python {driver['python']}, " + ", ".join(f"{n} {driver[n]}" for n in PACKAGES)
    if problems:
        return Check.failed(
            "versions",
            problems,
            "give every node the locked packages (the cluster's image: deploy/Dockerfile); the course's own code "
            "travels with the job (course.cluster.job_runtime_env), nothing else is installed by hand",
        )
    shipped = sum(1 for report in reports if isinstance(report, dict) and report.get("helpers") == "runtime env")
    return Check(
        "versions",
        True,
        f"{summary} on the driver and on {len(nodes)} node(s), as locked; helpers through the job's runtime env on "
        f"{shipped} of them",
    )
