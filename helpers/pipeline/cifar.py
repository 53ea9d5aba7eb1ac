"""CIFAR-10 (or its stand-in) for plain PyTorch: parquet to arrays, normalisation, ``DataLoader``s.

Importing this module costs numpy and pyarrow only (torch is imported where a ``DataLoader`` is built), so a Ray
Data worker that runs :func:`normalize` for ``map_batches`` starts without importing torch.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from helpers.course.config import filesystem

if TYPE_CHECKING:
    from torch.utils.data import DataLoader, TensorDataset

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


def normalize_batch(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """:func:`normalize` for ``map_batches``: the batch's images, labels untouched (notebook 04 writes it in a cell)."""
    return {"image": normalize(batch["image"]), "label": batch["label"]}


def tensor_dataset(images: np.ndarray, labels: np.ndarray) -> TensorDataset:
    """A torch dataset of normalised images and int64 labels."""
    import torch
    from torch.utils.data import TensorDataset

    return TensorDataset(torch.from_numpy(normalize(images)), torch.from_numpy(labels.astype(np.int64)))


def loaders(uri: str, batch_size: int, train_size: int | None, valid_size: int | None) -> tuple[DataLoader, DataLoader]:
    """Shuffled training and ordered validation ``DataLoader``s (the test split validates, as in the tutorial).

    A copy of the ``loaders`` that notebook 04 writes in its step 1 cell ("The training itself is plain PyTorch"),
    for ``make bench`` and the lessons after 04; ``tests/test_lesson_twins.py`` keeps the two equal.
    """
    import torch
    from torch.utils.data import DataLoader

    train = tensor_dataset(*load_split(uri, "train", train_size))
    valid = tensor_dataset(*load_split(uri, "test", valid_size))
    generator = torch.Generator().manual_seed(0)
    return DataLoader(train, batch_size=batch_size, shuffle=True, generator=generator), DataLoader(
        valid, batch_size=batch_size
    )
