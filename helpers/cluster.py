"""Connecting to Ray, and deciding what to ask it for from what the cluster really has."""

from __future__ import annotations

import logging
import os

import ray
import ray.data
from ray._private import ray_constants

from helpers.config import verbose

LOCAL_CPUS = 8  # logical CPUs for a local runtime: a 2-worker trainer and a 2-actor pool fit
LOCAL_DATA_CPUS = 4  # the least Ray Data may use at once on this machine: a 2-actor pool and its reads fit
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


# Library chatter a Ray worker would forward to the notebook, line by line: TensorFlow's C++ info logs,
# progress bars of data sets and downloads, Transformers' per-worker load reports and advice.
QUIET_WORKERS = {
    "TF_CPP_MIN_LOG_LEVEL": "2",
    "HF_DATASETS_DISABLE_PROGRESS_BARS": "1",
    "HF_HUB_DISABLE_PROGRESS_BARS": "1",
    "TRANSFORMERS_VERBOSITY": "error",
    "TRANSFORMERS_NO_ADVISORY_WARNINGS": "1",
    "RAY_DATA_LOG_LEVEL": "WARNING",  # Ray Data's actors: no "Dataset ... execution finished" line per epoch
    # iter_torch_batches hands torch the read-only arrays of the object store, zero-copy; torch warns once
    # per worker, though nothing writes into a batch.
    "PYTHONWARNINGS": "ignore:The given NumPy array is not writable:UserWarning",
}


# Ray Train settings for a cluster on one machine (scripts/with-ray-cluster.sh exports the same):
# `ray.train.report` returns in 0.2 s instead of 2 s, and no preemption watcher (it looks for cloud
# spot-instance notices, and kept half a CPU core busy on a 2-core laptop).
ON_THIS_MACHINE = {"RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.2", "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0"}
# Anywhere: Ray Train's print patch sends a worker's every print() to a logger *and* to stdout (each line
# twice), and defeats libraries that capture stdout (dill's did, and leaked pages of bytecode). Its
# structured logging sets every worker's root logger to DEBUG, so each library's info lines reach the
# notebook. Without both, a worker prints as any Python process does: its prints, warnings and errors.
# (The controller keeps its structured logging: that one follows RunConfig's LoggingConfig.)
PLAIN_WORKER_OUTPUT = {"RAY_TRAIN_ENABLE_PRINT_PATCH": "0", "RAY_TRAIN_ENABLE_WORKER_STRUCTURED_LOGGING": "0"}


# This process's own Ray core (C++): errors only; its warnings are about Ray's internals, not the lesson. Lines Ray
# logs as errors still come through (a Ray Data actor pool's constructor arguments kept in the object store; the
# GCS's "Failed to kill actor" for an actor already gone, which every attached driver receives).
QUIET_DRIVER = {"RAY_BACKEND_LOG_LEVEL": "error"}


# What a worker needs to reach what this process reaches, passed on when set here: the bucket of the storage
# path or of the sources (endpoint, keys, region; a node with a cloud role of its own needs none), and the Hub.
PASSED_TO_WORKERS = (
    "AWS_ENDPOINT_URL",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "HF_ENDPOINT",
    "HF_TOKEN",
    "HF_HUB_OFFLINE",
    "HF_DATASETS_OFFLINE",
)


def init_ray(runtime_env: dict | None = None) -> dict[str, float]:
    """Attach to the cluster in ``$RAY_ADDRESS`` if set, else start a local runtime; return its resources.

    On this machine (a local runtime, or the course's local cluster) Ray stays on 127.0.0.1: nothing is
    reachable from the network. ``runtime_env`` (for example ``{"env_vars": {...}}``) reaches every task
    and actor of this job. Workers keep libraries' info logs and progress bars to themselves unless
    ``COURSE_VERBOSE=1``. The settings in :data:`PASSED_TO_WORKERS` that are set here reach every worker.
    """
    if is_on_this_machine(os.environ.get("RAY_ADDRESS")):
        keep_on_loopback()
        for name, value in ON_THIS_MACHINE.items():  # Ray Train reads them here and passes them on
            os.environ.setdefault(name, value)
    for name, value in ({} if verbose() else PLAIN_WORKER_OUTPUT | QUIET_DRIVER).items():
        os.environ.setdefault(name, value)
    runtime_env = dict(runtime_env or {})
    passed = {name: os.environ[name] for name in PASSED_TO_WORKERS if name in os.environ}
    quiet = {} if verbose() else QUIET_WORKERS
    if passed or quiet:
        runtime_env["env_vars"] = passed | quiet | runtime_env.get("env_vars", {})
    if not verbose():
        for name, value in QUIET_WORKERS.items():  # this process too (notebook 05 imports TensorFlow here)
            os.environ.setdefault(name, value)
    options = {
        "ignore_reinit_error": True,
        "logging_level": "WARNING",
        "runtime_env": runtime_env or None,
    }
    if os.environ.get("RAY_ADDRESS"):
        ray.init(**options)
    else:  # alone in JupyterLab: a local runtime with enough logical CPUs to avoid deadlocks
        ray.init(num_cpus=max(LOCAL_CPUS, os.cpu_count() or 1), **options)
    return ray.cluster_resources()


def configure_ray_data(preserve_order: bool = True) -> ray.data.DataContext:
    """The course's Ray Data settings, in one place: call it once after :func:`init_ray`.

    * quiet: no start banners, Ray Data logs warnings only (``COURSE_VERBOSE=1`` keeps Ray's own output).
      Progress bars stay on: in a terminal they show; where output is not a terminal (a notebook, a
      worker) Ray Data writes progress as info log lines, which this level keeps out;
    * the classic file reader: Ray 2.60's new one ("datasource V2") spent about 25 s listing one
      parquet file on a 2-core machine, the classic one about 1 s;
    * ``preserve_order``: blocks come out in order, so the same split, shards and batches, hence the same
      model, on every run (notebook 05 shows what it costs and when to turn it off);
    * on this machine (a local runtime or the local cluster, whose logical CPUs share its cores), at most
      as many CPUs at once as it has cores (at least :data:`LOCAL_DATA_CPUS`): more tasks at once only start
      more worker processes, each importing Ray Data, and a job's first pipeline waited for all of them
      (measured on 2 cores: 15 s before its first block, 6 s with this limit).
    """
    context = ray.data.DataContext.get_current()
    if not verbose():
        context.print_on_execution_start = False
        logging.getLogger("ray.data").setLevel(logging.WARNING)
    context.use_datasource_v2 = False
    context.execution_options.preserve_order = preserve_order
    if is_on_this_machine(os.environ.get("RAY_ADDRESS")):
        cpus = max(LOCAL_DATA_CPUS, os.cpu_count() or 1)
        context.execution_options.resource_limits = context.execution_options.resource_limits.copy(cpu=cpus)
    return context
