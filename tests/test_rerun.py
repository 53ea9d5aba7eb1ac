"""Running a Ray Train notebook twice in a row, in the same results folder, gives the same figures.

Notebook 02 runs here twice (`make test` leaves it out of the nbmake pass, so it still runs
twice, not three times). The second run must not find the first one's checkpoints or history,
must report the same metrics, and must leave no temporary folders behind on the workers.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from helpers import config, results

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "02_ray_train_finetune.ipynb"
RUN = "02-beans-ray-train"


def scratch_folders() -> set[Path]:
    return set(Path(tempfile.gettempdir()).glob("hf-*"))


def run_once() -> dict[str, float]:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        notebook, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOK.parent)}}
    ).execute()
    return results.read(NOTEBOOK.stem)


@pytest.fixture(scope="module")
def two_runs() -> tuple[dict, dict, set[Path]]:
    before = scratch_folders()
    first, second = run_once(), run_once()
    return first, second, scratch_folders() - before


def test_the_second_run_reports_what_the_first_did(two_runs):
    first, second, _ = two_runs
    assert first["val_accuracy"] >= 0.80
    assert second["val_accuracy"] == pytest.approx(first["val_accuracy"], abs=1e-6)
    assert second["test_accuracy"] == pytest.approx(first["test_accuracy"], abs=1e-6)


def test_each_run_has_its_own_history_and_capped_checkpoints(two_runs):
    first, second, _ = two_runs
    sizes = config.get_sizes()
    reports = sizes.beans_train_steps // sizes.beans_eval_steps
    assert first["reports"] == second["reports"] == min(reports, config.CHECKPOINTS_KEPT), "one run per history"
    runs = sorted(Path(config.storage_path()).glob(f"{RUN}-*"))
    assert len(runs) >= 2, "each run writes a folder of its own"
    for run in runs[-2:]:
        kept = [path for path in run.glob("checkpoint_*") if path.is_dir()]  # not checkpoint_manager_snapshot.json
        assert 0 < len(kept) <= config.CHECKPOINTS_KEPT, f"{run.name}: {len(kept)} checkpoints"
        assert json.loads((next(iter(kept)) / "checkpoint" / "trainer_state.json").read_text())["global_step"] > 0


def test_no_temporary_folders_are_left_behind(two_runs):
    _, _, left = two_runs
    assert not left, f"left behind: {sorted(map(str, left))}"
