"""Running a Ray Train notebook a second time, with the same storage, gives the same figures.

Notebook 02's first run in `make test` is the one that checks it (tests/browser/test_browser.py in JupyterLab, else
tests/lessons/test_notebooks.py); here it runs once more, as a learner runs a notebook again, with the same storage (the
cluster's shared storage). The second run must not find the first one's checkpoints or history, must report the same
metrics, and must leave no temporary folders behind on the workers. Run alone (``pytest tests/lessons/test_rerun.py``),
this module runs the notebook twice itself. Storage on a bucket is tested in tests/cluster/test_real_cluster.py."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import pyarrow.fs as pafs
import pytest
from executed import ROOT, headline_problem, output_lines, problems, run

from course import results
from course.budget import get_budget
from course.storage import CHECKPOINTS_KEPT, filesystem, storage_path

NOTEBOOK = ROOT / "notebooks" / "02_ray_train_finetune.ipynb"
RUN = "02-beans-ray-train"
COLLECTED_AT = time.time()  # a record written after this is this session's
pytestmark = [pytest.mark.notebook, pytest.mark.course_size]  # 02 once more, whole: weekly, at the course size


def scratch_folders() -> set[Path]:
    """The workers' scratch folders of this notebook's runs (helpers.train.scratch_folder: hf-<run>-rank<n>; its runs
    are named 02-...), not those of whatever else fine-tunes on this machine meanwhile."""
    return set(Path(tempfile.gettempdir()).glob("hf-02-*"))


def run_once() -> dict:
    results.metrics_path(NOTEBOOK.stem).unlink(missing_ok=True)
    outcome = run(NOTEBOOK)
    assert outcome.ok, f"{NOTEBOOK.name}: {outcome.status}"
    return results.read(NOTEBOOK.stem)


def this_sessions_run() -> dict:
    """The record of the notebook's run earlier in this session, or {}."""
    path = results.metrics_path(NOTEBOOK.stem)
    return results.read(NOTEBOOK.stem) if path.exists() and path.stat().st_mtime > COLLECTED_AT else {}


def stored_runs(storage: str) -> dict[str, dict[str, int]]:
    """For each run of the notebook in ``storage``: its kept checkpoints and the global step each one holds."""
    fs, root = filesystem(storage)
    runs: dict[str, dict[str, int]] = {}
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True)):
        parts = Path(info.path).relative_to(root).parts  # <run>/checkpoint_<n>/checkpoint/trainer_state.json
        if (
            len(parts) >= 3
            and parts[0].startswith(f"{RUN}-")
            and parts[1].startswith("checkpoint_")
            and parts[-1] == "trainer_state.json"
        ):
            with fs.open_input_stream(info.path) as stream:
                runs.setdefault(parts[0], {})[parts[1]] = json.loads(stream.read())["global_step"]
    return runs


@pytest.fixture(scope="module")
def two_runs() -> tuple[dict, dict, set[Path], dict[str, dict[str, int]]]:
    storage = storage_path()  # the kernel's too: it inherits this environment, as the lab's kernels do
    first = this_sessions_run() or run_once()
    before = scratch_folders()
    ours = set(stored_runs(storage))
    second = run_once()
    runs = {name: kept for name, kept in stored_runs(storage).items() if name not in ours or name == max(ours)}
    return first, second, scratch_folders() - before, runs


def test_the_second_run_reports_what_the_first_did(two_runs):
    first, second, *_ = two_runs
    assert first["headline"] == "beans val accuracy" and not headline_problem(first), headline_problem(first)
    assert second["value"] == pytest.approx(first["value"], abs=1e-6)
    assert second["figures"]["test_accuracy"] == pytest.approx(first["figures"]["test_accuracy"], abs=1e-6)


def test_each_run_has_its_own_history_and_capped_checkpoints(two_runs):
    first, second, _, runs = two_runs
    budget = get_budget(kind="cpu", smoke_size=False)  # the local cluster has no GPU; weekly, at the course size
    reports = budget.beans.train_steps // budget.beans.eval_steps
    assert first["figures"]["reports"] == second["figures"]["reports"] == min(reports, CHECKPOINTS_KEPT)
    assert len(runs) == 2, f"each run writes a folder of its own in {storage_path()}: {sorted(runs)}"
    for name, kept in runs.items():
        assert 0 < len(kept) <= CHECKPOINTS_KEPT, f"{name}: {len(kept)} checkpoints"
        assert max(kept.values()) == budget.beans.train_steps, f"{name}: the last checkpoint is the last step"


def test_the_notebook_used_the_storage_and_loaded_its_checkpoint_back(two_runs):
    _, second, *_ = two_runs
    assert f"storage: {storage_path()}" in output_lines(NOTEBOOK)
    assert second["figures"]["test_accuracy"] > 0.5  # evaluated with the weights loaded back from the storage


def test_the_executed_copy_reads_well(two_runs):
    found = problems(NOTEBOOK)
    assert not found, "; ".join(found)


def test_no_temporary_folders_are_left_behind(two_runs):
    _, _, left, _ = two_runs
    assert not left, f"left behind: {sorted(map(str, left))}"
