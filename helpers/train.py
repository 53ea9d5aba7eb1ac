"""Ray Train with Hugging Face: the workers' fine-tune recipe and functions, and the course's run settings."""

from __future__ import annotations

import os
import shutil
import signal
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import ray.train
import torch
from ray.train import CheckpointConfig, LoggingConfig, RunConfig
from ray.train.huggingface.transformers import RayTrainReportCallback, prepare_trainer
from transformers import Trainer, TrainerCallback, TrainingArguments, set_seed

from helpers.beans import class_names_of, load_beans
from helpers.config import CHECKPOINTS_KEPT, Budget, Sources, run_name, storage_path, verbose
from helpers.features import collate, make_transform
from helpers.metrics import accuracy_for_trainer, load_accuracy
from helpers.models import load_classifier, load_processor
from helpers.resources import precision_args


def per_worker(global_batch_size: int, world_size: int | None = None) -> int:
    """A worker's share of a global batch (world size of this Ray Train run unless given): same steps for any size."""
    world_size = world_size or ray.train.get_context().get_world_size()
    if global_batch_size < world_size:
        raise ValueError(f"a global batch of {global_batch_size} cannot be split across {world_size} workers")
    return global_batch_size // world_size


def run_config(name: str, **options: object) -> RunConfig:
    """The course's ``RunConfig``: a run name of its own, the shared storage, capped checkpoints, quiet logs.

    ``ray.train``'s own lines (worker group started, each report, transient warnings such as a slow
    autoscaling coordinator on a busy laptop) are shown with ``COURSE_VERBOSE=1``; errors always are.
    """
    defaults = {
        "name": run_name(name),
        "storage_path": storage_path(),
        "checkpoint_config": CheckpointConfig(num_to_keep=CHECKPOINTS_KEPT),
        "logging_config": LoggingConfig(log_level="INFO" if verbose() else "ERROR"),
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
    """Notebook 01's recipe for one Ray Train worker, plus checkpoints: a test compares the two.

    What differs from notebook 01, on purpose: a worker-local ``output_dir``; a checkpoint at every
    evaluation (each is reported to Ray Train); logs only at evaluations (workers print them); no tqdm.
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
        dataloader_num_workers=0,
        ddp_find_unused_parameters=False,  # every parameter gets a gradient: no search, no warning
        disable_tqdm=True,
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


class ResumableTrainer(Trainer):
    """A ``Trainer`` that resumes from a checkpoint *with the checkpoint's weights*.

    transformers 5 names ViT's modules differently in memory than in a saved checkpoint;
    ``from_pretrained`` converts between the two, the ``Trainer``'s own resume (a plain, non-strict
    ``load_state_dict``) does not: it matched no key, warned, and trained on from the weights it had,
    with only the optimizer, schedule and step restored. tests/test_resume.py shows both.
    """

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: torch.nn.Module | None = None) -> None:
        target = model or self.model
        saved = type(target).from_pretrained(resume_from_checkpoint)
        target.load_state_dict(saved.state_dict())  # strict: every key, or an error


class MarkResume(TrainerCallback):
    """Adds ``resumed_from_step`` to the reported metrics: 0 on a fresh start, the checkpoint's step after a restart."""

    def on_train_begin(self, args, state, control, **kwargs):
        state.log_history.append({"resumed_from_step": state.global_step})  # reported with every checkpoint


class CrashAt(TrainerCallback):
    """Kill this worker's process when training reaches ``step``: a lost machine, on purpose (notebook 02b)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            print(f"worker {ray.train.get_context().get_world_rank()}: dying at step {state.global_step}", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)


def finetune_beans(loop_config: dict[str, Any], extra_callbacks: Sequence[TrainerCallback] = ()) -> None:
    """Ray Train worker: notebook 01's fine-tune, reporting metrics and checkpoints to Ray Train.

    After a failure Ray Train restarts the workers and hands them the last reported checkpoint:
    training then resumes from it (model, optimizer, schedule and step), not from step 0.
    """
    sources, budget = Sources(**loop_config["sources"]), Budget(**loop_config["budget"])
    ds = load_beans(sources)  # every worker reads the (small) data set itself
    processor = load_processor(sources.vit)
    set_seed(42)  # the same new head on every worker and in every run
    model = load_classifier(sources.vit, class_names_of(ds))
    prepared = ds.with_transform(make_transform(processor))

    with scratch_folder() as output_dir:
        args = worker_training_args(
            output_dir,
            per_worker(budget.beans_batch_size),  # the same global batch as notebook 01
            budget.beans_train_steps,
            budget.beans_eval_steps,
            budget.eval_batch_size,
            budget.beans_learning_rate,
        )
        trainer = ResumableTrainer(
            model=model,
            args=args,
            data_collator=collate,
            compute_metrics=accuracy_for_trainer(load_accuracy()),
            train_dataset=prepared["train"],
            eval_dataset=prepared["validation"],
            processing_class=processor,
        )
        trainer.add_callback(RayTrainReportCallback())  # metrics and checkpoints go to Ray Train
        for callback in [MarkResume(), *extra_callbacks]:
            trainer.add_callback(callback)
        trainer = prepare_trainer(trainer)  # Ray Data iterables as the Trainer's data (nothing to do for a HF dataset)
        checkpoint = ray.train.get_checkpoint()  # None on a fresh start; the last reported one after a restart
        if checkpoint is None:
            trainer.train()
        else:
            with checkpoint.as_directory() as folder:  # the Hugging Face checkpoint sits in checkpoint/
                trainer.train(resume_from_checkpoint=os.path.join(folder, RayTrainReportCallback.CHECKPOINT_NAME))


def finetune_from_shards(loop_config: dict[str, Any]) -> None:
    """Ray Train worker: fine-tune on this worker's shard of the Ray Data "train" set, evaluate on "valid"."""
    sources, budget = Sources(**loop_config["sources"]), Budget(**loop_config["budget"])
    set_seed(42)  # the same new head on every worker and in every run
    model = load_classifier(sources.vit, loop_config["class_names"])
    batch_size = per_worker(budget.dogs_batch_size)
    dtypes = {"pixel_values": torch.float32, "labels": torch.int64}
    train_batches = ray.train.get_dataset_shard("train").iter_torch_batches(
        batch_size=batch_size, dtypes=dtypes, local_shuffle_buffer_size=256, local_shuffle_seed=0
    )  # re-iterated every epoch; this worker sees only its shard
    valid_batches = ray.train.get_dataset_shard("valid").iter_torch_batches(
        batch_size=budget.eval_batch_size, dtypes=dtypes
    )
    with scratch_folder() as output_dir:
        args = worker_training_args(
            output_dir,
            batch_size,
            budget.dogs_train_steps,
            budget.dogs_eval_steps,
            budget.eval_batch_size,
            budget.dogs_learning_rate,
        )  # max_steps is required: a stream has no length
        trainer = Trainer(
            model=model,
            args=args,
            compute_metrics=accuracy_for_trainer(load_accuracy()),
            train_dataset=train_batches,
            eval_dataset=valid_batches,
            processing_class=load_processor(sources.vit),  # saved with every checkpoint, for inference
        )
        trainer.add_callback(RayTrainReportCallback())
        trainer = prepare_trainer(trainer)  # feeds the Ray Data iterables to the Trainer as they are
        trainer.train()
