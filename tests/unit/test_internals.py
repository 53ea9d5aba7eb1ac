"""course.internals: each reach into a library's internals still finds what it relies on.

One test per entry of the table at the top of course/internals.py: when an upgrade of Ray, torch or transformers
changes what an entry relies on, its test fails and says which entry to review (and what uses it). Beside them: the
releases the entries name are the lock's and the installed ones, and no other module of the course reaches into a
library's internals.
"""

from __future__ import annotations

import ast
import importlib.metadata
import inspect
import json
import re
import socket
from datetime import timedelta
from pathlib import Path

import pytest
from python_source import parse

from course import cluster, internals

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements" / "lock.txt"
# Modules of a library that are not its public API: importing them, or a name with an underscore from the library
# itself, is a reach into its internals.
INTERNAL_MODULE = re.compile(r"\._")  # ray._private.x, ray.train.torch.config._TorchBackend
LIBRARIES = ("ray", "torch", "transformers")
# The reaches that stay where they are: these scripts run where the course's packages may not be importable (on a
# node where the course is not installed; from another environment with the locked packages).
STAYS_IN_PLACE = {
    "scripts/cluster_node.py": {"ray._private.node", "ray._private.parameter"},
    "scripts/local_cluster.py": {"ray._private.utils"},
}


def review(entry: str) -> str:
    return f"course.internals' entry {entry!r} no longer holds for this release: review it, and what uses it"


def ray_train_snapshot(reported: list[dict]) -> dict:
    """The run snapshot Ray Train 2.60 writes (``internals.RUN_SNAPSHOT``) for ``reported``, the checkpoints a run
    reported with their metrics (``checkpoint_dir_name``, ``metrics``), without a score to order them by."""
    return {
        "ray_version": internals.WRITTEN_FOR["ray"],
        "checkpoint_results": reported,
        "checkpoint_report_indices": list(range(len(reported))),
        "latest_checkpoint_result": reported[-1] if reported else None,
        "pending_training_results": [],
        "pending_validation_specs": [],
        "current_report_index": len(reported),
        "validated_checkpoint_dir_names": [],
        "timed_out_validation_checkpoint_dir_names": [],
        "failed_validation_checkpoint_dir_names": [],
    }


# --- the releases, and nothing outside course.internals ---------------------------------------------------------


@pytest.mark.parametrize("library", sorted(internals.WRITTEN_FOR))
def test_the_entries_name_the_locked_release_and_it_is_the_installed_one(library):
    named = internals.WRITTEN_FOR[library]
    pinned = re.search(rf"^{library}==(\S+)", LOCK.read_text(), re.MULTILINE)
    assert pinned and pinned.group(1) == named, (
        f"requirements/lock.txt pins {library} {pinned and pinned.group(1)}, course.internals was written for {named}: "
        f"review every {library} entry of its table (each has a test here), then change WRITTEN_FOR"
    )
    installed = importlib.metadata.version(library).split("+")[0]  # torch's CPU build: 2.13.0+cpu
    assert installed == named, (
        f"{library} {installed} is installed, course.internals was written for {named}: review its {library} entries"
    )


def reaches(path: Path) -> set[str]:
    """The library internals ``path`` imports: modules such as ``ray._private.x``, or names with an underscore."""
    found = set()
    for node in ast.walk(parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found |= {name for name in names if name.split(".")[0] in LIBRARIES and INTERNAL_MODULE.search(name)}
    return found


def test_no_other_module_of_the_course_reaches_into_a_librarys_internals():
    paths = [*(ROOT / "course").rglob("*.py"), *(ROOT / "helpers").rglob("*.py"), *(ROOT / "scripts").glob("*.py")]
    found = {
        str(path.relative_to(ROOT)): reaches(path) - STAYS_IN_PLACE.get(str(path.relative_to(ROOT)), set())
        for path in paths
        if path.name != "internals.py" and "__pycache__" not in path.parts
    }
    against = sorted(f"{path}: {', '.join(sorted(names))}" for path, names in found.items() if names)
    assert not against, "library internals are reached from course.internals only (an entry there, tested here):\n" + (
        "\n".join(against)
    )


def test_course_internals_imports_no_library_at_its_top():
    """Every Ray worker imports it (course.worker_setup): it stays as small to import as that module."""
    tree = parse((ROOT / "course" / "internals.py").read_text())
    top = {alias.name for node in tree.body if isinstance(node, ast.Import) for alias in node.names}
    top |= {node.module for node in tree.body if isinstance(node, ast.ImportFrom) and node.module}
    assert not {name.split(".")[0] for name in top} & {*LIBRARIES, "course", "helpers"}, top


@pytest.mark.parametrize("name", sorted(internals.LAZY))
def test_each_lazy_name_is_the_librarys_own(name):
    module, attribute = internals.LAZY[name]
    assert getattr(internals, name) is getattr(importlib.import_module(module), attribute), review(name)


# --- one test per entry ------------------------------------------------------------------------------------------


def test_ray_constants_enable_ray_cluster_keeps_this_node_on_loopback(monkeypatch: pytest.MonkeyPatch):
    import ray._private.worker
    from ray._private import ray_constants, services

    entry = "ray_constants.ENABLE_RAY_CLUSTER"
    monkeypatch.setattr(ray._private.worker, "_global_node", None)  # as before ray.init
    assert isinstance(ray_constants.ENABLE_RAY_CLUSTER, bool), review(entry)
    assert ray_constants.ENABLE_RAY_CLUSTERS_ENV_VAR == cluster.SINGLE_MACHINE, review(entry)
    assert "ray_constants.ENABLE_RAY_CLUSTER" in inspect.getsource(services.get_node_ip_address), review(entry)
    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", True)
    monkeypatch.setattr(services, "node_ip_address_from_perspective", lambda *args, **kwargs: "10.0.0.5")
    internals.keep_ray_on_loopback()
    assert ray_constants.ENABLE_RAY_CLUSTER is False
    assert services.get_node_ip_address() == "127.0.0.1", review(entry)


def test_ray_trains_torch_backend_is_what_loopback_torch_backend_extends():
    from ray.train.torch import TorchConfig
    from ray.train.torch.config import _set_torch_distributed_env_vars, _TorchBackend

    from course.distributed import LoopbackTorchBackend

    entry = "_TorchBackend, _set_torch_distributed_env_vars"
    assert TorchConfig().backend_cls is _TorchBackend, review(entry)
    assert list(inspect.signature(_TorchBackend.on_start).parameters) == ["self", "worker_group", "backend_config"]
    assert not inspect.signature(_set_torch_distributed_env_vars).parameters, review(entry)
    assert "worker_group.execute(_set_torch_distributed_env_vars)" in inspect.getsource(_TorchBackend.on_start), (
        review(entry) + ": Ray's own on_start no longer sets the workers' variables this way"
    )
    overridden = {name for name, value in vars(LoopbackTorchBackend).items() if inspect.isfunction(value)}
    assert overridden == {"on_start"}, "LoopbackTorchBackend overrides on_start only: Ray's backend does the rest"
    for method in ("on_shutdown", "on_training_start"):
        assert getattr(LoopbackTorchBackend, method) is getattr(_TorchBackend, method), review(entry)


def test_torchs_tcp_store_serves_on_a_socket_handed_to_it():
    import torch.distributed as dist

    assert "master_listen_fd" in (dist.TCPStore.__init__.__doc__ or ""), review("torch TCPStore(master_listen_fd)")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    port = listener.getsockname()[1]
    store = dist.TCPStore(
        "127.0.0.1", port, 1, is_master=True, timeout=timedelta(seconds=10), master_listen_fd=listener.detach()
    )
    store.set("key", "value")
    assert store.get("key") == b"value", review("torch TCPStore(master_listen_fd)")


def test_ray_binds_its_grpc_servers_through_add_port_to_grpc_server(monkeypatch: pytest.MonkeyPatch):
    import ray.serve._private.replica as replica
    from ray._common import tls_utils

    entry = "tls_utils.add_port_to_grpc_server"
    assert list(inspect.signature(tls_utils.add_port_to_grpc_server).parameters) == ["server", "address"], review(entry)
    assert "from ray._common.tls_utils import add_port_to_grpc_server" in inspect.getsource(replica), (
        review(entry) + ": Serve's replica no longer holds its own reference (the rewrite sets it there too)"
    )
    bound = []
    monkeypatch.setattr(tls_utils, "add_port_to_grpc_server", lambda server, address: bound.append(address) or 7)
    monkeypatch.setattr(replica, "add_port_to_grpc_server", tls_utils.add_port_to_grpc_server)
    internals.rewrite_grpc_server_addresses(lambda address: address.replace("[::]", "127.0.0.1"))
    internals.rewrite_grpc_server_addresses(lambda address: address + "-twice")  # once per process
    assert replica.add_port_to_grpc_server(None, "[::]:0") == 7 and bound == ["127.0.0.1:0"]
    assert tls_utils.add_port_to_grpc_server is replica.add_port_to_grpc_server


def test_ray_train_writes_the_run_snapshot_that_result_from_path_reads(tmp_path):
    from ray.train import Result
    from ray.train.v2._internal.constants import CHECKPOINT_MANAGER_SNAPSHOT_FILENAME
    from ray.train.v2._internal.execution.checkpoint.checkpoint_manager import _CheckpointManagerState

    entry = "checkpoint_manager_snapshot.json"
    assert internals.RUN_SNAPSHOT == CHECKPOINT_MANAGER_SNAPSHOT_FILENAME, review(entry)
    assert set(_CheckpointManagerState.model_fields) == set(ray_train_snapshot([])), (
        review(entry) + ": the snapshot's fields changed (tests write it as ray_train_snapshot does)"
    )
    reported = []
    for step in (50, 100):
        (tmp_path / "run" / f"checkpoint_{step}").mkdir(parents=True)
        reported.append({"checkpoint_dir_name": f"checkpoint_{step}", "metrics": {"step": step}})
    (tmp_path / "run" / internals.RUN_SNAPSHOT).write_text(json.dumps(ray_train_snapshot(reported)))
    result = Result.from_path(str(tmp_path / "run"))
    assert result.checkpoint.path == str(tmp_path / "run" / "checkpoint_100") and result.metrics == {"step": 100}
    assert [metrics["step"] for _, metrics in result.best_checkpoints] == [50, 100], review(entry)


def test_ray_datas_logical_plan_has_what_the_lazy_limit_check_walks():
    import ray.data
    from ray.data._internal.iterator.iterator_impl import DataIteratorImpl
    from ray.data._internal.logical.interfaces import LogicalOperator, LogicalPlan

    entry = "Ray Data's logical plan"
    assert issubclass(internals.InputData, LogicalOperator) and issubclass(internals.Limit, LogicalOperator)
    assert isinstance(inspect.getattr_static(LogicalOperator, "input_dependencies"), property), review(entry)
    assert isinstance(inspect.getattr_static(LogicalPlan, "dag"), property), review(entry)
    assert "self._logical_plan = " in inspect.getsource(ray.data.Dataset.__init__), review(entry)
    assert "self._base_dataset = " in inspect.getsource(DataIteratorImpl.__init__), review(entry)
    assert "DataIteratorImpl(" in inspect.getsource(ray.data.Dataset.iterator), review(entry)


def test_ray_trains_get_checkpoint_ends_in_the_workers_train_fn_utils():
    import ray.train
    from ray.train.v2._internal.execution import train_fn_utils

    entry = "get_train_fn_utils"
    assert "get_train_fn_utils().get_checkpoint()" in inspect.getsource(ray.train.get_checkpoint), review(entry)
    for utils in (train_fn_utils.DistributedTrainFnUtils, train_fn_utils.LocalTrainFnUtils):
        assert issubclass(utils, train_fn_utils.TrainFnUtils) and "get_checkpoint" in vars(utils), review(entry)


def test_every_spelling_of_ray_train_report_goes_through_the_watch(tmp_path):
    import ray.train
    import ray.train as train
    from ray.train import Checkpoint, RunConfig, ScalingConfig, report
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    entry = "get_train_fn_utils"
    assert "get_train_fn_utils().report(" in inspect.getsource(ray.train.report), review(entry)
    seen: list[tuple] = []

    def watched(real):
        def report_seen(metrics, checkpoint=None, **options):
            seen.append((metrics["n"], checkpoint is not None))
            real(metrics=metrics, checkpoint=checkpoint, **options)

        return report_seen

    def train_func() -> None:
        undo = internals.watch_reports(watched)
        report({"n": 1})  # bound when this test began, as a cell's imports are
        train.report({"n": 2}, checkpoint=Checkpoint.from_directory(str(tmp_path)))
        ray.train.report({"n": 3})
        undo()
        ray.train.report({"n": 4})  # after the undo: Ray Train's own, not seen

    DataParallelTrainer(train_func, scaling_config=ScalingConfig(num_workers=0), run_config=RunConfig()).fit()
    assert seen == [(1, False), (2, True), (3, False)], review(entry)


def test_a_local_run_resumes_from_the_checkpoint_put_where_local_mode_keeps_it(tmp_path):
    from ray.train import Checkpoint, RunConfig, ScalingConfig, get_checkpoint
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    entry = "LocalTrainFnUtils._last_checkpoint"
    given = Checkpoint.from_directory(str(tmp_path))

    def train_func() -> str:
        before = get_checkpoint()
        internals.resume_local_run(given)
        return f"{before}, {get_checkpoint().path}"

    trainer = DataParallelTrainer(train_func, scaling_config=ScalingConfig(num_workers=0), run_config=RunConfig())
    assert trainer.fit().return_value == f"None, {tmp_path}", review(entry)


def test_local_mode_says_the_world_size_and_rank_pretended():
    from ray.train import RunConfig, ScalingConfig, get_context
    from ray.train.v2.api.data_parallel_trainer import DataParallelTrainer

    entry = "LocalTrainContext.world_size"

    def train_func() -> tuple:
        before = get_context().get_world_size(), get_context().get_world_rank()
        undo = internals.pretend_local_world(2, 1)
        pretended = get_context().get_world_size(), get_context().get_world_rank()
        undo()
        return before, pretended, (get_context().get_world_size(), get_context().get_world_rank())

    trainer = DataParallelTrainer(train_func, scaling_config=ScalingConfig(num_workers=0), run_config=RunConfig())
    assert trainer.fit().return_value == ((1, 0), (2, 1), (1, 0)), review(entry)


def test_a_workers_reports_wait_in_its_result_queue_until_the_controllers_poll_takes_them():
    import dataclasses

    from ray.train.v2._internal.execution import context
    from ray.train.v2._internal.execution.worker_group.worker import RayTrainWorker

    entry = "ExecutionContext.result_queue"
    assert "result_queue" in {field.name for field in dataclasses.fields(context.ExecutionContext)}, review(entry)
    assert "self.get_result_queue().put(training_report)" in inspect.getsource(context.TrainContext), review(entry)
    poll = inspect.getsource(RayTrainWorker.poll_status)
    assert "result_queue.get_nowait()" in poll and "result_queue.task_done()" in poll, review(entry)
    from ray.train.v2._internal import constants

    assert constants.HEALTH_CHECK_INTERVAL_S_ENV_VAR in constants.ENV_VARS_TO_PROPAGATE, review(entry)  # workers see it
    assert isinstance(constants.DEFAULT_HEALTH_CHECK_INTERVAL_S, float), review(entry)


def test_wait_until_reports_collected_waits_for_the_poll(monkeypatch: pytest.MonkeyPatch):
    import queue
    import threading
    from types import SimpleNamespace

    from ray.train.v2._internal.execution import context

    reports = queue.Queue(maxsize=1)
    reports.put({"step": 16})
    monkeypatch.setattr(
        context, "get_train_context", lambda: SimpleNamespace(execution_context=SimpleNamespace(result_queue=reports))
    )
    monkeypatch.setenv("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.01")
    assert not internals.wait_until_reports_collected(limit_s=0.2), "no poll yet: the report is still here"

    def poll() -> None:  # what the controller's poll does (RayTrainWorker.poll_status)
        reports.get_nowait()
        reports.task_done()

    threading.Timer(0.3, poll).start()
    assert internals.wait_until_reports_collected()


def test_rays_cluster_notes_its_address_through_write_ray_address():
    """Ray's ``Cluster()`` notes its address through ``write_ray_address``, and scripts/local_cluster.py replaces that
    with a no-op before it starts one."""
    import ray.cluster_utils

    entry = "write_ray_address"
    assert "ray._private.utils.write_ray_address(" in inspect.getsource(ray.cluster_utils.Cluster), review(entry)
    script = (ROOT / "scripts" / "local_cluster.py").read_text()
    assert "ray._private.utils.write_ray_address = lambda *args, **kwargs: None" in script, review(entry)


def test_rays_node_and_params_take_what_the_isolated_node_script_gives():
    import ray._private.node
    import ray._private.parameter

    entry = "Node, RayParams"
    script = parse((ROOT / "scripts" / "cluster_node.py").read_text())
    calls = {
        node.func.attr: node
        for node in ast.walk(script)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in ("Node", "RayParams")
    }
    assert set(calls) == {"Node", "RayParams"}, "scripts/cluster_node.py no longer starts its node this way"
    taken = {
        "RayParams": set(inspect.signature(ray._private.parameter.RayParams).parameters),
        "Node": set(inspect.signature(ray._private.node.Node).parameters),
    }
    for name, call in calls.items():
        given = {keyword.arg for keyword in call.keywords}
        assert given <= taken[name], review(entry) + f": {name} no longer takes {sorted(given - taken[name])}"
    assert "dashboard_agent_listen_port" in vars(ray._private.parameter.RayParams(num_cpus=1)), review(entry)
    assert isinstance(inspect.getattr_static(ray._private.node.Node, "node_id"), property), review(entry)


def test_a_serve_deployment_keeps_its_autoscaling_config_in_its_deployment_config():
    from ray import serve

    @serve.deployment
    class Model:
        def __call__(self, request):
            return request

    entry = "Deployment._deployment_config"
    configured = Model.options(autoscaling_config={"min_replicas": 1, "max_replicas": 3}, max_ongoing_requests=32)
    assert not hasattr(configured, "autoscaling_config"), "Serve has a public property now: use it, drop the entry"
    scaling = configured._deployment_config.autoscaling_config
    assert (scaling.min_replicas, scaling.max_replicas) == (1, 3), review(entry)
    assert configured.max_ongoing_requests == 32  # public: the check reads it so


def test_ashas_arguments_are_kept_where_the_search_check_reads_them():
    from ray.tune.schedulers import ASHAScheduler

    entry = "ASHA's settings"
    scheduler = ASHAScheduler(
        metric="accuracy",
        mode="max",
        time_attr="epoch",
        max_t=4,
        grace_period=1,
        reduction_factor=2,
        brackets=1,
        stop_last_trials=False,
    )
    kept = (scheduler._metric, scheduler._mode, scheduler._time_attr, scheduler._reduction_factor)
    assert kept == ("accuracy", "max", "epoch", 2), review(entry)
    assert len(scheduler._brackets) == 1 and scheduler._stop_last_trials is False, review(entry)


DEFERRED_CANCEL = """
import os, signal
from ray._private.utils import DeferSigint
from course import internals
if {fix}:
    internals.interrupt_on_sigint()
print(repr(signal.getsignal(signal.SIGINT)))
try:
    with DeferSigint():  # as Ray reads a task's arguments: a cancel's SIGINT is held, then passed on
        os.kill(os.getpid(), signal.SIGINT)
except BaseException as error:
    print(type(error).__name__, error)
"""


@pytest.mark.parametrize("fix", [False, True], ids=["as inherited", "interrupt_on_sigint"])
def test_a_cancel_held_by_defer_sigint_needs_a_callable_sigint_handler(fix: bool):
    """A worker that inherited SIGINT ignored (a background job) cannot be cancelled cleanly: Ray's DeferSigint calls
    the handler it found, ``SIG_IGN``. Once Ray calls only a callable one, the first case fails: review the entry."""
    import signal
    import subprocess
    import sys

    ran = subprocess.run(
        [sys.executable, "-c", DEFERRED_CANCEL.format(fix=fix)],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),  # as `command &` starts it
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    handler, outcome = ran.stdout.splitlines()[-2:]
    if fix:
        assert "default_int_handler" in handler and outcome.startswith("KeyboardInterrupt"), ran.stdout
    else:
        assert handler == "<Handlers.SIG_IGN: 1>", ran.stdout
        assert outcome == "TypeError 'Handlers' object is not callable", review("DeferSigint")


def test_read_parquets_sampling_bar_is_the_datasources_own_progress_bar_and_can_be_turned_off(tmp_path):
    """cluster.configure_ray_data: the bar that read_parquet draws while it samples files is built from the name
    ``ProgressBar`` of parquet_datasource, with an ``enabled`` argument; quieted, it draws nothing."""
    import inspect

    from ray.data._internal.datasource import parquet_datasource

    assert "Parquet dataset sampling" in inspect.getsource(parquet_datasource)
    assert "enabled" in inspect.signature(parquet_datasource.ProgressBar).parameters
    kept = parquet_datasource.ProgressBar  # quieted already where an earlier test configured Ray Data here
    original = getattr(kept, "func", kept)
    try:
        parquet_datasource.ProgressBar = original
        internals.quiet_parquet_sampling()
        internals.quiet_parquet_sampling()  # twice: still one partial
        assert parquet_datasource.ProgressBar("Parquet dataset sampling", 2, unit="file")._bar is None
        assert parquet_datasource.ProgressBar.func is original
    finally:
        parquet_datasource.ProgressBar = kept
