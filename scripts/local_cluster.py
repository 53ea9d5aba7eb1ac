"""Start a head node and one worker node on this machine, both listening on 127.0.0.1 only.

Called by scripts/with-ray-cluster.sh (which exports RAY_AUTH_MODE=token and the token path); it
returns once both nodes are up and leaves them running; the shell script stops them.

Why not two `ray start` calls: on Linux `ray start` rewrites 127.0.0.1 to the machine's LAN address
and binds its servers on every interface; with RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 it keeps loopback
but refuses a second node. Ray's own multi-node-on-one-machine tool, `ray.cluster_utils.Cluster`,
starts nodes directly, so with that setting both nodes bind to 127.0.0.1. It also gives the second
node no log monitor of its own: a line a worker prints reaches the driver once, not once per node.
It starts no Ray Client server (nothing on port 10001).

    python scripts/local_cluster.py --port 6389 --cpus-per-node 4 --temp-dir /tmp/ray-course-...
"""

from __future__ import annotations

import argparse
import os

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before `import ray`: every node and worker on loopback

import psutil  # noqa: E402
import ray  # noqa: E402
import ray._private.utils  # noqa: E402
import torch  # noqa: E402
from ray.cluster_utils import Cluster  # noqa: E402

# Cluster() notes its address in /tmp/ray/ray_current_cluster for Ray's own tests; here that would point
# a learner's `ray.init(address="auto")` at this cluster (and fails when /tmp/ray does not exist). A reach into
# Ray's internals, listed in course/internals.py's table: it stays here, since this script runs from any environment
# with the locked packages, where the course's own packages may not be importable (tests/cluster/test_local_cluster.py).
ray._private.utils.write_ray_address = lambda *args, **kwargs: None

GiB = 1024**3


def object_store_bytes() -> int:  # scripts/with-ray-cluster.sh gives the isolated node the same
    """Object store per node: 5 % of this machine's memory, between 1 and 4 GiB (two nodes share it). Ray Data fills
    what it is given with blocks in flight (full-size photos in notebook 03 on the real sources), and spills to disk
    beyond it: 1 GiB a node on a laptop (docs/instructors.md has what each lesson peaks at), and a 24 GB machine
    measures what an 8 GB one would. A GPU server (80 GB and more) gets 4 GiB."""
    return int(min(4 * GiB, max(1 * GiB, 0.05 * psutil.virtual_memory().total)))


def machine_gpus() -> int:
    """The CUDA GPUs this machine shows (``CUDA_VISIBLE_DEVICES`` respected), for the head node to report.

    Said as a number: Ray's ``Cluster`` fills a ``num_gpus`` that is missing or None with 0, so the cluster would
    report no GPU on a GPU machine, and every lesson would run on its CPUs (seen on one H200 on 2026-11-26)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def node_args(cpus: int, temp_dir: str) -> dict:
    """What both nodes are started with."""
    return dict(
        num_cpus=cpus,
        object_store_memory=object_store_bytes(),
        temp_dir=temp_dir,
        min_worker_port=0,  # workers take free ports chosen by the OS, on 127.0.0.1
        max_worker_port=0,
    )


def head_node_args(node: dict, port: int, head_only: bool) -> dict:
    """The head node's: the machine's GPUs, the GCS and dashboard ports; started alone, no CPUs and no GPUs."""
    return {
        **node,
        # head only: no CPUs, so that every task and worker that needs one runs on the other node, and no GPUs: a
        # GPU worker needs its CPU on the same node, and the isolated worker node reports none (a CPU cluster)
        **({"num_cpus": 0, "num_gpus": 0} if head_only else {"num_gpus": machine_gpus()}),  # the worker node: none
        "gcs_server_port": port,
        "include_dashboard": True,  # also serves the state API that Ray Train's controller polls
        "dashboard_host": "127.0.0.1",
        "dashboard_port": port + 1,
        # its agent on a free port, not Ray's default 52365: two local clusters can run side by side
        "dashboard_agent_listen_port": 0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="the head node's GCS port")
    parser.add_argument("--cpus-per-node", type=int, required=True)
    parser.add_argument(
        "--worker-gpus", type=int, default=0, help="GPUs the worker node reports (the head reports the GPUs it finds)"
    )
    parser.add_argument("--temp-dir", required=True, help="Ray's temp folder: every process names it")
    parser.add_argument(
        "--head-only",
        action="store_true",
        help="start the head node alone, with no CPUs (the worker node joins later: scripts/cluster_node.py)",
    )
    args = parser.parse_args()

    node = node_args(args.cpus_per_node, args.temp_dir)
    cluster = Cluster(
        initialize_head=True,
        head_node_args=head_node_args(node, args.port, args.head_only),
        shutdown_at_exit=False,  # the nodes outlive this script; `with-ray-cluster.sh stop` ends them
    )
    if not args.head_only:  # no log monitor on the second node: a line a worker prints reaches the driver once
        cluster.add_node(**node, num_gpus=args.worker_gpus)
    ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    nodes = [n for n in ray.nodes() if n["Alive"]]
    resources = ray.cluster_resources()
    print(
        f"[ray-cluster] up at {cluster.address}: {len(nodes)} nodes, {resources.get('CPU', 0):.0f} CPUs, "
        f"{resources.get('GPU', 0):.0f} GPUs, listening on {sorted({n['NodeManagerAddress'] for n in nodes})}"
    )
    print(f"[ray-cluster] dashboard: http://127.0.0.1:{args.port + 1} (it asks for the token in .cluster/auth_token)")
    ray.shutdown()


if __name__ == "__main__":
    main()
