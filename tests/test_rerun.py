"""Running a Ray Train notebook twice in a row, with the same storage, gives the same figures; storage on S3.

Notebook 02 runs here twice (tests/test_notebooks.py runs every other notebook once), both times with
``COURSE_STORAGE_PATH`` on a bucket of a local S3 server, as shared storage on a workshop cluster would
be: checkpoints go to the bucket from every worker (the endpoint and keys reach them through
``init_ray``), and the notebook loads the last one back from there for its test accuracy. The second
run must not find the first one's checkpoints or history, must report the same metrics, and must leave
no temporary folders behind on the workers.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import boto3
import pytest
from executed import ROOT, output_lines, problems, run
from local_s3 import local_s3

from helpers.course import config, results

NOTEBOOK = ROOT / "notebooks" / "02_ray_train_finetune.ipynb"
RUN = "02-beans-ray-train"
BUCKET = "course-storage"
STORAGE = f"s3://{BUCKET}/ray"
pytestmark = pytest.mark.notebook


def scratch_folders() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("hf-*"))


def run_once() -> dict:
    results.metrics_path(NOTEBOOK.stem).unlink(missing_ok=True)
    outcome = run(NOTEBOOK)
    assert outcome.ok, f"{NOTEBOOK.name}: {outcome.status}"
    return results.read(NOTEBOOK.stem)


def stored_runs(s3) -> dict[str, dict[str, int]]:
    """For each run of the notebook in the bucket: its kept checkpoints and the global step each one holds."""
    runs: dict[str, dict[str, int]] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="ray/"):
        for key in (item["Key"] for item in page.get("Contents", [])):
            parts = key.split("/")  # ray/<run>/checkpoint_<n>/checkpoint/trainer_state.json
            if (
                parts[1].startswith(f"{RUN}-")
                and parts[2].startswith("checkpoint_")
                and parts[-1] == "trainer_state.json"
            ):
                state = json.loads(s3.get_object(Bucket=BUCKET, Key=key)["Body"].read())
                runs.setdefault(parts[1], {})[parts[2]] = state["global_step"]
    return runs


@pytest.fixture(scope="module")
def two_runs() -> tuple[dict, dict, set[Path], dict[str, dict[str, int]]]:
    before = scratch_folders()
    saved = os.environ.get("COURSE_STORAGE_PATH")
    with local_s3():
        s3 = boto3.client("s3")
        s3.create_bucket(Bucket=BUCKET)
        os.environ["COURSE_STORAGE_PATH"] = STORAGE  # the notebook's kernel inherits it
        try:
            first, second = run_once(), run_once()
        finally:
            os.environ.pop("COURSE_STORAGE_PATH") if saved is None else os.environ.__setitem__(
                "COURSE_STORAGE_PATH", saved
            )
        runs = stored_runs(s3)
    return first, second, scratch_folders() - before, runs


def test_the_second_run_reports_what_the_first_did(two_runs):
    first, second, *_ = two_runs
    assert first["headline"] == "beans val accuracy" and first["value"] >= first["floor"]
    assert second["value"] == pytest.approx(first["value"], abs=1e-6)
    assert second["figures"]["test_accuracy"] == pytest.approx(first["figures"]["test_accuracy"], abs=1e-6)


def test_each_run_has_its_own_history_and_capped_checkpoints_in_the_bucket(two_runs):
    first, second, _, runs = two_runs
    budget = config.get_budget(kind="cpu")  # the local cluster has no GPU
    reports = budget.beans.train_steps // budget.beans.eval_steps
    assert first["figures"]["reports"] == second["figures"]["reports"] == min(reports, config.CHECKPOINTS_KEPT)
    assert len(runs) == 2, f"each run writes a folder of its own in {STORAGE}: {sorted(runs)}"
    for name, kept in runs.items():
        assert 0 < len(kept) <= config.CHECKPOINTS_KEPT, f"{name}: {len(kept)} checkpoints"
        assert max(kept.values()) == budget.beans.train_steps, f"{name}: the last checkpoint is the last step"


def test_the_notebook_used_the_bucket_and_loaded_its_checkpoint_back(two_runs):
    first, *_ = two_runs
    assert f"storage: {STORAGE}" in output_lines(NOTEBOOK)
    assert first["figures"]["test_accuracy"] > 0.5  # evaluated with the weights loaded back from the bucket


def test_the_executed_copy_reads_well(two_runs):
    found = problems(NOTEBOOK)
    assert not found, "; ".join(found)


def test_no_temporary_folders_are_left_behind(two_runs):
    _, _, left, _ = two_runs
    assert not left, f"left behind: {sorted(map(str, left))}"
