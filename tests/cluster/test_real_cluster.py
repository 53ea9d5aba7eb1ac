"""The tests' cluster is a real cluster in small: its worker node shares no files with the checkout.

`make test` starts it (scripts/with-ray-cluster.sh with COURSE_RAY_ISOLATED_NODE=1): the worker node runs in a mount
namespace of its own where the checkout, data/ and results/ are an empty folder, its Python has the locked packages
but not the course's, and the head has no CPUs, so every Ray Train worker and Ray Data task runs there. Every
notebook test runs on it. Here: one Ray Train run with a Ray Data shard, whose workers and tasks say where they are,
what they see, where `helpers` came from and which runtime env they run in, with its storage on a bucket of a local
S3 server (as a workshop cluster's shared storage); and the error a notebook gets when the data or the storage is on
the driver's disk only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
import ray
import ray.data
from local_s3 import local_s3
from ray.runtime_env import RuntimeEnv
from ray.train import ScalingConfig
from ray.train.torch import TorchTrainer

from course import config, settings
from course.cluster import FREED_MEMORY_RETURNED, CompactRuntimeEnv, init_ray, job_runtime_env
from course.distributed import torch_config
from course.sources import STANDIN_BEANS
from helpers.loops import report_epoch
from helpers.train import run_config

ROOT = Path(__file__).resolve().parents[2]
BUCKET = "course-storage"
ISOLATED = settings.flag("COURSE_RAY_ISOLATED_NODE_UP")
needs_isolated_node = pytest.mark.skipif(
    not ISOLATED,
    reason="isolated-node test SKIPPED: the cluster's worker node shares this checkout (run under `make test`, as "
    "root: `unshare --mount` makes the node that shares no files)",
)


@pytest.fixture(scope="module")
def seen() -> dict:
    ray.shutdown()  # a job of its own: init_ray gives its workers the bucket's endpoint and keys
    with local_s3(), pytest.MonkeyPatch.context() as env:
        boto3.client("s3").create_bucket(Bucket=BUCKET)
        env.setenv(config.STORAGE_ENV, f"s3://{BUCKET}/ray")
        init_ray()
        try:
            return run_and_look()
        finally:
            ray.shutdown()


def run_and_look() -> dict:
    """One Ray Train run with a Ray Data shard on the cluster: what its processes saw, where its checkpoint went."""

    # defined here, not at module level: Ray pickles it by value (the workers cannot import a test module)
    def what_a_process_sees() -> dict:
        """Where this process runs and what it sees: run by a Ray Train worker and by a Ray Data task."""
        import pyarrow

        import helpers

        return {
            "arrow_pool": pyarrow.default_memory_pool().backend_name,
            "mmap_threshold": os.environ.get("MALLOC_MMAP_THRESHOLD_"),
            "node": ray.get_runtime_context().get_node_id(),
            "runtime_env": ray.get_runtime_context().get_runtime_env_string(),
            "helpers": helpers.__file__,
            "sees_checkout": (ROOT / "Makefile").exists(),
            "sees_data": Path(os.environ[config.DATA_DIR_ENV], STANDIN_BEANS).is_dir(),
        }

    def tag(batch: dict) -> dict:  # a Ray Data task, streamed to the training workers
        batch["seen"] = [json.dumps(what_a_process_sees())] * len(batch["id"])
        return batch

    def train_func(loop_config: dict) -> None:
        shard = ray.train.get_dataset_shard("train")
        tasks = {row for batch in shard.iter_batches(batch_size=8) for row in batch["seen"]}
        metrics = {"worker": json.dumps(what_a_process_sees()), "tasks": json.dumps(sorted(tasks))}
        report_epoch(metrics, save=lambda folder: (folder / "seen.json").write_text(json.dumps(metrics)))

    result = TorchTrainer(
        train_func,
        datasets={"train": ray.data.range(64, override_num_blocks=4).map_batches(tag)},
        scaling_config=ScalingConfig(num_workers=2),
        torch_config=torch_config(),
        run_config=run_config("test-real-cluster"),
    ).fit()
    head = next(
        node["NodeID"] for node in ray.nodes() if node["Alive"] and node["Resources"].get("node:__internal_head__")
    )
    with result.checkpoint.as_directory() as folder:  # downloaded from the bucket
        loaded = json.loads((Path(folder) / "seen.json").read_text())
    stored = boto3.client("s3").list_objects_v2(Bucket=BUCKET, Prefix="ray/")
    return {
        "job": ray.get_runtime_context().get_runtime_env_string(),
        "head": head,
        "worker": json.loads(result.metrics["worker"]),
        "tasks": [json.loads(task) for task in json.loads(result.metrics["tasks"])],
        "checkpoint": result.checkpoint.path,
        "stored": [item["Key"] for item in stored.get("Contents", [])],
        "loaded": loaded,
    }


@pytest.mark.cluster
def test_the_runs_checkpoint_goes_to_the_bucket_and_loads_back(seen):
    """The course's RunConfig (helpers.train.run_config) with COURSE_STORAGE_PATH on a bucket: the workers,
    on the node that shares no files, reach it with the endpoint and keys init_ray gave the job."""
    assert seen["checkpoint"].startswith(f"{BUCKET}/ray/test-real-cluster-"), seen["checkpoint"]
    assert any(key.endswith("/seen.json") for key in seen["stored"]), f"no checkpoint in the bucket: {seen['stored']}"
    assert json.loads(seen["loaded"]["worker"]) == seen["worker"], "the checkpoint holds what rank 0 reported"


@pytest.mark.cluster
def test_train_workers_and_their_data_tasks_run_in_the_jobs_runtime_env(seen):
    """The same env string, so the same workers: none started anew for Ray Train's controller's env (bench too)."""
    assert seen["tasks"], "the shard's rows carry what the Ray Data tasks saw"
    for who in [seen["worker"], *seen["tasks"]]:
        assert who["runtime_env"] == seen["job"], (
            "a Ray Train worker or one of its Ray Data tasks runs in another runtime env than the job's: Ray "
            "starts new worker processes for it (course.cluster.CompactRuntimeEnv; has Ray changed how it "
            f"merges or writes runtime envs?)\njob:    {seen['job']}\nworker: {who['runtime_env']}"
        )


@pytest.mark.cluster
def test_workers_on_this_machine_give_freed_memory_back(seen):
    """FREED_MEMORY_RETURNED reaches every worker at its start (glibc reads its threshold then): pyarrow allocates
    with the system's allocator, and glibc's threshold for large arrays stays fixed."""
    for who in [seen["worker"], *seen["tasks"]]:
        assert who["arrow_pool"] == "system", f"pyarrow allocates with {who['arrow_pool']}, which keeps freed memory"
        assert who["mmap_threshold"] == FREED_MEMORY_RETURNED["MALLOC_MMAP_THRESHOLD_"], who


@pytest.mark.cluster
@needs_isolated_node
def test_workers_run_on_a_node_that_sees_no_checkout_and_get_helpers_with_the_job(seen):
    for who in [seen["worker"], *seen["tasks"]]:
        assert who["node"] != seen["head"], "the head has no CPUs: every worker and task runs on the other node"
        assert not who["sees_checkout"], f"the worker node sees the checkout at {ROOT}: it is not isolated"
        assert "runtime_resources" in Path(who["helpers"]).parts, (
            f"`helpers` came from {who['helpers']}, not from the job's runtime env (py_modules)"
        )
        assert who["sees_data"], f"the shared data ({config.DATA_DIR_ENV}) is not there on the worker node"


@pytest.mark.cluster
@needs_isolated_node
def test_data_or_storage_on_the_drivers_disk_only_is_an_error_naming_the_setting(tmp_path):
    local = ROOT / "results" / "test-driver-only"  # in the checkout: the worker node cannot see it
    env = {**os.environ, config.DATA_DIR_ENV: str(ROOT / "data"), config.STORAGE_ENV: str(local)}
    code = "from course.cluster import init_ray; init_ray()"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=180)
    assert result.returncode != 0, "a cluster whose node cannot see the data must not start the lesson"
    said = result.stderr.strip().splitlines()[-5:]
    text = "\n".join(said)
    assert f"the data folder {ROOT / 'data'} is on this machine only" in text and config.DATA_DIR_ENV in text, text
    assert f"the storage path {local} is on this machine only" in text and config.STORAGE_ENV in text, text
    assert not (local / ".course-shared").exists(), "the marker file and its folder are removed"
    local.rmdir()


def test_the_jobs_runtime_env_ships_both_packages_and_the_settings(monkeypatch):
    monkeypatch.setenv("RAY_TRAIN_HEALTH_CHECK_INTERVAL_S", "0.2")
    monkeypatch.setenv(config.STORAGE_ENV, "s3://bucket/course")
    env = job_runtime_env({"env_vars": {"EXTRA": "1"}})
    assert env["py_modules"] == [str(ROOT / "helpers"), str(ROOT / "course")] and "__pycache__" in env["excludes"]
    variables = env["env_vars"]
    assert variables[config.DATA_DIR_ENV] == str(config.DATA_DIR)
    assert variables[config.STORAGE_ENV] == "s3://bucket/course"
    assert variables["RAY_TRAIN_HEALTH_CHECK_INTERVAL_S"] == "0.2" and variables["EXTRA"] == "1"
    assert variables["RAY_WARN_BLOCKING_GET_INSIDE_ASYNC"] == "0", "Ray Train's controller adds it: so must the job"


def test_the_compact_spelling_is_still_needed():
    """Ray writes a job's env with json.dumps' spaces and a merged one compactly. If this fails, Ray writes them
    alike now: CompactRuntimeEnv can go (test_train_workers_and_their_data_tasks_run_in_the_jobs_runtime_env says
    whether the envs still match without it)."""
    env = {"env_vars": {"A": "1", "B": "2"}}
    assert RuntimeEnv(**env).serialize() != CompactRuntimeEnv(**env).serialize()
    assert CompactRuntimeEnv(**env).serialize() == json.dumps(env, sort_keys=True, separators=(",", ":"))
