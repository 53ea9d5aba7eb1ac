"""Ray Train with Hugging Face: the workers' recipe and scratch folder, resuming, crashing on purpose, run settings."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import ray.train
from ray.train import CheckpointConfig, LoggingConfig, RunConfig
from transformers import TrainerCallback, TrainingArguments

from course import internals
from course.config import verbose
from course.resources import loader_workers, precision_args
from course.storage import CHECKPOINTS_KEPT, run_name, storage_path


def per_worker(global_batch_size: int, world_size: int | None = None) -> int:
    """A worker's share of a global batch (world size of this Ray Train run unless given): same steps for any size."""
    world_size = world_size or ray.train.get_context().get_world_size()
    if global_batch_size < world_size:
        raise ValueError(f"a global batch of {global_batch_size} cannot be split across {world_size} workers")
    return global_batch_size // world_size


def run_config(name: str, **options: object) -> RunConfig:
    """The course's ``RunConfig``: a run name of its own, the shared storage, capped checkpoints, quiet logs.

    A copy of the ``run_config`` that notebook 02 writes in its cell of section 3 ("Scale and storage"), for
    the lessons after it; ``tests/unit/test_lesson_twins.py`` keeps the two equal. ``ray.train``'s own lines (worker
    group started, each report, transient warnings such as a slow autoscaling coordinator on a busy laptop) are
    shown with ``COURSE_VERBOSE=1``; errors always are.
    """
    defaults = {
        "name": run_name(name),  # <name>-<date>_<time>: a folder of its own per run, reruns never mix
        "storage_path": storage_path(),
        "checkpoint_config": CheckpointConfig(num_to_keep=CHECKPOINTS_KEPT),  # older ones go as new ones come
        "logging_config": LoggingConfig(log_level="INFO" if verbose() else "ERROR"),  # Ray Train's own lines
    }
    return RunConfig(**(defaults | options))


def worker_training_args(
    output_dir: str,
    per_device_batch_size: int,
    max_steps: int,
    eval_steps: int,
    eval_batch_size: int,
    learning_rate: float,
) -> TrainingArguments:
    """Notebook 01's recipe (``TrainingArguments``) for one Ray Train worker, plus checkpoints.

    A copy of the ``worker_training_args`` that notebook 02 writes in its cell of section 2, for 02b and 03;
    ``tests/unit/test_lesson_twins.py`` keeps the two equal. What differs from notebook 01, on purpose: a worker-local
    ``output_dir``; a checkpoint at every evaluation (each is reported to Ray Train); logs only at evaluations
    (workers print them); no tqdm.
    """
    return TrainingArguments(
        output_dir=output_dir,  # worker-local and temporary; Ray Train copies checkpoints to storage
        max_steps=max_steps,
        per_device_train_batch_size=per_device_batch_size,
        per_device_eval_batch_size=eval_batch_size,
        learning_rate=learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=0.1,
        weight_decay=0.05,
        eval_strategy="steps",
        eval_steps=eval_steps,
        save_strategy="steps",  # each save is reported to Ray Train with the latest metrics
        save_steps=eval_steps,
        save_total_limit=1,
        logging_steps=eval_steps,  # workers print their logs: keep them few
        remove_unused_columns=False,
        dataloader_num_workers=loader_workers(),  # on a GPU, processes decode the images beside training
        ddp_find_unused_parameters=False,  # every parameter gets a gradient: no search, no warning
        disable_tqdm=True,
        log_level_replica="passive",  # ranks after 0 log as rank 0 does (transformers' default for them: warnings)
        seed=42,
        **precision_args(),
    )


@contextmanager
def scratch_folder() -> Iterator[str]:
    """A worker-local folder for the Trainer's own checkpoints (Ray Train copies each to storage).

    One per run and rank, removed when training ends, and also when a restarted worker starts: a
    worker that was killed could not remove its own.
    """
    context = ray.train.get_context()
    folder = Path(tempfile.gettempdir()) / f"hf-{context.get_experiment_name()}-rank{context.get_world_rank()}"
    shutil.rmtree(folder, ignore_errors=True)
    try:
        yield str(folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class MarkResume(TrainerCallback):
    """Adds ``resumed_from_step`` to the reported metrics: 0 on a fresh start, the checkpoint's step after a restart."""

    def on_train_begin(self, args, state, control, **kwargs):
        state.log_history.append({"resumed_from_step": state.global_step})  # reported with every checkpoint


class CrashAt(TrainerCallback):
    """Kill this worker's process when training reaches ``step``: a lost machine, on purpose (notebook 02b).

    It dies once the controller has taken its last report (``internals.wait_until_reports_collected``), and a
    health-check interval later, while the answer travels: the run then resumes from exactly its last checkpoint.
    A machine lost in the instant after a report loses that report (seen at the smoke size, where steps are short:
    the run resumed from the checkpoint before it)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            internals.wait_until_reports_collected()
            print(f"worker {ray.train.get_context().get_world_rank()}: dying at step {state.global_step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
