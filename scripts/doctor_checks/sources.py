"""The sources (``COURSE_SOURCES``): the stand-ins built and seen from every node, or the buckets there; with the real
sources, the Hub's row too (:mod:`doctor_checks.hub`)."""

from __future__ import annotations

from pathlib import Path

from course.config import SOURCES_ENV
from course.sources import BUILD_COMMAND, get_sources, is_local, require_data
from doctor_checks import Check, node_label
from doctor_checks.hub import check_hub
from doctor_checks.plan import planned


def local_sources(sources) -> list[str]:
    """The local paths among the sources that exist here: every node must see them too (Ray reads them there)."""
    return [u for k, u in vars(sources).items() if k != "kind" and is_local(u) and Path(u).exists()]


def check_sources(nodes: list[dict], missing_by_node: list, resources: dict[str, float]) -> list[Check]:
    budget, _ = planned(resources)
    sources = get_sources(budget=budget)
    checks = []
    try:
        require_data(sources)
        found = f"{sources.kind}: everything is there"
        local = local_sources(sources)
        problems = []
        for index, (node, missing) in enumerate(zip(nodes, missing_by_node, strict=True)):
            if isinstance(missing, Exception):  # the node could not run the course's task: see the versions row
                problems.append(f"{node_label(node, index)}: no answer ({missing})")
            elif missing:
                problems.append(f"{node_label(node, index)} lacks {', '.join(missing)}")
        if problems:
            checks.append(
                Check.failed(
                    "sources",
                    problems,
                    "put the data on storage every node mounts: `make data COURSE_DATA_DIR=/mnt/cluster_storage/"
                    "vit-ray-course/data`, then set COURSE_DATA_DIR there for the notebooks too",
                )
            )
        else:
            checks.append(
                Check("sources", True, found + (f", seen from every node ({len(local)} local)" if local else ""))
            )
    except FileNotFoundError as error:
        fix = f"run `{BUILD_COMMAND}`" if sources.kind == "standin" else f"check the URI, or {SOURCES_ENV}"
        checks.append(Check("sources", False, str(error).split(". ")[0], fix))
    if sources.kind == "real":
        checks.append(check_hub(sources))
    return checks
