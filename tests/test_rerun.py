"""Running a Ray Train notebook twice in a row, in the same results folder, gives the same figures.

Notebook 02 runs here twice (tests/test_notebooks.py runs every other notebook once). The second
run must not find the first one's checkpoints or history,
must report the same metrics, and must leave no temporary folders behind on the workers.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from executed import ROOT, problems, run

from helpers import config, results

NOTEBOOK = ROOT / "notebooks" / "02_ray_train_finetune.ipynb"
RUN = "02-beans-ray-train"
pytestmark = pytest.mark.notebook


def scratch_folders() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("hf-*"))


def run_once() -> dict:
    results.metrics_path(NOTEBOOK.stem).unlink(missing_ok=True)
    outcome = run(NOTEBOOK)
    assert outcome.ok, f"{NOTEBOOK.name}: {outcome.status}"
    return results.read(NOTEBOOK.stem)


@pytest.fixture(scope="module")
def two_runs() -> tuple[dict, dict, set[Path]]:
    before = scratch_folders()
    first, second = run_once(), run_once()
    return first, second, scratch_folders() - before


def test_the_second_run_reports_what_the_first_did(two_runs):
    first, second, _ = two_runs
    assert first["headline"] == "beans val accuracy" and first["value"] >= first["floor"]
    assert second["value"] == pytest.approx(first["value"], abs=1e-6)
    assert second["figures"]["test_accuracy"] == pytest.approx(first["figures"]["test_accuracy"], abs=1e-6)


def test_each_run_has_its_own_history_and_capped_checkpoints(two_runs):
    first, second, _ = two_runs
    budget = config.get_budget(kind="cpu")  # the local cluster has no GPU
    reports = budget.beans_train_steps // budget.beans_eval_steps
    assert first["figures"]["reports"] == second["figures"]["reports"] == min(reports, config.CHECKPOINTS_KEPT)
    runs = sorted(Path(config.storage_path()).glob(f"{RUN}-*"))
    assert len(runs) >= 2, "each run writes a folder of its own"
    for folder in runs[-2:]:
        kept = [path for path in folder.glob("checkpoint_*") if path.is_dir()]  # not checkpoint_manager_snapshot.json
        assert 0 < len(kept) <= config.CHECKPOINTS_KEPT, f"{folder.name}: {len(kept)} checkpoints"
        assert json.loads((next(iter(kept)) / "checkpoint" / "trainer_state.json").read_text())["global_step"] > 0


def test_the_executed_copy_reads_well(two_runs):
    found = problems(NOTEBOOK)
    assert not found, "; ".join(found)


def test_no_temporary_folders_are_left_behind(two_runs):
    _, _, left = two_runs
    assert not left, f"left behind: {sorted(map(str, left))}"
