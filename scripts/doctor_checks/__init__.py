"""``make doctor``'s checks, one kind per module; each gives rows of the table (:class:`Check`). They run on the
driver: what runs on the nodes is in ``scripts/doctor.py``, which Ray ships to them by value (docs/development.md,
"Repository layout").

==============  ================================================================================================
module          what it checks
==============  ================================================================================================
connection      reaching the cluster in ``RAY_ADDRESS``, its nodes, and gathering their answers in time
versions        Python, torch, Ray and transformers on the driver and on every node, against the lock
resources       nodes, CPUs, memory and object store: enough for the notebooks' plan
gpus            on every node Ray says has GPUs, whether torch sees them
storage         the storage path (``COURSE_STORAGE_PATH``): written from each node, read back from every other
sources         the sources (``COURSE_SOURCES``): built and seen from every node, or the buckets there
hub             the Hub's data set and model of the real sources: answering, or in the caches offline
plan            each notebook's plan on this cluster and its run time; with GPUs, its memory and time on one
==============  ================================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass

OK, NOT_OK = "✓", "✗"


@dataclass
class Check:
    """One row of the table: what was checked, what was found and, when it failed, the fix."""

    name: str
    ok: bool
    found: str
    fix: str = ""

    @classmethod
    def failed(cls, name: str, problems: list[str], fix: str) -> Check:
        """The row of a check that found ``problems``: each one named, then the fix."""
        return cls(name, False, "; ".join(problems), fix)

    def lines(self) -> list[str]:
        rows = [f"{OK if self.ok else NOT_OK} {self.name:<10} {self.found}"]
        return rows + ([f"  {'':<10} fix: {self.fix}"] if not self.ok and self.fix else [])


def node_label(node: dict, index: int) -> str:
    """How a row names a node of ``ray.nodes()``: its place in the list, its address, and whether it is the head."""
    return f"node {index + 1} ({node['NodeManagerAddress']}{', head' if node.get('IsHeadNode') else ''})"
