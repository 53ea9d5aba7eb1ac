"""CIFAR-10 (or its stand-in) for plain PyTorch: parquet to arrays, normalisation, loaders, the epoch loops."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
from tqdm.auto import tqdm

from helpers.config import filesystem
from helpers.metrics import require_examples

MEAN, STD = 0.5, 0.5  # per channel, as in the tutorial: pixels end up in [-1, 1]


def load_split(uri: str, split: str, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 32, 32, 3) uint8 and labels (N,) of ``<uri>/<split>`` parquet, local or ``s3://``."""
    fs, root = filesystem(f"{uri}/{split}")
    table = pq.read_table(root, filesystem=fs)
    if limit:
        table = table.slice(0, limit)
    column = table.column("image").combine_chunks()
    if isinstance(column, pa.ExtensionArray):  # Ray's tensor type, registered once ray.data is imported
        shape, column = column.type.shape, column.storage
    else:  # the same column read without Ray: a list of bytes, its shape in the field metadata
        shape = json.loads(table.schema.field("image").metadata[b"ARROW:extension:metadata"])
    images = np.asarray(column.flatten(), dtype=np.uint8).reshape(-1, *shape)
    return images, table.column("label").to_numpy()


def normalize(images: np.ndarray) -> np.ndarray:
    """uint8 images (N, H, W, C) to float32 (N, C, H, W) with mean 0.5 and std 0.5 per channel."""
    return ((images.astype(np.float32) / 255.0 - MEAN) / STD).transpose(0, 3, 1, 2)


def tensor_dataset(images: np.ndarray, labels: np.ndarray) -> TensorDataset:
    """A torch dataset of normalised images and int64 labels."""
    return TensorDataset(torch.from_numpy(normalize(images)), torch.from_numpy(labels.astype(np.int64)))


def loaders(uri: str, batch_size: int, train_size: int, valid_size: int) -> tuple[DataLoader, DataLoader]:
    """Shuffled training and ordered validation ``DataLoader``s (the test split validates, as in the tutorial)."""
    train = tensor_dataset(*load_split(uri, "train", train_size))
    valid = tensor_dataset(*load_split(uri, "test", valid_size))
    generator = torch.Generator().manual_seed(0)
    return DataLoader(train, batch_size=batch_size, shuffle=True, generator=generator), DataLoader(
        valid, batch_size=batch_size
    )


def pairs(batches: Iterable[dict[str, torch.Tensor]]) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(images, labels) tuples from Ray Data's dict batches, so the same loops serve both."""
    for batch in batches:
        yield batch["image"], batch["label"]


def train_epoch(
    model: nn.Module,
    batches: Iterable,
    optimizer: torch.optim.Optimizer,
    device: torch.device,
    desc: str = "train",
    progress: bool = True,
) -> float:
    """One pass over ``batches`` of (images, labels); returns the mean training loss."""
    model.train()
    loss_fn = nn.CrossEntropyLoss()
    total, count = 0.0, 0
    for images, labels in tqdm(batches, desc=desc, leave=False, disable=not progress):
        images, labels = images.to(device), labels.to(device)
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
