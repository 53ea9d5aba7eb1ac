"""Plain PyTorch epoch loops (notebook 04), and reporting an epoch to Ray Train (``make bench``)."""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import ray.train
import torch
from ray.train import Checkpoint
from torch import nn
from tqdm import tqdm

from helpers.metrics import require_examples

WEIGHTS_FILE = "model.pt"  # a plain PyTorch checkpoint: the state dict of the unwrapped model


def pairs(batches: Iterable[dict[str, torch.Tensor]]) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(images, labels) tuples from Ray Data's dict batches, so the same loops serve ``DataLoader``s and Ray Data."""
    for batch in batches:
        yield batch["image"], batch["label"]


def train_epoch(
    model: nn.Module,
    batches: Iterable,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
    desc: str = "train",
    progress: bool = False,
    autocast: torch.dtype | None = None,
) -> float:
    """One pass over ``batches`` of (images, labels); returns the mean training loss.

    A copy of the ``train_epoch`` that notebook 04 writes in its step 1 cell, for ``make bench`` and the lessons
    after 04, with a progress bar (``progress=True``; off by default, as in the lesson) and ``autocast`` added;
    ``tests/unit/test_lesson_twins.py`` keeps the two equal.
    ``autocast=torch.bfloat16`` runs the forward pass in bf16 mixed precision (the weights stay fp32).
    """
    model.train()
    loss_fn = nn.CrossEntropyLoss()
    total, count = 0.0, 0
    # plain text on stdout: a notebook shows it as one updating line (a widget would break once the notebook is saved)
    for images, labels in tqdm(batches, desc=desc, leave=False, disable=not progress, file=sys.stdout):
        images, labels = images.to(device), labels.to(device)
        with torch.autocast(device.type, dtype=autocast) if autocast else contextlib.nullcontext():
            loss = loss_fn(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        total, count = total + loss.item() * len(labels), count + len(labels)
    return total / require_examples(count, desc)


@torch.no_grad()
def validate(model: nn.Module, batches: Iterable, device: torch.device) -> dict[str, float]:
    """Validation loss and accuracy over ``batches`` of (images, labels)."""
    model.eval()
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    loss, correct, count = 0.0, 0, 0
    for images, labels in batches:
        images, labels = images.to(device), labels.to(device)
        logits = model(images)
        loss += loss_fn(logits, labels).item()
        correct += (logits.argmax(-1) == labels).sum().item()
        count += len(labels)
    require_examples(count, "validation")
    return {"val_loss": loss / count, "accuracy": correct / count}


def report_epoch(
    metrics: dict[str, float], model: nn.Module | None = None, save: Callable[[Path], object] | None = None
) -> None:
    """Report one epoch to Ray Train: every worker reports its metrics, rank 0 adds a checkpoint.

    The checkpoint holds ``model``'s weights, unwrapped from ``DistributedDataParallel`` so that they load
    into a plain model, or whatever ``save(folder)`` writes (a model of another framework, for example).
    """
    with tempfile.TemporaryDirectory() as folder:
        checkpoint = None
        if ray.train.get_context().get_world_rank() == 0:
            if model is not None:
                module = model.module if hasattr(model, "module") else model  # DDP wraps it only on >1 worker
                torch.save(module.state_dict(), Path(folder) / WEIGHTS_FILE)
            if save is not None:
                save(Path(folder))
            checkpoint = Checkpoint.from_directory(folder)
        ray.train.report(metrics, checkpoint=checkpoint)  # every worker reports, or training waits for it
