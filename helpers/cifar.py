"""CIFAR-10 (or its stand-in) for plain PyTorch: parquet to arrays, normalisation, ``DataLoader``s.

Importing this module costs numpy and pyarrow only (torch is imported where a ``DataLoader`` is built), so a Ray
Data worker that runs :func:`normalize` for ``map_batches`` starts without importing torch.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads

from course.storage import filesystem

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

IMAGE_SHAPE = (32, 32, 3)  # CIFAR-10's images, height x width x channels
MEAN, STD = 0.5, 0.5  # per channel, as in the tutorial: pixels end up in [-1, 1]


def load_split(uri: str, split: str, limit: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 32, 32, 3) uint8 and labels (N,) of ``<uri>/<split>`` parquet, local or ``s3://``.

    With ``limit``, the first ``limit`` rows, in the files' order: only the files that hold them are read (CIFAR-10's
    train split is about 150 MB on S3; a preview of 8 images reads one file)."""
    fs, root = filesystem(f"{uri}/{split}")
    dataset = pads.dataset(root, filesystem=fs, format="parquet")
    if limit:  # file after file, in order, until there are enough rows
        parts, rows = [], 0
        for fragment in sorted(dataset.get_fragments(), key=lambda f: f.path):
            parts.append(fragment.to_table(schema=dataset.schema))
            rows += parts[-1].num_rows
            if rows >= limit:
                break
        table = pa.concat_tables(parts).slice(0, limit)
    else:
        table = dataset.to_table()
    column = table.column("image").combine_chunks()
    if isinstance(column, pa.ExtensionArray):  # Ray's tensor type, registered once ray.data is imported
        shape, column = column.type.shape, column.storage
    else:  # the same column read without Ray: a list of bytes, its shape in the field metadata (JSON, or another
        # encoding from another Ray release: then CIFAR-10's own shape)
        try:
            shape = tuple(json.loads(table.schema.field("image").metadata[b"ARROW:extension:metadata"]))
        except (KeyError, TypeError, ValueError):
            shape = IMAGE_SHAPE
    images = np.asarray(column.flatten(), dtype=np.uint8).reshape(-1, *shape)
    return images, table.column("label").to_numpy()


def normalize(images: np.ndarray) -> np.ndarray:
    """uint8 images (N, H, W, C) to float32 (N, C, H, W) with mean 0.5 and std 0.5 per channel."""
    return ((images.astype(np.float32) / 255.0 - MEAN) / STD).transpose(0, 3, 1, 2)


def normalize_batch(batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """:func:`normalize` for ``map_batches``: the batch's images, labels untouched (notebook 04 writes it in a cell)."""
    return {"image": normalize(batch["image"]), "label": batch["label"]}


class CifarImages:
    """A map-style torch dataset: the images as read (uint8, (N, 32, 32, 3)) and their labels, handed out normalised
    (float32 (3, 32, 32), as :func:`normalize` does it) a batch at a time, as a ``DataLoader`` asks for them.

    No float32 copy of the whole split sits in every process that trains: CIFAR-10's train split is 154 MB as read,
    614 MB normalised.
    """

    def __init__(self, images: np.ndarray, labels: np.ndarray) -> None:
        self.images, self.labels = images, labels.astype(np.int64)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> tuple:
        return self.__getitems__([index])[0]

    def __getitems__(self, indices: list[int]) -> list[tuple]:  # a DataLoader's batch: normalised at once
        import torch

        images = torch.from_numpy(normalize(self.images[indices]))
        return list(zip(images, torch.from_numpy(self.labels[indices]), strict=True))


def tensor_dataset(images: np.ndarray, labels: np.ndarray) -> CifarImages:
    """A torch dataset of the images (kept as read) and int64 labels: it hands out normalised images
    (:class:`CifarImages`)."""
    return CifarImages(images, labels)


def loaders(uri: str, batch_size: int, train_size: int | None, valid_size: int | None) -> tuple[DataLoader, DataLoader]:
    """Shuffled training and ordered validation ``DataLoader``s (the test split validates, as in the tutorial).

    A copy of the ``loaders`` that notebook 04 writes in its step 1 cell ("The training itself is plain PyTorch"),
    for ``make bench`` and the lessons after 04; ``tests/unit/test_lesson_twins.py`` keeps the two equal.
    """
    import torch
    from torch.utils.data import DataLoader

    from course.resources import pin_memory

    train = tensor_dataset(*load_split(uri, "train", train_size))
    valid = tensor_dataset(*load_split(uri, "test", valid_size))
    generator = torch.Generator().manual_seed(0)
    pinned = pin_memory()
    train_loader = DataLoader(train, batch_size=batch_size, shuffle=True, generator=generator, pin_memory=pinned)
    return train_loader, DataLoader(valid, batch_size=batch_size, pin_memory=pinned)
