"""The instructor's pre-flight: check the cluster in RAY_ADDRESS (or a local Ray) before a workshop.

    make doctor                                  # a local Ray on this machine
    RAY_ADDRESS=10.0.0.5:6379 make doctor        # the workshop's cluster

One table of checks, each ✓ or ✗ with its fix in one line; the exit code is 1 when any check is a
blocker (a notebook would fail or wait forever), 2 when there is no cluster to check. Every check has a
time limit: a busy or broken cluster gives a ✗, never a hang. It checks:

* the versions of Python, torch, Ray and transformers on the driver and on every node, against the lock;
* nodes, CPUs, GPUs, memory and object store; on every node Ray says has GPUs, whether torch sees them;
* the storage path (``COURSE_STORAGE_PATH``): written from each node and read back from every other;
* the sources (``COURSE_SOURCES``): stand-ins built and seen from every node, or buckets and the Hub reachable;
* the plan each notebook will use on this cluster, and an estimate of its run time.

Each kind of check is a module of ``scripts/doctor_checks/``. This file holds what runs on the nodes, and the run:
Ray ships the functions of ``__main__`` to the nodes by value, and ``scripts/`` does not travel with the job.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import os
import platform
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run from a checkout (`python scripts/doctor.py`): the course's packages are there

# The driver's imports. The functions that run on the nodes import what they need themselves, where they run.
from doctor_checks import NOT_OK, Check  # noqa: E402
from doctor_checks.connection import TASK_TIMEOUT_S, address_problem, alive_nodes, connect, gather, names_of  # noqa: E402
from doctor_checks.gpus import check_gpus  # noqa: E402
from doctor_checks.plan import plan_rows  # noqa: E402
from doctor_checks.resources import check_resources  # noqa: E402
from doctor_checks.sources import check_sources, local_sources  # noqa: E402
from doctor_checks.storage import check_storage  # noqa: E402
from doctor_checks.versions import PACKAGES, check_versions  # noqa: E402

from course.cluster import on_node, unread_markers  # noqa: E402
from course.deadline import first_line  # noqa: E402
from course.sources import get_sources  # noqa: E402
from course.storage import filesystem, storage_path  # noqa: E402

# --- what each node reports (these run on the nodes) ---------------------------------------------------


def versions_here() -> dict[str, str]:
    """Python's and the pinned packages' versions in this process (no import of torch: metadata only)."""
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = "missing"
    try:  # the course's own package: on a worker node it comes with the job's runtime env (py_modules)
        import helpers

        found["helpers"] = "runtime env" if "runtime_resources" in Path(helpers.__file__).parts else "installed"
    except ImportError:
        found["helpers"] = "missing"
    return found


def torch_gpus() -> dict[str, object]:
    """What torch sees in a task that Ray gave a GPU: CUDA available, how many devices, their names."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return {
        "cuda": bool(count),
        "count": count,
        "names": [torch.cuda.get_device_name(i) for i in range(count)],
        "memory_gib": min((torch.cuda.get_device_properties(i).total_memory / 2**30 for i in range(count)), default=0),
        "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        "torch": torch.__version__,
    }


def node_report(storage: str, folder: str, name: str, local_paths: list[str]) -> dict[str, object]:
    """What a node says alone: its versions, whether it could write to the storage, which local sources it lacks."""
    from course.cluster import missing_paths, write_marker

    return {
        "versions": versions_here(),
        "write": write_marker(storage, folder, name),
        "missing": missing_paths(local_paths),
    }


def probe_seconds(steps: int = 5, batch_size: int = 64) -> float:
    """Seconds for a few training steps of the small CIFAR-10 ViT on one CPU: the unit of the estimates."""
    import torch

    from helpers.vit import SMALL, VisionTransformer

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = VisionTransformer(SMALL)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    images, labels = torch.randn(batch_size, 3, 32, 32), torch.randint(0, 10, (batch_size,))
    loss_of = torch.nn.CrossEntropyLoss()
    start = None
    for step in range(steps + 1):  # the first step warms up and is not counted
        if step == 1:
            start = time.perf_counter()
        optimizer.zero_grad()
        loss_of(model(images), labels).backward()
        optimizer.step()
    return time.perf_counter() - start


# --- the run -----------------------------------------------------------------------------------------------


def run_checks() -> list[Check]:
    resources = connect(TASK_TIMEOUT_S)
    nodes = alive_nodes()
    storage = storage_path()
    folder = f".doctor-{uuid.uuid4().hex[:8]}"
    local = local_sources(get_sources())

    # One task per node answers what it can alone; then every node reads what the others wrote. The GPU
    # checks and the probe go alongside. Few tasks, so few new worker processes: each costs seconds.
    gpu_nodes = [n for n in nodes if n["Resources"].get("GPU", 0)]
    reports = gather([on_node(node_report, n).remote(storage, folder, n["NodeID"], local) for n in nodes])
    names = names_of(nodes)
    # where the notebooks' workers run: the node with the most CPUs (a head may keep none)
    worker_node = max(reversed(nodes), key=lambda node: node["Resources"].get("CPU", 0))
    answers = iter(  # waited for together, one time limit for all
        gather(
            [on_node(unread_markers, n).remote(storage, folder, names) for n in nodes]
            + [on_node(torch_gpus, n, num_gpus=1).remote() for n in gpu_nodes]
            + [on_node(probe_seconds, worker_node, num_cpus=1).remote()]
        )
    )
    reads = [next(answers) for _ in nodes]
    gpus = {name: next(answers) for name in names_of(gpu_nodes)}
    probe = next(answers)
    # The driver tidies up. A storage it cannot reach (pyarrow's OSError), or a path it cannot read (ValueError),
    # holds nothing of the doctor's: the storage row says why.
    with contextlib.suppress(OSError, ValueError):
        fs, path = filesystem(storage)
        fs.delete_dir(f"{path}/{folder}")
    failed = [r if isinstance(r, Exception) else None for r in reports]
    versions = [f or r["versions"] for f, r in zip(failed, reports, strict=True)]
    writes = [str(f) if f else r["write"] for f, r in zip(failed, reports, strict=True)]
    missing = [f or r["missing"] for f, r in zip(failed, reports, strict=True)]

    checks = [check_versions(nodes, versions, versions_here()), check_resources(nodes, resources)]
    checks += [check_gpus(nodes, gpus), check_storage(storage, nodes, writes, reads)]
    checks += check_sources(nodes, missing, resources)
    measured = [g["memory_gib"] for g in gpus.values() if isinstance(g, dict) and g.get("memory_gib")]
    return checks + plan_rows(resources, probe, min(measured) if measured else None)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    address = os.environ.get("RAY_ADDRESS")
    start = time.perf_counter()
    print(f"make doctor: checking {'the cluster at ' + address if address else 'a local Ray on this machine'}")
    problem = address_problem(address)
    if problem:
        fix = (
            "start the cluster (`scripts/with-ray-cluster.sh start`), correct RAY_ADDRESS, or unset it for a local Ray"
        )
        print("\n".join(Check("cluster", False, problem, fix).lines()))
        return 2
    try:
        checks = run_checks()
    except Exception as error:
        print(f"{NOT_OK} {'cluster':<10} cannot connect: {first_line(error, 200)}")
        print(f"  {'':<10} fix: check RAY_ADDRESS and the token (RAY_AUTH_TOKEN_PATH), or unset it for a local Ray")
        return 2
    for check in checks:
        print("\n".join(check.lines()))
    blockers = [c for c in checks if not c.ok]
    verdict = f"{len(blockers)} blocker(s): fix them before the workshop" if blockers else "ready"
    print(f"{verdict} ({time.perf_counter() - start:.0f} s)")
    return 1 if blockers else 0


if __name__ == "__main__":
    sys.exit(main())
