"""Start a Ray worker node that joins the head at 127.0.0.1:PORT, then leave it running and return.

scripts/with-ray-cluster.sh runs this for a node that shares no files with the checkout (COURSE_RAY_ISOLATED_NODE=1):
inside a mount namespace of its own, where the checkout (with data/ and results/) is hidden under an empty read-only
folder, with the locked packages but not the course's own (`helpers` reaches it only through the job's runtime env),
and a temp folder of its own. It is a copy of this file, outside the checkout, that runs there.

    python cluster_node.py --port 6389 --cpus 8 --temp-dir /tmp/ray-course-...-node

`with-ray-cluster.sh node start` runs it too, with --shares-files, to start the usual worker node again after `node
stop`: a node that shares the checkout and the head's temp folder.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # before `import ray`: the node and its workers on loopback

import ray  # noqa: E402

# Ray internals, here and not in course.internals (the course is not installed where this runs): an entry there
import ray._private.node  # noqa: E402
import ray._private.parameter  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True, help="the head node's GCS port")
    parser.add_argument("--cpus", type=int, required=True)
    parser.add_argument("--gpus", type=int, default=0)
    parser.add_argument("--object-store-bytes", type=int, required=True)
    parser.add_argument("--temp-dir", required=True, help="this node's own temp folder, or the head's (--shares-files)")
    parser.add_argument(
        "--shares-files",
        action="store_true",
        help="a node that shares the checkout and the head's temp folder, whose log monitor reads its logs too (the "
        "local cluster's usual worker node, started again by `with-ray-cluster.sh node start`)",
    )
    args = parser.parse_args()

    address = f"127.0.0.1:{args.port}"
    params = ray._private.parameter.RayParams(
        gcs_address=address,
        num_cpus=args.cpus,
        num_gpus=args.gpus,
        object_store_memory=args.object_store_bytes,
        temp_dir=args.temp_dir,
        min_worker_port=0,
        max_worker_port=0,
        node_manager_port=0,
        include_log_monitor=not args.shares_files,  # its own, unless the head's reads this node's logs already
    )
    params.dashboard_agent_listen_port = None  # a free port, as the head's (local_cluster.head_node_args)
    node = ray._private.node.Node(params, head=False, shutdown_at_exit=False, spawn_reaper=False)
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    deadline = time.monotonic() + 60
    while not any(n["Alive"] and n["NodeID"] == node.node_id for n in ray.nodes()):
        if time.monotonic() > deadline:
            nodes = [(n["NodeID"], n["Alive"]) for n in ray.nodes()]
            raise SystemExit(f"the node {node.node_id} did not join {address} within 60 s; nodes: {nodes}")
        time.sleep(0.5)
    kind = "a worker node" if args.shares_files else "a worker node that shares no files"
    print(f"[ray-cluster] {kind} joined {address}: {args.cpus} CPUs, temp {args.temp_dir}")
    ray.shutdown()


if __name__ == "__main__":
    main()
