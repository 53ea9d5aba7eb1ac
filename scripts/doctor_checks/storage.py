"""The storage path (``COURSE_STORAGE_PATH``): written from each node, and what each wrote read back by every other
(``course.cluster.write_marker`` and ``unread_markers`` ran on the nodes)."""

from __future__ import annotations

from doctor_checks import Check, node_label


def check_storage(storage: str, nodes: list[dict], writes: list, reads: list) -> Check:
    fix = (
        "set COURSE_STORAGE_PATH to a folder every node shares (an NFS mount such as /mnt/cluster_storage) "
        "or to a bucket (s3://bucket/prefix)"
    )
    problems = []
    for index, (node, error) in enumerate(zip(nodes, writes, strict=True)):
        if error:
            problems.append(f"{node_label(node, index)} cannot write there ({error})")
    labels = {n["NodeID"]: node_label(n, i) for i, n in enumerate(nodes)}
    written = {n["NodeID"] for n, error in zip(nodes, writes, strict=True) if not error}
    for index, (node, missing) in enumerate(zip(nodes, reads, strict=True)):
        if isinstance(missing, Exception):
            problems.append(f"{node_label(node, index)} cannot read there ({missing})")
            continue
        unseen = [labels[m] for m in missing if m in written and m != node["NodeID"]]
        if unseen:
            problems.append(f"{node_label(node, index)} does not see what {', '.join(unseen)} wrote")
    if problems:
        return Check("storage", False, f"{storage}: " + "; ".join(problems), fix)
    return Check("storage", True, f"{storage}: written by each of {len(nodes)} node(s), read back by every node")
