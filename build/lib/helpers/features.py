"""Featurizing images for the pretrained model: the processor call on images, a dataset transform, a collator."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from PIL import Image
from transformers import BaseImageProcessor

Batch = dict[str, np.ndarray]  # a Ray Data batch in numpy format


def to_rgb(image: Image.Image | np.ndarray) -> Image.Image:
    """A PIL RGB image: grayscale or RGBA inputs would break a 3-channel normalisation."""
    if isinstance(image, np.ndarray):
        image = Image.fromarray(image.squeeze())
    return image if image.mode == "RGB" else image.convert("RGB")


def pixel_values(processor: BaseImageProcessor, images: Sequence[Image.Image | np.ndarray]) -> torch.Tensor:
    """A float32 tensor (N, 3, H, W) ready for the model, from PIL images or HxWxC arrays."""
    return processor([to_rgb(image) for image in images], return_tensors="pt")["pixel_values"]


def make_transform(processor: BaseImageProcessor) -> Callable[[dict[str, list]], dict[str, Any]]:
    """A batch transform for ``Dataset.with_transform``: images become ``pixel_values``, labels stay.

    A copy of the ``transform`` that notebook 01 writes in its cell of section 3, for the lessons after it
    (tests/unit/test_lesson_twins.py keeps the two equal)."""

    def transform(batch: dict[str, list]) -> dict[str, Any]:
        return {"pixel_values": pixel_values(processor, batch["image"]), "labels": batch["labels"]}

    return transform


def collate(examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
    """Stack transformed examples into one batch for the ``Trainer``.

    A copy of the ``collate`` that notebook 01 writes in its cell of section 3 (tests/unit/test_lesson_twins.py)."""
    return {
        "pixel_values": torch.stack([example["pixel_values"] for example in examples]),
        "labels": torch.tensor([example["labels"] for example in examples]),
    }
