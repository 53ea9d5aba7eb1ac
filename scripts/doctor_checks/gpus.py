"""The GPUs: on every node Ray says has GPUs, whether torch sees them (``doctor.torch_gpus`` ran there, in a task that
Ray gave a GPU)."""

from __future__ import annotations

from doctor_checks import Check, node_label


def check_gpus(nodes: list[dict], reports: dict[str, object]) -> Check:
    with_gpus = [(i, n) for i, n in enumerate(nodes) if n["Resources"].get("GPU", 0)]
    if not with_gpus:
        return Check("gpus", True, "none in the cluster: the notebooks use the CPU budget and never ask for a GPU")
    problems, seen = [], []
    for index, node in with_gpus:
        report = reports[node["NodeID"]]
        label, ray_gpus = node_label(node, index), node["Resources"]["GPU"]
        if isinstance(report, Exception):
            problems.append(f"{label}: Ray lists {ray_gpus:.0f} GPU(s), but a task asking for one got {report}")
        elif not report["cuda"]:
            problems.append(
                f"{label}: Ray lists {ray_gpus:.0f} GPU(s), but torch {report['torch']} sees no CUDA device"
            )
        else:
            seen.append(f"{label}: {report['count']}x {report['names'][0]}")
    if problems:
        return Check.failed(
            "gpus",
            problems,
            "start that node with the GPUs it really has (`ray start --num-gpus=0` on a CPU machine), "
            "or install torch's CUDA build there (`make setup` on a machine with nvidia-smi)",
        )
    return Check("gpus", True, "torch sees them: " + "; ".join(seen))
