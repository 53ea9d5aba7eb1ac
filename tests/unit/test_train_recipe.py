"""Notebook 01's `TrainingArguments` and the Ray workers' recipe (helpers.train.worker_training_args) agree.

The workers run notebook 01's fine-tune; the recipe is written twice (once in the notebook, where a
learner reads it, once for the workers). This test reads notebook 01's call and fails on any
argument that differs, except those listed below with the reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from executed import calls
from transformers import TrainingArguments

from course.budget import Budget, get_budget
from course.resources import loader_workers
from helpers.train import worker_training_args

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "01_local_finetune.ipynb"
WORKERS = 2
DIFFERENT_ON_PURPOSE = {
    "output_dir": "a worker writes to a temporary folder of its own",
    "per_device_train_batch_size": "a worker takes its share of notebook 01's batch",
    "save_strategy": "a worker checkpoints at every evaluation, for Ray Train",
    "logging_steps": "workers log only at evaluations",
    "report_to": "notebook 01 tracks through the Trainer's MLflow callback; the workers, from rank 0 (notebook 02)",
    "run_name": "notebook 01's MLflow run; a worker's run is named after its Ray Train run",
}


def notebook_arguments(budget: Budget) -> dict:
    """The keyword arguments of notebook 01's `TrainingArguments(...)` call, evaluated for ``budget``."""
    found = calls(NOTEBOOK, "TrainingArguments")
    assert found, "notebook 01 has no TrainingArguments(...) call"
    names = {"budget": budget, "str": str, "output_dir": "notebook-01", "loader_workers": loader_workers}
    names["tracking_uri"] = "sqlite:///mlflow.db"  # where notebook 01's run goes (course.tracking.connect)
    return {k.arg: eval(ast.unparse(k.value), names) for k in found[0].keywords if k.arg}  # noqa: S307


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_the_workers_run_notebook_01s_recipe(kind):
    budget = get_budget(kind=kind)
    in_notebook = notebook_arguments(budget)
    notebook = TrainingArguments(**in_notebook, use_cpu=True)
    worker = worker_training_args(
        "worker",
        budget.beans.batch_size // WORKERS,
        budget.beans.train_steps,
        budget.beans.eval_steps,
        budget.eval_batch_size,
        budget.beans.learning_rate,
    )
    differ = {
        name: (getattr(notebook, name), getattr(worker, name))
        for name in in_notebook
        if name not in DIFFERENT_ON_PURPOSE and getattr(notebook, name) != getattr(worker, name)
    }
    assert not differ, f"notebook 01 vs the workers (notebook, worker): {differ}"
    assert worker.per_device_train_batch_size * WORKERS == notebook.per_device_train_batch_size
