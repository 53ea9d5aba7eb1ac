"""Training functions that Ray Train runs on every worker."""

from __future__ import annotations

import tempfile
from typing import Any

from transformers import Trainer, TrainingArguments, set_seed

from helpers.config import Sizes, Sources
from helpers.data import class_names, load_beans
from helpers.features import collate, make_transform
from helpers.hardware import precision_args
from helpers.metrics import accuracy_for_trainer, load_accuracy
from helpers.models import load_classifier, load_processor


def worker_training_args(sizes: Sizes, per_device_batch_size: int) -> TrainingArguments:
    """The fine-tune recipe of notebook 01 for one Ray Train worker: evaluate and checkpoint together."""
    return TrainingArguments(
        output_dir=tempfile.mkdtemp(prefix="hf-"),  # worker-local; Ray Train copies checkpoints to storage
        max_steps=sizes.beans_train_steps,
        per_device_train_batch_size=per_device_batch_size,
        per_device_eval_batch_size=64,
        learning_rate=sizes.learning_rate,
        lr_scheduler_type="cosine",
        warmup_steps=0.1,
        weight_decay=0.05,
        eval_strategy="steps",
        eval_steps=sizes.beans_eval_steps,
        save_strategy="steps",  # each save is reported to Ray Train with the latest metrics
        save_steps=sizes.beans_eval_steps,
        save_total_limit=1,
        logging_steps=sizes.beans_eval_steps,  # workers print their logs: keep them few
        remove_unused_columns=False,
        disable_tqdm=True,
        seed=42,
        **precision_args(),
    )


def finetune_beans(config: dict[str, Any]) -> None:
    """Ray Train worker: notebook 01's fine-tune, reporting metrics and checkpoints to Ray Train."""
    from ray.train import get_context
    from ray.train.huggingface.transformers import RayTrainReportCallback, prepare_trainer

    sources, sizes = Sources(**config["sources"]), Sizes(**config["sizes"])
    ds = load_beans(sources)  # every worker reads the (small) data set itself
    labels = class_names(ds)
    processor = load_processor(sources.vit)
    set_seed(42)  # the same new head on every worker and in every run
    model = load_classifier(sources.vit, labels)
    prepared = ds.with_transform(make_transform(processor))

    per_device = max(1, sizes.beans_batch_size // get_context().get_world_size())  # same global batch as 01
    trainer = Trainer(
        model=model,
        args=worker_training_args(sizes, per_device),
        data_collator=collate,
        compute_metrics=accuracy_for_trainer(load_accuracy()),
        train_dataset=prepared["train"],
        eval_dataset=prepared["validation"],
        processing_class=processor,
    )
    trainer.add_callback(RayTrainReportCallback())  # metrics and checkpoints go to Ray Train
    trainer = prepare_trainer(trainer)  # distributed sampling and devices for this worker
    trainer.train()
