"""Every reach into a library's internals that the course needs, in one place: each names the release it was written for
and what it relies on, and ``tests/unit/test_internals.py`` fails, naming the entry to review, when an upgrade changes
that. Where a public API does the job, the course uses it instead (notebook 06 reads notebook 03's run with
``ray.train.Result.from_path``).

=================================  ============  ==================================================================
internal (and who uses it)         written for   what it relies on
=================================  ============  ==================================================================
ray_constants.ENABLE_RAY_CLUSTER   Ray 2.60.0    ``ray._private.ray_constants``'s flag, read when Ray resolves this
  cluster.keep_on_loopback                       node's address (``services.get_node_ip_address``): False keeps
                                                 127.0.0.1 (:func:`keep_ray_on_loopback`)
_TorchBackend,                     Ray 2.60.0    ``ray.train.torch.config``: the backend ``TorchConfig`` starts,
_set_torch_distributed_env_vars                  its ``on_start(worker_group, backend_config)``, and the function
  distributed.LoopbackTorchBackend               (no arguments) that sets LOCAL_RANK and friends on a worker
torch TCPStore(master_listen_fd)   torch 2.13.0  a ``TCPStore`` that serves on a socket handed to it (its address
  distributed.join_on_loopback                   chosen by the course: 127.0.0.1)
tls_utils.add_port_to_grpc_server  Ray 2.60.0    ``ray._common.tls_utils.add_port_to_grpc_server(server, address)``
  worker_setup                                   binds Ray's gRPC servers; Serve's replica holds its own reference
                                                 (:func:`rewrite_grpc_server_addresses`)
checkpoint_manager_snapshot.json   Ray 2.60.0    the file Ray Train writes in a run folder once a checkpoint is
  serving.latest_run                             reported (:data:`RUN_SNAPSHOT`); ``Result.from_path`` reads it
Ray Data's logical plan            Ray 2.60.0    the ``InputData`` and ``Limit`` operators, ``input_dependencies``,
  exercises.data_loading_playbook                a ``DataIterator``'s ``_base_dataset`` and its ``_logical_plan.dag``
Deployment._deployment_config      Ray 2.60.0    a deployment's options (``.options(**answer)``); its
  exercises.ray_serve                            ``autoscaling_config``, which ``Deployment`` has no property for
ASHA's settings                    Ray 2.60.0    ``AsyncHyperBandScheduler`` keeps its arguments as ``_metric``,
  exercises.ray_tune                             ``_mode``, ``_time_attr``, ``_reduction_factor``, ``_brackets`` (one
                                                 per bracket) and ``_stop_last_trials``; no public reading exists
get_train_fn_utils                 Ray 2.60.0    ``ray.train.v2._internal.execution.train_fn_utils``: the worker's
  exercises.fault_tolerance,                     ``TrainFnUtils``, whose ``get_checkpoint`` every public spelling of
  exercises.train_runs                           ``ray.train.get_checkpoint`` ends in, and whose ``report`` every
                                                 spelling of ``ray.train.report`` ends in, called with keywords
                                                 (``metrics=``, ``checkpoint=``): :func:`watch_reports`
LocalTrainFnUtils._last_checkpoint Ray 2.60.0    local mode (``num_workers=0``) keeps the last reported checkpoint
  exercises.fault_tolerance                      there and returns it from ``get_checkpoint``; a local run has no
                                                 other way to start from one (:func:`resume_local_run`)
LocalTrainContext.world_size,      Ray 2.60.0    local mode's context (``ray.train.get_context()`` with
world_rank                                       ``num_workers=0``) answers ``get_world_size`` and
  exercises.debugging                            ``get_world_rank`` from these attributes (:func:`pretend_local_world`)
ExecutionContext.result_queue      Ray 2.60.0    a Ray Train worker's reports wait in its ``result_queue`` (a
  train.CrashAt                                  ``queue.Queue``) until the controller's next poll takes them
                                                 (``poll_status``: ``get_nowait``, then ``task_done``); a worker that
                                                 dies first loses them (:func:`wait_until_reports_collected`);
                                                 the interval's setting and default in ``v2._internal.constants``
write_ray_address                  Ray 2.60.0    ``ray._private.utils.write_ray_address``, which ``Cluster()`` calls
  scripts/local_cluster.py                       to note its address in /tmp/ray; replaced there by a no-op (it stays
                                                 in that script: it runs where the course may not be importable)
Node, RayParams                    Ray 2.60.0    ``ray._private.node.Node(ray_params, head, shutdown_at_exit,
  scripts/cluster_node.py                        spawn_reaper)`` and ``ray._private.parameter.RayParams``; they stay
                                                 in that script: it runs on a node where the course is not installed
parquet_datasource.ProgressBar     Ray 2.60.0    ``ray.data._internal.datasource.parquet_datasource``'s own name
  cluster.configure_ray_data                     ``ProgressBar(name, total, unit, enabled=None)``, which draws the
                                                 "Parquet dataset sampling" bar of ``read_parquet``; the quiet
                                                 output leaves it out (:func:`quiet_parquet_sampling`)
DeferSigint                        Ray 2.60.0    ``ray._private.utils.DeferSigint``: a cancelled task's SIGINT that
  worker_setup                                   comes while its arguments are read is held, then passed to the
                                                 handler found before, called: it must be callable
                                                 (:func:`interrupt_on_sigint`)
=================================  ============  ==================================================================

This module imports no library at its top: every Ray worker imports it (``worker_setup``), and the names of
:data:`LAZY` are imported when first asked for (``from course.internals import TorchBackend``).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any

# The releases the entries were written for (requirements/lock.txt pins the same: tests/unit/test_internals.py).
WRITTEN_FOR = {"ray": "2.60.0", "torch": "2.13.0", "transformers": "5.23.0"}

# What Ray Train 2.60 writes in a run folder with its reported checkpoints (ray.train.v2's
# CHECKPOINT_MANAGER_SNAPSHOT_FILENAME): a run folder without it has no checkpoint to read.
RUN_SNAPSHOT = "checkpoint_manager_snapshot.json"

# Internal names the course uses as they are, imported on first use: public name here -> (module, name there).
LAZY = {
    "TorchBackend": ("ray.train.torch.config", "_TorchBackend"),
    "set_torch_distributed_env_vars": ("ray.train.torch.config", "_set_torch_distributed_env_vars"),
    "InputData": ("ray.data._internal.logical.operators.input_data_operator", "InputData"),
    "Limit": ("ray.data._internal.logical.operators.one_to_one_operator", "Limit"),
    "get_train_fn_utils": ("ray.train.v2._internal.execution.train_fn_utils", "get_train_fn_utils"),
}


def __getattr__(name: str) -> Any:
    """The names of :data:`LAZY`, imported from the library when first asked for."""
    if name not in LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = LAZY[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def resume_local_run(checkpoint: Any) -> None:
    """In Ray Train's local mode, inside the training function: ``ray.train.get_checkpoint()`` returns ``checkpoint``
    from now on, as a restarted worker's returns the run's last one. Local mode keeps the last reported checkpoint in
    its ``LocalTrainFnUtils`` and starts with none; Train V2 refuses ``resume_from_checkpoint``."""
    utils = __getattr__("get_train_fn_utils")()
    if not hasattr(utils, "_last_checkpoint"):
        raise RuntimeError(f"{type(utils).__name__} keeps no _last_checkpoint: not Ray 2.60's local mode")
    utils._last_checkpoint = checkpoint


def watch_reports(wrap: Callable[[Callable[..., None]], Callable[..., None]]) -> Callable[[], None]:
    """In a Ray Train worker, or inside a local-mode run: every ``ray.train.report`` of this process goes through
    ``wrap(report)`` from now on, however the learner's code imported it (``ray.train.report``, ``from ray.train
    import report``, ``import ray.train as train``): each spelling ends in this process's ``TrainFnUtils.report``,
    which Ray Train keeps per process (``set_train_fn_utils``). ``wrap`` gets that bound method and returns its
    stand-in, called as Ray calls it, ``report(metrics=..., checkpoint=..., **options)``. Returns the undo."""
    utils = __getattr__("get_train_fn_utils")()
    if not callable(getattr(utils, "report", None)):
        raise RuntimeError(f"{type(utils).__name__} has no report: not Ray 2.60's TrainFnUtils")
    had_own = "report" in vars(utils)  # a watch already in place (nested): put it back as it was
    before = vars(utils).get("report")
    utils.report = wrap(utils.report)

    def undo() -> None:
        if had_own:
            utils.report = before
        else:
            vars(utils).pop("report", None)

    return undo


def pretend_local_world(world_size: int, world_rank: int) -> Callable[[], None]:
    """In Ray Train's local mode, inside the training function: ``ray.train.get_context()`` says ``world_size`` and
    ``world_rank`` from now on, as a worker of a group of that size would (local mode's are 1 and 0). Returns the
    undo. A check runs a learner's function as rank 1 of 2, or after a resize, in seconds and in this process."""
    import ray.train

    context = ray.train.get_context()
    if not all(hasattr(context, name) for name in ("world_size", "world_rank")):
        raise RuntimeError(f"{type(context).__name__} keeps no world_size, world_rank: not Ray 2.60's local mode")
    before = context.world_size, context.world_rank
    context.world_size, context.world_rank = world_size, world_rank

    def undo() -> None:
        context.world_size, context.world_rank = before

    return undo


def wait_until_reports_collected(limit_s: float | None = None) -> bool:
    """In a Ray Train worker: wait until the controller has taken every report this worker made (``ray.train.report``
    puts each in the worker's queue; the controller polls it every health-check interval,
    ``RAY_TRAIN_HEALTH_CHECK_INTERVAL_S``), then one interval more, while the poll's answer travels. False when a
    report is still there after ``limit_s`` (by default 30 s and ten intervals)."""
    import os
    import time

    from ray.train.v2._internal import constants
    from ray.train.v2._internal.execution.context import get_train_context

    interval = float(
        os.environ.get(constants.HEALTH_CHECK_INTERVAL_S_ENV_VAR, constants.DEFAULT_HEALTH_CHECK_INTERVAL_S)
    )
    reports = get_train_context().execution_context.result_queue
    deadline = time.monotonic() + (30 + 10 * interval if limit_s is None else limit_s)
    while reports.unfinished_tasks and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(interval)  # waiting: the controller's answer to its poll is on its way
    return not reports.unfinished_tasks


def keep_ray_on_loopback() -> None:
    """Ray in this process resolves this node's address as 127.0.0.1 (Ray's single-machine mode), as
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` does for the processes started after it is set."""
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = False  # read when Ray resolves this node's address


def quiet_parquet_sampling() -> None:
    """In this process, ``read_parquet`` samples its files without a progress bar ("Parquet dataset sampling", a
    second or two of metadata reads before any block): the pipelines' own bars stay."""
    import functools

    from ray.data._internal.datasource import parquet_datasource

    bar = parquet_datasource.ProgressBar
    if not isinstance(bar, functools.partial):
        parquet_datasource.ProgressBar = functools.partial(bar, enabled=False)


def interrupt_on_sigint() -> None:
    """In this process (its main thread), SIGINT raises KeyboardInterrupt, Python's default, where it was ignored.

    Ray cancels a running task by sending its worker SIGINT (Ray Data does, for the reads a finished pipeline no longer
    needs). A process started from a shell that ignores SIGINT (a background job: `make test &`, a step under nohup)
    inherits ``SIG_IGN``, and Ray's workers keep it. A cancel that then arrives while the task's arguments are read
    (``DeferSigint``) ends in "TypeError: 'Handlers' object is not callable", which the driver prints on stderr as an
    unhandled error (seen in notebooks 03 and 05, a fresh clone of 6700da9)."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread() and not callable(signal.getsignal(signal.SIGINT)):
        signal.signal(signal.SIGINT, signal.default_int_handler)


def rewrite_grpc_server_addresses(rewrite: Callable[[str], str]) -> None:
    """In this process, every gRPC server Ray binds through ``add_port_to_grpc_server`` binds to ``rewrite(address)``
    instead; once per process (a second call changes nothing)."""
    from ray._common import tls_utils

    if getattr(tls_utils.add_port_to_grpc_server, "rewrites_address", False):
        return
    bind = tls_utils.add_port_to_grpc_server

    def add_port_rewritten(server, address: str):
        return bind(server, rewrite(address))

    add_port_rewritten.rewrites_address = True
    tls_utils.add_port_to_grpc_server = add_port_rewritten
    replica = sys.modules.get("ray.serve._private.replica")  # imported already: it holds its own reference
    if replica is not None:
        replica.add_port_to_grpc_server = add_port_rewritten
