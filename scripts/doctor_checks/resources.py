"""The cluster's resources: nodes, CPUs, GPUs, memory and object store, and enough CPUs for the notebooks' plan."""

from __future__ import annotations

from doctor_checks import Check
from doctor_checks.plan import planned


def check_resources(nodes: list[dict], resources: dict[str, float]) -> Check:
    gib = 1024**3
    per_node = []
    for node in nodes:
        has = node["Resources"]
        per_node.append(
            f"{has.get('CPU', 0):.0f} CPU/{has.get('GPU', 0):.0f} GPU/{has.get('memory', 0) / gib:.0f} GiB/"
            f"store {has.get('object_store_memory', 0) / gib:.1f} GiB"
        )
    found = f"{len(nodes)} node(s): " + "; ".join(per_node)
    _, plan = planned(resources)
    cpus = int(resources.get("CPU", 0))
    needed = plan.num_workers + 1  # every Ray Train worker holds a CPU; Ray Data needs one more to read
    if cpus < needed:
        return Check(
            "resources",
            False,
            f"{found}: {cpus} CPU(s), fewer than the {needed} a notebook needs (Ray Data would wait forever)",
            "give Ray more logical CPUs (`ray start --num-cpus=4`) or add a node",
        )
    return Check("resources", True, found)
