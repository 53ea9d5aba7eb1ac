"""Connecting to Ray, and deciding what to ask it for from what the cluster really has."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

import ray
import ray.data
from ray._private import ray_constants

LOCAL_CPUS = 8  # logical CPUs for a local runtime: a 2-worker trainer and a 2-actor pool fit
LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")
# Ray's switch for single-machine mode: with it off, Ray keeps 127.0.0.1 as it is instead of swapping in
# the machine's LAN address (and then binding its servers on every interface).
SINGLE_MACHINE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def is_on_this_machine(address: str | None) -> bool:
    """True for no address (a local runtime) or a loopback ``host:port``, False for a remote cluster."""
    return not address or address.rsplit(":", 1)[0] in LOOPBACK


def keep_on_loopback() -> None:
    """Ray on this machine listens on 127.0.0.1 only: for this process and every process it starts."""
    os.environ[SINGLE_MACHINE] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False  # read when Ray resolves this node's address


def init_ray(runtime_env: dict | None = None) -> dict[str, float]:
    """Attach to the cluster in ``$RAY_ADDRESS`` if set, else start a local runtime; return its resources.

    On this machine (a local runtime, or the course's local cluster) Ray stays on 127.0.0.1: nothing is
    reachable from the network. ``runtime_env`` (for example ``{"env_vars": {...}}``) reaches every task
    and actor of this job.
    """
    if is_on_this_machine(os.environ.get("RAY_ADDRESS")):
        keep_on_loopback()
    options = {"ignore_reinit_error": True, "logging_level": "WARNING", "runtime_env": runtime_env}
    if os.environ.get("RAY_ADDRESS"):
        ray.init(**options)
    else:  # alone in JupyterLab: a local runtime with enough logical CPUs to avoid deadlocks
        os.environ.setdefault("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2")
        ray.init(num_cpus=max(LOCAL_CPUS, os.cpu_count() or 1), **options)
    return ray.cluster_resources()


@dataclass(frozen=True)
class Plan:
    """What to ask Ray for: training workers, inference actors, and GPUs only when they exist."""

    num_workers: int
    use_gpu: bool
    num_actors: int
    gpus_per_actor: float


def plan_resources(resources: dict[str, float], max_workers: int = 2, max_actors: int = 2) -> Plan:
    """A plan that fits ``ray.cluster_resources()``: one GPU per worker and actor if the cluster has GPUs."""
    gpus = int(resources.get("GPU", 0))
    cpus = int(resources.get("CPU", 0))
    if gpus:
        return Plan(
            num_workers=min(max_workers, gpus), use_gpu=True, num_actors=min(max_actors, gpus), gpus_per_actor=1
        )
    # CPU only: leave a CPU for Ray Data's reads next to every worker and actor.
    workers = max(1, min(max_workers, cpus // 2))
    actors = max(1, min(max_actors, (cpus - workers) // 2))
    return Plan(num_workers=workers, use_gpu=False, num_actors=actors, gpus_per_actor=0)


def quiet_ray_data() -> None:
    """Fewer Ray Data log lines in notebooks: no progress bars or start banners, warnings only."""
    context = ray.data.DataContext.get_current()
    context.enable_progress_bars = False
    context.enable_operator_progress_bars = False
    context.print_on_execution_start = False
    logging.getLogger("ray.data").setLevel(logging.WARNING)
