"""Connecting to Ray, and deciding what to ask it for from what the cluster really has."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import uuid
from pathlib import Path

import ray
import ray.data
from ray.runtime_env import RuntimeEnv
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from course import config, internals, settings, tracking, worker_setup
from course.config import verbose
from course.deadline import first_line
from course.storage import filesystem, storage_path

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
    internals.keep_ray_on_loopback()  # this process too: Ray read the variable when it was imported


# Library chatter a Ray worker would forward to the notebook, line by line: TensorFlow's C++ info logs,
# progress bars of data sets and downloads, Transformers' per-worker load reports and advice, Ray Train's info lines.
QUIET_WORKERS = {
    "TF_CPP_MIN_LOG_LEVEL": "2",
    # TensorFlow prints a notice about its oneDNN ops at every import, whatever the level above; without them, no
    # notice, and the same numbers on every run (notebook 05's regression is too small to need them)
    "TF_ENABLE_ONEDNN_OPTS": "0",
    **settings.QUIET_LIBRARIES,  # no progress bars, no load reports: what the Makefile exports too
    "RAY_DATA_LOG_LEVEL": "WARNING",  # Ray Data's actors: no "Dataset ... execution finished" line per epoch
    # iter_torch_batches hands torch the read-only arrays of the object store, zero-copy; torch warns once
    # per worker, though nothing writes into a batch.
    "PYTHONWARNINGS": "ignore:The given NumPy array is not writable:UserWarning",
    worker_setup.TRAIN_LOG_LEVEL_ENV: "WARNING",  # no "Checkpoint successfully created at ..." per report
    **tracking.QUIET_LOGS,  # MLflow's info lines on stderr
}


# The libraries of settings.QUIET_LIBRARIES read their variable once, at import. A lesson's first cell imports them
# before init_ray() sets the variables (in a Jupyter started without make, or on Colab): they are told then, so that
# the notebook's process is as quiet as under make.
READ_AT_IMPORT = {
    "huggingface_hub": ("HF_HUB_DISABLE_PROGRESS_BARS", lambda hub: hub.utils.disable_progress_bars()),
    "datasets": ("HF_DATASETS_DISABLE_PROGRESS_BARS", lambda datasets: datasets.disable_progress_bars()),
    "transformers": ("TRANSFORMERS_VERBOSITY", lambda transformers: transformers.logging.set_verbosity_error()),
}


# Ray Train settings for a cluster on one machine (scripts/with-ray-cluster.sh exports the same):
# `ray.train.report` returns in 0.2 s instead of 2 s, no preemption watcher (it looks for cloud
# spot-instance notices, and kept half a CPU core busy on a 2-core laptop), and 5 minutes, not 60 s, for a worker
# group's placement group (the CPUs reserved for its workers) to be ready: Ray 2.60 bounds that wait with it
# (WorkerGroup's pg_handle.wait), not the workers' start. When notebook 07 starts two trials' trainers at once, one
# group's CPUs wait for those the other trial holds, over 60 s in a rehearsal on 2 cores (the controller then logs a
# WorkerGroupStartupTimeoutError and retries).
ON_THIS_MACHINE = {
    "RAY_TRAIN_HEALTH_CHECK_INTERVAL_S": "0.2",
    "RAY_TRAIN_ENABLE_PREEMPTION_WATCHER": "0",
    "RAY_TRAIN_WORKER_GROUP_START_TIMEOUT_S": "300",
}
# Anywhere: Ray Train's print patch sends a worker's every print() to a logger *and* to stdout (each line
# twice), and defeats libraries that capture stdout (dill's did, and leaked pages of bytecode). Its
# structured logging sets every worker's root logger to DEBUG, so each library's info lines reach the
# notebook. Without both, a worker prints as any Python process does: its prints, warnings and errors.
# (The controller keeps its structured logging: that one follows RunConfig's LoggingConfig.)
PLAIN_WORKER_OUTPUT = {"RAY_TRAIN_ENABLE_PRINT_PATCH": "0", "RAY_TRAIN_ENABLE_WORKER_STRUCTURED_LOGGING": "0"}


# What a worker needs to reach what this process reaches, passed on when set here: the bucket of the storage
# path or of the sources (endpoint, keys, region; a node with a cloud role of its own needs none), the Hub, and where
# the Hugging Face caches are (a cache filled before a workshop is found by the workers too).
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
    "HF_HOME",
    "HF_HUB_CACHE",
    "HF_DATASETS_CACHE",
)


# The course's own settings passed on as they are set here (the data folder and the storage go as resolved paths).
SETTINGS_PASSED_ON = (config.SOURCES_ENV, config.MODEL_ENV, config.BUDGET_ENV, config.VERBOSE_ENV)
# Ray Train gives its controller, and through it the training workers and their Ray Data tasks, a runtime env of
# its own: the RAY_TRAIN_* variables set in the driver, plus this one (ray.train.v2's data_parallel_trainer).
TRAIN_CONTROLLER_ENV = {"RAY_WARN_BLOCKING_GET_INSIDE_ASYNC": "0"}
# Serve's replicas report the requests they hold themselves, for autoscaling (notebook 06). By default in Ray 2.60 the
# handles that send requests report them instead: in about half the runs on 2 cores the controller then counted 0 in
# flight at `Model` while a handle in the notebook kept 32 there for 90 s, and it never started a second replica. With
# the replicas' own counts it scaled out in every run (the handles still report the requests they queue). Ray's docs
# call replica-based collection the coming default.
SERVE_ENV = {"RAY_SERVE_COLLECT_AUTOSCALING_METRICS_ON_HANDLE": "0"}
# On this machine (a laptop's memory), workers give freed memory back to the system sooner. Ray keeps idle workers
# for the next task, and an idle worker keeps what its last task had freed: pyarrow's own allocator (jemalloc) keeps
# it, and so does glibc's heap, where an array of up to 32 MiB lands once glibc has raised its threshold for giving a
# large array pages of its own (it does after the first such array is freed). Four idle workers held 0.7 to 1.2 GB
# each after notebook 03 read full-size photos. Notebook 03 on the real sources, alone on a fresh cluster, 2 cores:
# 8.0 GB at its peak as Ray leaves them; 7.7 GB (298 s) with pyarrow on the system allocator; 7.2 GB (315 s) with
# glibc's threshold also fixed at 4 MiB; 6.7 GB (351 s) at 128 KiB, where torch's activations got fresh pages at
# every step. The middle one is kept.
FREED_MEMORY_RETURNED = {"ARROW_DEFAULT_MEMORY_POOL": "system", "MALLOC_MMAP_THRESHOLD_": str(4 * 1024**2)}
# The course's two packages travel with every job: `helpers` (what the lessons teach from) and `course` (this one).
SHIPPED_CODE = (config.REPO_ROOT / "helpers", config.REPO_ROOT / "course")
WORKER_SETUP_HOOK = "course.worker_setup.setup_worker"


class CompactRuntimeEnv(RuntimeEnv):
    """A runtime env written as compact JSON, as Ray writes the env it merges for an actor with options of its own.

    Ray reuses an idle worker process only for a task whose runtime env has the same *serialized string*.
    Ray Train's controller adds variables to the job's env; Ray merges the two and writes the result compactly,
    while a job's own env is written by ``json.dumps`` with spaces. With the same variables in the job's env and
    this spelling, the merged env is the job's env, character for character: Ray Train's workers and their Ray
    Data tasks reuse the job's idle workers instead of starting (and importing Ray Data in) new ones.
    ``tests/cluster/test_real_cluster.py`` tells when a Ray release changes this.
    """

    def serialize(self) -> str:
        return json.dumps(type(self)(_validate=True, **self), sort_keys=True, separators=(",", ":"))


def job_runtime_env(extra: dict | None = None) -> CompactRuntimeEnv:
    """The job's runtime env, built here and nowhere else: what every task and actor of the notebook gets.

    * ``py_modules``: the course's own code (``helpers`` and ``course``), uploaded with the job, so that a node with
      only the locked packages installed (a cluster's image) imports it; nothing is installed by hand on any node;
    * ``env_vars``: the course's settings (where data and storage are, sources, the pretrained model, budget, where
      MLflow runs go), what
      a worker needs to reach a bucket or the Hub (:data:`PASSED_TO_WORKERS`), quiet libraries (unless
      ``COURSE_VERBOSE=1``), and the variables Ray Train gives its controller, so that the controller's env equals the
      job's;
    * ``worker_process_setup_hook``: every worker starts with :func:`course.worker_setup.setup_worker` (Ray
      Train's log level; on this machine, its servers listen on 127.0.0.1);
    * ``extra``: more of the same (``{"env_vars": {...}}``), added to the above.
    """
    extra = dict(extra or {})
    env_vars = job_env_vars() | extra.pop("env_vars", {})
    extra.setdefault("worker_process_setup_hook", WORKER_SETUP_HOOK)
    return CompactRuntimeEnv(
        py_modules=[str(path) for path in SHIPPED_CODE], excludes=["__pycache__", "*.pyc"], env_vars=env_vars, **extra
    )


def job_env_vars() -> dict[str, str]:
    """The ``env_vars`` of the job's runtime env (:func:`job_runtime_env`; notebook 00 writes that env out)."""
    course = {name: os.environ[name] for name in SETTINGS_PASSED_ON if name in os.environ}
    course |= {config.DATA_DIR_ENV: str(config.DATA_DIR), config.STORAGE_ENV: storage_path()}
    course |= tracking.worker_env()  # where MLflow runs go, resolved here (course.tracking)
    passed = {name: os.environ[name] for name in PASSED_TO_WORKERS if name in os.environ}
    train = {name: value for name, value in os.environ.items() if name.startswith("RAY_TRAIN_")}
    train |= {name: os.environ.get(name, value) for name, value in TRAIN_CONTROLLER_ENV.items()}
    quiet = {} if verbose() else QUIET_WORKERS
    here = (
        {worker_setup.LOOPBACK_ONLY_ENV: "1"} | FREED_MEMORY_RETURNED
        if is_on_this_machine(os.environ.get("RAY_ADDRESS"))
        else {}
    )
    return course | passed | quiet | train | SERVE_ENV | here


def init_ray(runtime_env: dict | None = None, require_shared: bool = True) -> dict[str, float]:
    """Attach to the cluster in ``$RAY_ADDRESS`` if set, else start a local runtime; return its resources.

    On this machine (a local runtime, or the course's local cluster) Ray stays on 127.0.0.1: nothing is
    reachable from the network. Every task and actor of this job runs with :func:`job_runtime_env`
    (``runtime_env``, for example ``{"env_vars": {...}}``, adds to it): the course's code and settings reach
    every node. On a cluster of several nodes, the data folder and the storage path must be ones every node
    sees: if a node does not, this stops with the setting to change (:func:`require_shared_paths`; not with
    ``require_shared=False``: `make doctor` looks itself, node by node).
    """
    prepare_this_process()
    address = os.environ.get("RAY_ADDRESS") or None
    ray.init(
        address=address,
        num_cpus=None if address else local_cpus(),
        runtime_env=job_runtime_env(runtime_env),
        ignore_reinit_error=True,
        # the `ray` loggers of this process, where local mode (num_workers=0) logs: its INFO lines with COURSE_VERBOSE=1
        logging_level="INFO" if verbose() else "WARNING",
    )
    if require_shared:
        require_shared_paths()
    return ray.cluster_resources()


def prepare_this_process() -> None:
    """What this process sets before ``ray.init`` (:func:`init_ray`, and notebook 00 by hand). On this machine (no
    ``$RAY_ADDRESS``, or a loopback one) Ray listens on 127.0.0.1 only, and Ray Train gets its local settings; unless
    ``COURSE_VERBOSE=1``, workers print as plain processes do and libraries keep their info lines to themselves."""
    if is_on_this_machine(os.environ.get("RAY_ADDRESS")):
        keep_on_loopback()
        for name, value in ON_THIS_MACHINE.items():  # Ray Train reads them here and passes them on
            os.environ.setdefault(name, value)
    for name, value in ({} if verbose() else PLAIN_WORKER_OUTPUT).items():
        os.environ.setdefault(name, value)
    if not verbose():
        for name, value in QUIET_WORKERS.items():  # this process too (notebook 05 imports TensorFlow here)
            os.environ.setdefault(name, value)
        for module, (name, apply) in READ_AT_IMPORT.items():  # a lesson's first cell imported them already
            if module in sys.modules and os.environ.get(name) == settings.QUIET_LIBRARIES[name]:
                apply(sys.modules[module])


def local_cpus() -> int:
    """Logical CPUs for a local runtime (alone in JupyterLab): enough to avoid deadlocks, at least this machine's."""
    return max(LOCAL_CPUS, os.cpu_count() or 1)


def on_node(function, node: dict, **options):
    """``function`` as a Ray task pinned to ``node`` (from ``ray.nodes()``), asking for no CPU unless ``options`` say
    so: it runs next to busy workers."""
    strategy = NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
    return ray.remote(function).options(scheduling_strategy=strategy, **{"num_cpus": 0, "max_retries": 0, **options})


def missing_paths(paths: list[str]) -> list[str]:
    """On a node: of the local ``paths``, those it cannot read (missing, or a folder without a file it can read)."""
    missing = []
    for path in map(Path, paths):
        try:
            file = path if path.is_file() else next(p for p in path.rglob("*") if p.is_file())  # the first found
            with file.open("rb") as stream:
                stream.read(1024)
        except (OSError, StopIteration):
            missing.append(str(path))
    return missing


def write_marker(storage: str, folder: str, name: str) -> str:
    """Write a small file named ``name`` into ``folder`` under ``storage`` (a path or a bucket); '' when it worked,
    else why not."""
    try:
        fs, path = filesystem(storage)
        fs.create_dir(f"{path}/{folder}", recursive=True)
        with fs.open_output_stream(f"{path}/{folder}/{name}") as out:
            out.write(name.encode())
        return ""
    except Exception as error:
        return first_line(error, 120)


def unread_markers(storage: str, folder: str, names: list[str]) -> list[str]:
    """On a node: of the files ``names`` in ``folder`` under ``storage``, those it cannot read back."""
    fs, path = filesystem(storage)
    missing = []
    for name in names:
        try:
            with fs.open_input_stream(f"{path}/{folder}/{name}") as stream:
                if stream.read() != name.encode():
                    missing.append(name)
        except Exception:
            missing.append(name)
    return missing


def _sees(paths: list[str], storage: str, folder: str, marker: str | None) -> list[str]:
    """On a node: the local ``paths`` it cannot read, and the marker's name if it cannot read that back."""
    return missing_paths(paths) + ([] if marker is None else unread_markers(storage, folder, [marker]))


def require_shared_paths(timeout_s: float = 120) -> None:
    """On a cluster of several nodes: every node sees the course's data folder and its storage, or an error says
    which setting to change. One small task per node looks (data: a file of the folder can be read; local storage: a
    file this process writes there can be read back). A bucket (``s3://``) is reached by every node alike; not
    looked at."""
    nodes = [node for node in ray.nodes() if node["Alive"]]
    storage = storage_path()
    if len(nodes) < 2:
        return
    data = [] if missing_paths([str(config.DATA_DIR)]) else [str(config.DATA_DIR)]  # what this process reads
    folder, marker = ".course-shared", None
    if "://" not in storage:
        marker = f"marker-{uuid.uuid4().hex[:12]}"
        failed = write_marker(storage, folder, marker)
        if failed:
            raise RuntimeError(f"Cannot write to the storage path {storage} ({failed}): set {config.STORAGE_ENV}.")
    try:
        refs = [on_node(_sees, node).remote(data, storage, folder, marker) for node in nodes]
        missing = sorted({path for found in ray.get(refs, timeout=timeout_s) for path in found})
    finally:
        if marker is not None:
            (Path(storage) / folder / marker).unlink(missing_ok=True)
            with contextlib.suppress(OSError):  # another notebook's marker may be there
                (Path(storage) / folder).rmdir()
    problems = []
    if str(config.DATA_DIR) in missing:
        problems.append(
            f"the data folder {config.DATA_DIR} is on this machine only. Put the data sets on storage every node "
            f"mounts and point {config.DATA_DIR_ENV} at it: `make data {config.DATA_DIR_ENV}=/mnt/cluster_storage/"
            "vit-ray-course/data` builds or publishes them there"
        )
    if marker is not None and marker in missing:
        problems.append(
            f"the storage path {storage} is on this machine only. Set {config.STORAGE_ENV} to a folder every node "
            "mounts (/mnt/cluster_storage/vit-ray-course/results) or a bucket (s3://my-bucket/vit-ray-course)"
        )
    if problems:
        raise RuntimeError(
            f"This Ray cluster has {len(nodes)} nodes, and not every node sees what the course reads and writes:\n"
            + "".join(f"- {problem}.\n" for problem in problems)
            + "Then restart the kernel (or the command)."
        )


def configure_ray_data(preserve_order: bool = True) -> ray.data.DataContext:
    """The course's Ray Data settings, in one place: call it once after :func:`init_ray`.

    * quiet: no start banners, Ray Data logs warnings only, no bar for ``read_parquet``'s sampling of its files,
      and long pipeline names are not shortened (which warns) (``COURSE_VERBOSE=1`` keeps Ray's own output).
      Progress bars stay on: in a terminal they show; in a notebook's own process, whose output is not a terminal,
      Ray Data writes progress as info log lines, which this level keeps out. The pipelines that Ray Train's workers
      read (through a split-coordinator actor, notebooks 03 to 05) draw their bars in the notebook as widgets
      (``DataContext.use_ray_tqdm``: ``ray.experimental.tqdm_ray``), live while they run; a saved notebook keeps their
      last frame;
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
        internals.quiet_parquet_sampling()  # read_parquet's "Parquet dataset sampling" bar: metadata, not the pipeline
        context.print_on_execution_start = False
        context.enable_progress_bar_name_truncation = False  # its warning that it shortened a long pipeline's name
        logging.getLogger("ray.data").setLevel(logging.WARNING)
    context.use_datasource_v2 = False
    context.execution_options.preserve_order = preserve_order
    if is_on_this_machine(os.environ.get("RAY_ADDRESS")):
        cpus = max(LOCAL_DATA_CPUS, os.cpu_count() or 1)
        context.execution_options.resource_limits = context.execution_options.resource_limits.copy(cpu=cpus)
    return context


CLUSTER_SCRIPT = config.REPO_ROOT / "scripts" / "with-ray-cluster.sh"  # the course's local cluster (Makefile: CLUSTER)
NODE_ACTIONS = ("status", "stop", "start")


def on_local_cluster() -> bool:
    """Whether this process works with the course's local cluster, started by :data:`CLUSTER_SCRIPT` (`make run`,
    `make lab`, `make test`): only there can a lesson stop a node and start it again (:func:`node`). A runtime Ray
    started alone (Colab, a notebook opened on its own) or a real cluster is not."""
    temp_dir = os.environ.get("COURSE_RAY_TEMP_DIR")  # the script exports it with RAY_ADDRESS
    return bool(temp_dir) and is_on_this_machine(os.environ.get("RAY_ADDRESS")) and CLUSTER_SCRIPT.is_file()


def node(action: str) -> str:
    """``scripts/with-ray-cluster.sh node <action>`` on the course's local cluster: ``stop`` its worker node (as `ray
    stop` would: the head marks it dead at once), ``start`` it again, or its ``status`` ("up" or "down"). Returns what
    the script printed; a failure raises with its output."""
    if action not in NODE_ACTIONS:
        raise ValueError(f"node({action!r}): the action is one of {NODE_ACTIONS}")
    if not on_local_cluster():
        raise RuntimeError(
            "node() stops and starts a node of the course's local cluster: run the lesson through `make lab` or "
            "`make run`, which start it (this process is attached to another Ray)"
        )
    env = os.environ | {"VENV": sys.prefix}  # Ray from this notebook's environment, wherever the notebook's folder is
    done = subprocess.run(
        ["bash", str(CLUSTER_SCRIPT), "node", action], capture_output=True, text=True, timeout=180, check=False, env=env
    )
    if done.returncode != 0:
        raise RuntimeError(f"`{CLUSTER_SCRIPT.name} node {action}` failed: {(done.stderr or done.stdout).strip()}")
    return done.stdout.strip()
